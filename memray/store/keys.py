"""The ``api_keys`` table: the server's keys, each bound to an app (and maybe a user), stored as
a SHA-256 digest of the key (``memray.service.keys`` makes and checks them; the key itself is
shown once, when it is made, and never stored). Revoking keeps the row with ``revoked_at`` set,
so ``memray keys list`` still shows what a revoked key could reach. Erasing a user deletes the
rows of the keys bound to them: no user id or label of theirs is left."""

from __future__ import annotations

from typing import NamedTuple

from memray.store.database import Database

__all__ = ["KeyRecord", "put_key", "list_keys", "revoke_key", "delete_user_keys", "count_user_keys"]


class KeyRecord(NamedTuple):
    key_id: str  # public: what list and revoke name the key by
    digest: str  # hex SHA-256 of the whole key
    app: str
    user_id: str | None  # None: every user of the app
    read_only: bool
    label: str | None
    created_at: float
    revoked_at: float | None = None


_COLUMNS = ", ".join(KeyRecord._fields)


def put_key(db: Database, record: KeyRecord) -> None:
    """Store a new key. Durability: committed on return."""
    with db.transaction(bump=False):
        db.sql(f"INSERT INTO api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", list(record))


def list_keys(db: Database, app: str | None = None) -> list[KeyRecord]:
    """Every key (of ``app`` when given), revoked ones included, oldest first."""
    where, params = ("WHERE app = ?", [app]) if app is not None else ("", [])
    rows = db.sql(f"SELECT {_COLUMNS} FROM api_keys {where} ORDER BY created_at, key_id", params).fetchall()
    return [KeyRecord(*r) for r in rows]


def revoke_key(db: Database, key_id: str, at: float) -> bool:
    """Mark the key revoked; False if no live key has that id. Durability: committed on return."""
    with db.transaction(bump=False):
        changed = db.count(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL RETURNING 1", [at, key_id]
        )
    return changed > 0


def delete_user_keys(db: Database, app: str, user_id: str) -> int:
    """Delete every key bound to the user, live or revoked (their rows hold the user's id and maybe
    a label naming them); how many. When any went, the file is rewritten (:meth:`Database.rewrite`)
    so no freed block keeps their bytes: the keys live in the first partition, which the user's
    own erasure rewrites only when it is theirs too.

    Durability: the delete is committed with the mark that a rewrite is owed (a crash before the
    rewrite finishes has :meth:`Database.open` redo it), all on return."""
    with db.transaction(bump=False):
        deleted = db.count("DELETE FROM api_keys WHERE app = ? AND user_id = ?", [app, user_id])
        if deleted:
            db.mark_rewrite_pending()
    if deleted:
        db.rewrite()
    return deleted


def count_user_keys(db: Database, app: str, user_id: str) -> int:
    """Keys bound to the user still in the table (0 after their erasure)."""
    rows = db.sql("SELECT count(*) FROM api_keys WHERE app = ? AND user_id = ?", [app, user_id]).fetchall()
    return int(rows[0][0])
