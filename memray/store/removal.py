"""Removing rows: a conversation, some or all of its messages, a user (the physical erasure),
and counting what is left (the deletion checks). Each delete is one transaction, then purges the
rows from every Parquet export root the store wrote to.
"""

from __future__ import annotations

import os

import pyarrow as pa

from memray.errors import ValidationError
from memray.ids import ConversationKey, validate_id
from memray.store import export
from memray.store.database import Database
from memray.store.schema import TABLES

__all__ = ["delete_conversation", "delete_messages", "clear_messages", "count_messages", "delete_user", "count_user"]


def delete_conversation(db: Database, key: ConversationKey) -> dict[str, int]:
    k = [
        validate_id("app", key.app),
        validate_id("user_id", key.user_id),
        validate_id("conversation_id", key.conversation_id),
    ]
    where = "app = ? AND user_id = ? AND conversation_id = ?"
    with db.transaction():
        counts = {
            "embeddings": db.count(
                "DELETE FROM embeddings WHERE app = ? AND user_id = ? AND kind = 'conv' AND scope = ?", k
            ),
            "messages": db.count(f"DELETE FROM messages WHERE {where}", k),
            "summaries": db.count(f"DELETE FROM summaries WHERE {where}", k),
            "working_memory": db.count(f"DELETE FROM working_memory WHERE {where} AND scope = 'conversation'", k),
            "conversations": db.count(f"DELETE FROM conversations WHERE {where}", k),
            "dead_letters": db.count(f"DELETE FROM dead_letters WHERE {where}", k),
        }
    counts["export_rows"] = sum(
        export.purge_conversation(db, r, key.app, key.user_id, key.conversation_id)
        for r in export.export_roots(db)
        if os.path.isdir(r)
    )
    return counts


def delete_messages(db: Database, key: ConversationKey, ids: list[str]) -> dict[str, int]:
    k = [
        validate_id("app", key.app),
        validate_id("user_id", key.user_id),
        validate_id("conversation_id", key.conversation_id),
    ]
    wanted = [validate_id("message.id", i) for i in dict.fromkeys(ids)]
    if not wanted:
        return {"messages": 0, "embeddings": 0, "export_rows": 0}
    with db.transaction(_gone=pa.table({"id": pa.array(wanted, pa.string())})):
        counts = {
            "embeddings": db.count(
                "DELETE FROM embeddings e USING _gone g WHERE e.app = ? AND "
                "e.user_id = ? AND e.kind = 'conv' AND e.scope = ? AND e.doc_id = g.id",
                k,
            ),
            "messages": db.count(
                "DELETE FROM messages m USING _gone g WHERE m.app = ? AND m.user_id = ? "
                "AND m.conversation_id = ? AND m.id = g.id",
                k,
            ),
        }
    roots = [r for r in export.export_roots(db) if os.path.isdir(r)] if counts["messages"] else []
    counts["export_rows"] = sum(
        export.purge_conversation(db, r, key.app, key.user_id, key.conversation_id, wanted) for r in roots
    )
    return counts


def clear_messages(db: Database, key: ConversationKey, through_seq: int) -> tuple[dict[str, int], list[str]]:
    k = [
        validate_id("app", key.app),
        validate_id("user_id", key.user_id),
        validate_id("conversation_id", key.conversation_id),
    ]
    if isinstance(through_seq, bool) or not isinstance(through_seq, int) or through_seq < 0:
        raise ValidationError("through_seq", through_seq, "must be a non-negative integer")
    where = "app = ? AND user_id = ? AND conversation_id = ?"
    with db.transaction():
        n_emb = db.count(
            f"DELETE FROM embeddings e USING (SELECT id FROM messages WHERE {where} AND seq <= ?) g "
            "WHERE e.app = ? AND e.user_id = ? AND e.kind = 'conv' AND e.scope = ? AND e.doc_id = g.id",
            [*k, through_seq, *k],
        )
        ids = [
            str(r[0])
            for r in db.sql(
                f"DELETE FROM messages WHERE {where} AND seq <= ? RETURNING id", [*k, through_seq]
            ).fetchall()
        ]
        n_sum = db.count(f"DELETE FROM summaries WHERE {where}", k)
    roots = [r for r in export.export_roots(db) if os.path.isdir(r)] if ids else []
    exported = sum(export.purge_conversation(db, r, key.app, key.user_id, key.conversation_id, ids) for r in roots)
    return {"messages": len(ids), "embeddings": n_emb, "summaries": n_sum, "export_rows": exported}, ids


def count_messages(db: Database, key: ConversationKey, ids: list[str] | None = None) -> dict[str, int]:
    k = [key.app, key.user_id, key.conversation_id]
    tables = {"ids": pa.table({"id": pa.array(list(ids or []), pa.string())})}
    only = "AND id IN (SELECT id FROM _ids)" if ids is not None else ""
    db.con.register("_ids", tables["ids"])
    try:
        messages_left = db.sql(
            f"SELECT count(*) FROM messages WHERE app = ? AND user_id = ? AND conversation_id = ? {only}", k
        ).fetchall()[0][0]
        only_e = "AND doc_id IN (SELECT id FROM _ids)" if ids is not None else ""
        vectors_left = db.sql(
            f"SELECT count(*) FROM embeddings WHERE app = ? AND user_id = ? AND kind = 'conv' AND scope = ? {only_e}", k
        ).fetchall()[0][0]
    finally:
        db.con.unregister("_ids")
    exported = sum(
        export.count_messages(r, key.app, key.user_id, key.conversation_id, ids)
        for r in export.export_roots(db)
        if os.path.isdir(r)
    )
    return {"messages": int(messages_left), "embeddings": int(vectors_left), "export_rows": exported}


def delete_user(db: Database, app: str, user_id: str) -> dict[str, int]:
    validate_id("app", app)
    validate_id("user_id", user_id)
    with db.transaction():
        counts = {t: db.count(f"DELETE FROM {t} WHERE app = ? AND user_id = ?", [app, user_id]) for t in TABLES}
        db.mark_rewrite_pending()
    counts["export_rows"] = sum(
        export.purge_exports(db, r, app, user_id) for r in export.export_roots(db) if os.path.isdir(r)
    )
    db.rewrite()
    return counts


def count_user(db: Database, app: str, user_id: str) -> dict[str, int]:
    return {
        t: int(db.sql(f"SELECT count(*) FROM {t} WHERE app = ? AND user_id = ?", [app, user_id]).fetchall()[0][0])
        for t in TABLES
    }
