"""Conversations, working memory and summaries: small rows, compare-and-set where it matters."""

from __future__ import annotations

import json
import time
from typing import Any

from memray.errors import ConflictError, NotFoundError, ValidationError
from memray.ids import ConversationKey, user_hash, validate_id
from memray.models import ConversationOrder
from memray.store.base import ConversationSnapshot, SummaryState, WMScope
from memray.store.database import Database
from memray.store.rows import MessageRow
from memray.store.schema import MESSAGE_COLUMNS
from memray.validation import check_text, json_text

__all__ = [
    "create_conversation",
    "get_conversation",
    "list_conversations",
    "count_conversations",
    "retitle",
    "update_conversation",
    "load_conversation",
    "get_working_memory",
    "put_working_memory",
    "get_summary",
    "put_summary",
]

_CONV_COLS = "app, user_id, conversation_id, title, metadata_json, created_at, updated_at, last_seq"
_ORDERS = {
    "updated_desc": "updated_at DESC, conversation_id DESC",
    "updated_asc": "updated_at ASC, conversation_id ASC",
    "created_desc": "created_at DESC, conversation_id DESC",
    "created_asc": "created_at ASC, conversation_id ASC",
    "title_asc": "title ASC NULLS LAST, conversation_id ASC",
    "title_desc": "title DESC NULLS LAST, conversation_id DESC",
}
_KEY_WHERE = "app = ? AND user_id = ? AND conversation_id = ?"


def _key(key: ConversationKey) -> list[Any]:
    return [
        validate_id("app", key.app),
        validate_id("user_id", key.user_id),
        validate_id("conversation_id", key.conversation_id),
    ]


def _info(row: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "app": row[0],
        "user_id": row[1],
        "conversation_id": row[2],
        "title": row[3],
        "metadata": json.loads(row[4]),
        "created_at": row[5],
        "updated_at": row[6],
        "last_seq": row[7],
    }


def _metadata_json(field: str, metadata: Any) -> str:
    if not isinstance(metadata, dict):
        raise ValidationError(field, metadata, "must be a dict")
    return json_text(field, metadata)  # strict JSON that encodes as UTF-8, or a ValidationError


def get_conversation(db: Database, key: ConversationKey) -> dict[str, Any] | None:
    rows = db.sql(f"SELECT {_CONV_COLS} FROM conversations WHERE {_KEY_WHERE}", _key(key)).fetchall()
    return _info(rows[0]) if rows else None


def create_conversation(
    db: Database, key: ConversationKey, title: str | None, metadata: dict[str, Any]
) -> dict[str, Any]:
    """Get-or-create: an existing conversation is returned unchanged. Durable on return."""
    meta = _metadata_json("metadata", metadata)
    if title is not None and not isinstance(title, str):
        raise ValidationError("title", title, "must be a string or None")
    check_text("title", title)
    found = get_conversation(db, key)
    if found is not None:
        return found
    now = time.time()
    with db.transaction() as version:
        db.sql(
            "INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
            [*_key(key), title, meta, now, now, user_hash(key.app, key.user_id), version],
        )
    created = get_conversation(db, key)
    assert created is not None
    return created


def list_conversations(
    db: Database, app: str, user_id: str, order: ConversationOrder, limit: int, offset: int
) -> list[dict[str, Any]]:
    """A page of the user's conversations in ``order`` (titles: untitled ones last)."""
    if order not in _ORDERS:
        raise ValidationError("order", order, f"must be one of {sorted(_ORDERS)}")
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValidationError(name, value, "must be a non-negative integer")
    rows = db.sql(
        f"SELECT {_CONV_COLS} FROM conversations WHERE app = ? AND user_id = ? "
        f"ORDER BY {_ORDERS[order]} LIMIT ? OFFSET ?",
        [app, user_id, limit, offset],
    ).fetchall()
    return [_info(r) for r in rows]


def count_conversations(db: Database, app: str, user_id: str) -> int:
    return int(
        db.sql("SELECT count(*) FROM conversations WHERE app = ? AND user_id = ?", [app, user_id]).fetchall()[0][0]
    )


