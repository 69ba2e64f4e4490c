"""Item references for a fork's shards: what changed after a version, what a shard should hold,
and the index rows of chosen items (:mod:`memray.index.fork`).

An *item* is a message (namespace kind ``conv``, scope = conversation id) or an entry (kind
``entry``, scope = project id or ``""``), as in :mod:`memray.store.items`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from memray.ids import Namespace
from memray.models.wire import RefList
from memray.store.base import IndexRow
from memray.store.database import Database
from memray.store.items import EMBEDDED, ITEM_STATE, _index_rows
from memray.store.schema import ref_batch

__all__ = ["changed_refs", "index_refs", "fetch_index_rows"]

Ref = tuple[Namespace, str]

_ITEMS = """
  SELECT app, user_id, 'conv' AS kind, conversation_id AS scope, id AS doc_id, text, CAST(seq AS DOUBLE) AS recency,
         created_at, sim_time, importance, user_hash, changed_version FROM messages
  UNION ALL
  SELECT app, user_id, 'entry', coalesce(project_id, ''), id, text, timestamp, timestamp, sim_time, importance,
         user_hash, changed_version FROM entries"""


def changed_refs(db: Database, version: int) -> list[Ref]:
    """Items written (added or updated) by a transaction after ``version``."""
    rows = db.sql(
        f"SELECT app, user_id, kind, scope, doc_id FROM ({_ITEMS}) i WHERE changed_version > ?", [int(version)]
    ).fetchall()
    return [(Namespace(r[0], r[1], r[2], r[3]), r[4]) for r in rows]


def index_refs(db: Database, shard: int, shards: int, model_id: str) -> list[tuple[Namespace, str, bool]]:
    """Every item a shard indexes (text, or a vector of ``model_id``), with whether it has a vector
    (:data:`~memray.store.items.EMBEDDED`: stored, or recomputed by the shard from the text)."""
    rows = db.sql(
        f"""
        SELECT * FROM (SELECT e.app, e.user_id, e.kind, e.scope, e.doc_id, e.text, {EMBEDDED.format(i="e")} AS has
          FROM ({ITEM_STATE}) e WHERE ((e.user_hash % ?) + ?) % ? = ?)
        WHERE text <> '' OR has""",
        [model_id, model_id, shards, shards, shards, shard],
    ).fetchall()
    return RefList((Namespace(r[0], r[1], r[2], r[3]), r[4], bool(r[6])) for r in rows)


def fetch_index_rows(db: Database, refs: Sequence[Ref], model_id: str) -> list[IndexRow]:
    """The index rows (text, recency, columns, vector of ``model_id`` or None) of ``refs``."""
    if not refs:
        return []
    db.con.register("_want", ref_batch(list(refs)))
    try:
        table: pa.Table = db.arrow(
            f"""
            SELECT i.app, i.user_id, i.kind, i.scope, i.doc_id, x.vector, i.text, i.recency,
                   i.created_at, i.sim_time, i.importance FROM ({_ITEMS}) i
            SEMI JOIN _want w ON w.app = i.app AND w.user_id = i.user_id AND w.kind = i.kind
              AND w.scope = i.scope AND w.doc_id = i.doc_id
            LEFT JOIN embeddings x ON x.model_id = ? AND x.app = i.app AND x.user_id = i.user_id
              AND x.kind = i.kind AND x.scope = i.scope AND x.doc_id = i.doc_id""",
            [model_id],
        )
    finally:
        db.con.unregister("_want")
    return _index_rows(table)
