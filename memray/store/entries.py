"""Long-term entries: put (replacing by id or by session), get, list by scope, delete; an entry's
vectors go with it."""

from __future__ import annotations

import pyarrow as pa

from memray.errors import ValidationError
from memray.ids import validate_id
from memray.store.database import Database
from memray.store.rows import EntryRow
from memray.store.schema import ENTRY_COLUMNS, entry_batch

__all__ = ["put_entries", "get_entries", "list_entries", "entry_projects", "delete_entries"]

_ECOLS = ", ".join(ENTRY_COLUMNS)


def _drop_entry_vectors(db: Database, app: str, user_id: str, ids: list[str]) -> None:
    if ids:
        db.con.register("_gone", pa.table({"id": pa.array(ids, pa.string())}))
        try:
            db.sql(
                "DELETE FROM embeddings e USING _gone g WHERE e.kind = 'entry' AND e.app = ? "
                "AND e.user_id = ? AND e.doc_id = g.id",
                [app, user_id],
            )
        finally:
            db.con.unregister("_gone")


def put_entries(db: Database, rows: list[EntryRow], replace_session: tuple[str, str, str] | None = None) -> list[str]:
    """Insert or replace entries by (app, user_id, id), all in one transaction; with
    ``replace_session`` first delete that session's entries.

    Returns the ids whose previous version was removed — the replaced session's entries and
    entries replaced by id (including those re-added in this call): their stored vectors were
    dropped, so the caller removes them from the indexes; the new rows are pending embedding.
    Durability: committed (WAL) on return."""
    last = {(r.app, r.user_id, r.id): r for r in rows}  # a repeated id: the last row wins
    batch = entry_batch(list(last.values())) if last else None
    if replace_session is not None:
        for name, value in zip(("app", "user_id", "session_id"), replace_session):
            validate_id(name, value)
    removed: list[str] = []
    with db.transaction() as version:
        if replace_session is not None:
            app, user, session = replace_session
            ids = [
                r[0]
                for r in db.sql(
                    "DELETE FROM entries WHERE app = ? AND user_id = ? AND session_id = ? RETURNING id",
                    [app, user, session],
                ).fetchall()
            ]
            _drop_entry_vectors(db, app, user, ids)
            removed.extend(ids)
        if batch is not None:
            db.con.register("_entries", batch)
            try:
                replaced = db.sql(
                    "DELETE FROM entries n USING _entries b WHERE n.app = b.app AND "
                    "n.user_id = b.user_id AND n.id = b.id RETURNING n.app, n.user_id, n.id"
                ).fetchall()
                db.sql(
                    "DELETE FROM embeddings e USING _entries b WHERE e.kind = 'entry' AND e.app = b.app "
                    "AND e.user_id = b.user_id AND e.doc_id = b.id"
                )
                db.sql(
                    f"INSERT INTO entries ({_ECOLS}, embed_state, model_id, embed_error, user_hash, "
                    f"changed_version) SELECT {_ECOLS}, 'pending', NULL, NULL, user_hash, {version} FROM _entries"
                )
            finally:
                db.con.unregister("_entries")
            removed.extend(r[2] for r in replaced)
    return list(dict.fromkeys(removed))


def get_entries(db: Database, app: str, user_id: str, ids: list[str]) -> list[EntryRow]:
    """Entries by id, in the order of ``ids`` (missing ones skipped)."""
    if not ids:
        return []
    db.con.register("_want", pa.table({"id": pa.array(ids, pa.string())}))
    try:
        rows = db.sql(
            f"SELECT {_ECOLS} FROM entries SEMI JOIN _want USING (id) WHERE app = ? AND user_id = ?", [app, user_id]
        ).fetchall()
    finally:
        db.con.unregister("_want")
    by_id = {r[2]: EntryRow._make(r) for r in rows}
    return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]


def list_entries(
    db: Database,
    app: str,
    user_id: str,
    project_id: str | None = None,
    session_id: str | None = None,
    all_projects: bool = False,
    limit: int | None = None,
) -> list[EntryRow]:
    """Newest first (timestamp, then id, descending). Scope: ``all_projects`` — every entry;
    else ``project_id=None`` — global entries only; else that project's entries only.
    ``session_id`` narrows further."""
    where, params = ["app = ?", "user_id = ?"], [app, user_id]
    if not all_projects:
        if project_id is None:
            where.append("project_id IS NULL")
        else:
            where.append("project_id = ?")
            params.append(validate_id("project_id", project_id))
    if session_id is not None:
        where.append("session_id = ?")
        params.append(session_id)
    query = f"SELECT {_ECOLS} FROM entries WHERE {' AND '.join(where)} ORDER BY timestamp DESC, id DESC"
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValidationError("limit", limit, "must be a non-negative integer or None")
        query += f" LIMIT {limit}"
    return [EntryRow._make(r) for r in db.sql(query, params).fetchall()]


def entry_projects(db: Database, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
    """The distinct (user_id, project_id) that hold entries in ``app`` (of one user when
    ``user_id`` is given), sorted; global entries (no project) are not listed."""
    where, params = ["app = ?", "project_id IS NOT NULL"], [validate_id("app", app)]
    if user_id is not None:
        where.append("user_id = ?")
        params.append(validate_id("user_id", user_id))
    rows = db.sql(
        f"SELECT DISTINCT user_id, project_id FROM entries WHERE {' AND '.join(where)} ORDER BY user_id, project_id",
        params,
    ).fetchall()
    return [(str(u), str(p)) for u, p in rows]


def delete_entries(db: Database, app: str, user_id: str, ids: list[str]) -> int:
    """Delete entries by id and their vectors; returns entries deleted. Durable on return."""
    if not ids:
        return 0
    with db.transaction(_del=pa.table({"id": pa.array(list(ids), pa.string())})):
        n = db.count(
            "DELETE FROM entries n USING _del d WHERE n.app = ? AND n.user_id = ? AND n.id = d.id", [app, user_id]
        )
        _drop_entry_vectors(db, app, user_id, list(ids))
    return n