def retitle(db: Database, key: ConversationKey, expected: str | None, title: str) -> bool:
    """Set the title only if it is still ``expected`` (a generated title never overwrites one a
    caller set meanwhile). True if written. Durable on return."""
    if not isinstance(title, str) or not title.strip():
        raise ValidationError("title", title, "must be a non-empty string")
    with db.transaction() as version:
        rows = db.sql(f"SELECT title FROM conversations WHERE {_KEY_WHERE}", _key(key)).fetchall()
        if not rows or rows[0][0] != expected:
            return False
        db.sql(
            f"UPDATE conversations SET title = ?, changed_version = ? WHERE {_KEY_WHERE}", [title, version, *_key(key)]
        )
    return True


def update_conversation(
    db: Database, key: ConversationKey, title: str | None, metadata_patch: dict[str, Any] | None
) -> dict[str, Any]:
    """Set the title if given; merge ``metadata_patch`` (keys set, others kept). Durable on return."""
    if metadata_patch is not None:
        _metadata_json("metadata_patch", metadata_patch)
    if title is not None and not isinstance(title, str):
        raise ValidationError("title", title, "must be a string or None")
    check_text("title", title)
    with db.transaction() as version:
        rows = db.sql(f"SELECT title, metadata_json FROM conversations WHERE {_KEY_WHERE}", _key(key)).fetchall()
        if not rows:
            raise NotFoundError(
                f"conversation {key.conversation_id!r} of user {key.user_id!r} "
                f"(app {key.app!r}) does not exist; create it first"
            )
        merged = {**json.loads(rows[0][1]), **(metadata_patch or {})}
        db.sql(
            f"UPDATE conversations SET title = ?, metadata_json = ?, updated_at = ?, changed_version = ? "
            f"WHERE {_KEY_WHERE}",
            [
                title if title is not None else rows[0][0],
                json.dumps(merged, ensure_ascii=False),
                time.time(),
                version,
                *_key(key),
            ],
        )
    updated = get_conversation(db, key)
    assert updated is not None
    return updated


def load_conversation(db: Database, key: ConversationKey, window: int) -> ConversationSnapshot:
    return load_conversations(db, [key], window)[0]


def load_conversations(db: Database, keys: list[ConversationKey], window: int) -> list[ConversationSnapshot]:
    """:func:`load_conversation` for many keys in two queries (hosts load conversations in bulk)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValidationError("window", window, "must be a non-negative integer")
    if not keys:
        return []
    import pyarrow as pa

    wanted = pa.table(
        {
            "app": [k.app for k in keys],
            "user_id": [k.user_id for k in keys],
            "conversation_id": [k.conversation_id for k in keys],
        }
    )
    db.con.register("_wanted", wanted)
    try:
        found = db.sql(
            "SELECT c.app, c.user_id, c.conversation_id, c.last_seq FROM conversations c "
            "JOIN _wanted w USING (app, user_id, conversation_id)"
        ).fetchall()
        recent: dict[tuple[str, str, str], list[MessageRow]] = {}
        if found and window:
            cols = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS)
            rows = db.sql(
                f"SELECT {cols} FROM (SELECT m.*, row_number() OVER (PARTITION BY m.app, m.user_id, m.conversation_id "
                f"ORDER BY m.seq DESC) AS rn FROM messages m JOIN _wanted w USING (app, user_id, conversation_id)) m "
                f"WHERE rn <= {int(window)} ORDER BY m.app, m.user_id, m.conversation_id, m.seq"
            ).fetchall()
            for r in rows:
                row = MessageRow._make(r)
                recent.setdefault((row.app, row.user_id, row.conversation_id), []).append(row)
    finally:
        db.con.unregister("_wanted")
    last = {(a, u, c): int(seq) for a, u, c, seq in found}
    out = []
    for k in keys:
        t = (k.app, k.user_id, k.conversation_id)
        out.append(ConversationSnapshot(t in last, last.get(t, 0), recent.get(t, [])))
    return out


# -- working memory ------------------------------------------------------------------------
def _wm_key(app: str, user_id: str, scope: WMScope, conversation_id: str | None) -> list[Any]:
    validate_id("app", app)
    validate_id("user_id", user_id)
    if scope == "conversation":
        return [app, user_id, scope, validate_id("conversation_id", conversation_id)]
    if scope == "user":
        return [app, user_id, scope, ""]
    raise ValidationError("scope", scope, "must be 'conversation' or 'user'")


_WM_WHERE = "app = ? AND user_id = ? AND scope = ? AND conversation_id = ?"


def get_working_memory(
    db: Database, app: str, user_id: str, scope: WMScope, conversation_id: str | None
) -> tuple[str | None, int]:
    rows = db.sql(
        f"SELECT content, version FROM working_memory WHERE {_WM_WHERE}", _wm_key(app, user_id, scope, conversation_id)
    ).fetchall()
    return (rows[0][0], int(rows[0][1])) if rows else (None, 0)


def put_working_memory(
    db: Database,
    app: str,
    user_id: str,
    scope: WMScope,
    conversation_id: str | None,
    content: str | None,
    expected_version: int,
) -> int:
    """Compare-and-set on version (``None`` clears). Durable on return; on conflict nothing written."""
    key = _wm_key(app, user_id, scope, conversation_id)
    if content is not None and not isinstance(content, str):
        raise ValidationError("content", content, "must be a string or None")
    check_text("content", content)
    with db.transaction():
        rows = db.sql(f"SELECT version FROM working_memory WHERE {_WM_WHERE}", key).fetchall()
        current = int(rows[0][0]) if rows else 0
        _cas("working memory", current, expected_version)
        db.sql(f"DELETE FROM working_memory WHERE {_WM_WHERE}", key)
        db.sql(
            "INSERT INTO working_memory VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [*key, content, current + 1, time.time(), user_hash(app, user_id)],
        )
    return current + 1


def _cas(what: str, current: int, expected: int) -> None:
    if current != expected:
        raise ConflictError(
            f"{what} is at version {current}, the write expected {expected}: re-read it and retry",
            expected=expected,
            actual=current,
        )


# -- summaries -----------------------------------------------------------------------------
def get_summary(db: Database, key: ConversationKey) -> SummaryState | None:
    rows = db.sql(
        f"SELECT text, summarized_through_seq, version FROM summaries WHERE {_KEY_WHERE}", _key(key)
    ).fetchall()
    return SummaryState(rows[0][0], int(rows[0][1]), int(rows[0][2])) if rows else None


def put_summary(db: Database, key: ConversationKey, text: str, through_seq: int, expected_version: int) -> int:
    """Compare-and-set on version. Durable on return; on conflict nothing written."""
    if not isinstance(text, str):
        raise ValidationError("text", text, "must be a string")
    check_text("text", text)
    if isinstance(through_seq, bool) or not isinstance(through_seq, int) or through_seq < 0:
        raise ValidationError("through_seq", through_seq, "must be a non-negative integer")
    params = _key(key)
    with db.transaction():
        rows = db.sql(f"SELECT version FROM summaries WHERE {_KEY_WHERE}", params).fetchall()
        current = int(rows[0][0]) if rows else 0
        _cas("summary", current, expected_version)
        db.sql(f"DELETE FROM summaries WHERE {_KEY_WHERE}", params)
        db.sql(
            "INSERT INTO summaries VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [*params, text, through_seq, current + 1, time.time(), user_hash(key.app, key.user_id)],
        )
    return current + 1


def context_extras(
    db: Database, requests: list[tuple[ConversationKey, WMScope]]
) -> list[tuple[str | None, str | None, int]]:
    """(summary text, working-memory content of the requested scope, the seq the summary covers
    through: 0 without one) for many conversations in two queries: what ``context()`` needs
    besides messages, batched across concurrent callers."""
    if not requests:
        return []
    import pyarrow as pa

    wanted = pa.table(
        {
            "i": list(range(len(requests))),
            "app": [k.app for k, _ in requests],
            "user_id": [k.user_id for k, _ in requests],
            "conversation_id": [k.conversation_id for k, _ in requests],
            "scope": [scope for _, scope in requests],
            "wm_conversation_id": [k.conversation_id if scope == "conversation" else "" for k, scope in requests],
        }
    )
    db.con.register("_ctx", wanted)
    try:
        summaries = db.sql(
            "SELECT w.i, s.text, s.summarized_through_seq FROM summaries s "
            "JOIN _ctx w USING (app, user_id, conversation_id)"
        ).fetchall()
        notes = db.sql(
            "SELECT w.i, m.content FROM working_memory m JOIN _ctx w ON m.app = w.app AND m.user_id = w.user_id "
            "AND m.scope = w.scope AND m.conversation_id = w.wm_conversation_id"
        ).fetchall()
    finally:
        db.con.unregister("_ctx")
    summary = {i: (text, int(through)) for i, text, through in summaries}
    note = dict(notes)
    return [(summary.get(i, (None, 0))[0], note.get(i), summary.get(i, (None, 0))[1]) for i in range(len(requests))]
