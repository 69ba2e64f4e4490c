"""The vectors of messages and entries: stored, pending, scanned by shard, and leveled against shards
(the long-term entries themselves are :mod:`.entries`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from memray.errors import ValidationError
from memray.ids import Namespace
from memray.store.base import IndexRow
from memray.store.database import Database
from memray.store.rows import EmbeddingRow
from memray.store.schema import embedding_batch, ref_batch

__all__ = [
    "put_embeddings",
    "mark_embedding_failed",
    "pending_embeddings",
    "missing_embeddings",
    "scan_index_rows",
    "index_digest",
]

# An embedding's item: a message (kind 'conv', scope = conversation id) or an entry
# (kind 'entry', scope = project id or '' for global entries).
_MSG_OF = (
    "e.kind = 'conv' AND m.app = e.app AND m.user_id = e.user_id AND m.conversation_id = e.scope AND m.id = e.doc_id"
)
_ENTRY_OF = (
    "e.kind = 'entry' AND n.app = e.app AND n.user_id = e.user_id "
    "AND coalesce(n.project_id, '') = e.scope AND n.id = e.doc_id"
)
#: Per kind of item: its table and how an embedding row ``e`` names it.
_ITEMS = (("conv", "messages m", _MSG_OF), ("entry", "entries n", _ENTRY_OF))

#: Whether item ``{i}`` (with columns app..doc_id, text, embed_state, model_id) has a vector of
#: the model of the two ``?`` parameters: a stored one, or its text marked done with the model (a
#: recomputable model keeps no vectors, :func:`put_embeddings`: shards recompute them).
EMBEDDED = (
    "(({i}.text <> '' AND {i}.embed_state = 'done' AND {i}.model_id = ?) "
    "OR EXISTS (SELECT 1 FROM embeddings x WHERE x.model_id = ? AND x.app = {i}.app AND x.user_id = {i}.user_id "
    "AND x.kind = {i}.kind AND x.scope = {i}.scope AND x.doc_id = {i}.doc_id))"
)


def put_embeddings(db: Database, rows: list[EmbeddingRow]) -> int:
    """Upsert vectors by (namespace, doc_id, model_id) for items that still exist, and mark those
    items embedded with the model; returns the rows applied. A row whose vector is None (a
    recomputable model's: shards recompute it from the text) marks its item and keeps no vector.
    Durability: committed on return.

    The marking updates count the live items, and statements that cannot apply are not run:
    each costs ~0.5–2 ms whatever its rows, and a recomputable model's batch (no vectors, none
    stored) needs only its update. The live vectors are found by hash semi-joins; the earlier
    ``SELECT … WHERE EXISTS … OR EXISTS`` liveness check was a nested loop
    (``python -m benchmarks.store_ingest_micro``: ``mark_statement_ms``)."""
    if not rows:
        return 0
    batch = embedding_batch(rows)
    kinds = set(batch["kind"].to_pylist())
    models = sorted(set(batch["model_id"].to_pylist()))
    present = [(table, cond) for kind, table, cond in _ITEMS if kind in kinds]
    with db.transaction(_emb=batch):
        applied = sum(
            db.count(
                f"UPDATE {table} SET embed_state = 'done', model_id = e.model_id, embed_error = NULL "
                f"FROM _emb e WHERE {cond}"
            )
            for table, cond in present
        )
        if applied == 0:
            return 0
        marks = ", ".join("?" * len(models))
        if db.sql(f"SELECT 1 FROM embeddings WHERE model_id IN ({marks}) LIMIT 1", models).fetchone():
            db.sql("""DELETE FROM embeddings x USING _emb e WHERE x.app = e.app AND x.user_id = e.user_id
                      AND x.kind = e.kind AND x.scope = e.scope AND x.doc_id = e.doc_id AND x.model_id = e.model_id""")
        if batch["vector"].null_count < batch.num_rows:
            live = " UNION ALL ".join(f"SELECT e.* FROM _emb e SEMI JOIN {table} ON {cond}" for table, cond in present)
            db.sql(
                "INSERT INTO embeddings SELECT app, user_id, kind, scope, doc_id, model_id, vector, user_hash "
                f"FROM ({live}) WHERE vector IS NOT NULL"
            )
    return applied


def mark_embedding_failed(db: Database, refs: list[tuple[Namespace, str]], error: str) -> None:
    """Record that embedding these items failed; they stay pending (retried). Durable on return."""
    if not refs:
        return
    with db.transaction(bump=False, _failed=ref_batch(refs)):
        for table, alias, cond in (("messages", "m", _MSG_OF), ("entries", "n", _ENTRY_OF)):
            db.sql(
                f"UPDATE {table} {alias} SET embed_state = 'failed', embed_error = ? FROM _failed e WHERE {cond}",
                [str(error)[:2000]],
            )


def pending_embeddings(
    db: Database, model_id: str, limit: int, after: tuple[Namespace, str] | None = None
) -> list[tuple[Namespace, str, str]]:
    """(namespace, doc_id, text) of items with non-empty text not embedded with ``model_id``
    (:data:`EMBEDDED`: new, updated since embedding, or failed), in (namespace, doc_id) order;
    ``after``: only those past that item (the last one of the page before), so a caller pages
    through all of them while they change."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError("limit", limit, "must be a non-negative integer")
    past, cursor = "", []
    if after is not None:
        past, cursor = "AND (app, user_id, kind, scope, doc_id) > (?, ?, ?, ?, ?)", [*after[0], after[1]]
    rows = db.sql(
        f"""
        SELECT app, user_id, kind, scope, doc_id, text FROM (
          SELECT app, user_id, 'conv' AS kind, conversation_id AS scope, id AS doc_id, text, embed_state, model_id
          FROM messages WHERE text <> ''
          UNION ALL
          SELECT app, user_id, 'entry', coalesce(project_id, ''), id, text, embed_state, model_id
          FROM entries WHERE text <> '') i
        WHERE NOT {EMBEDDED.format(i="i")} {past}
        ORDER BY app, user_id, kind, scope, doc_id LIMIT ?""",
        [model_id, model_id, *cursor, limit],
    ).fetchall()
    return [(Namespace(r[0], r[1], r[2], r[3]), r[4], r[5]) for r in rows]


def missing_embeddings(db: Database, model_id: str, refs: list[tuple[Namespace, str]]) -> list[int]:
    """Positions in ``refs`` of the items not embedded with ``model_id`` (ascending): no stored
    vector and not marked done with it."""
    if not refs:
        return []
    batch = ref_batch(refs).append_column("pos", pa.array(range(len(refs)), pa.int64()))
    db.con.register("_refs", batch)
    try:
        rows = db.sql(
            f"""SELECT e.pos FROM _refs e WHERE NOT EXISTS (SELECT 1 FROM embeddings x
            WHERE x.model_id = ? AND x.app = e.app AND x.user_id = e.user_id AND x.kind = e.kind
            AND x.scope = e.scope AND x.doc_id = e.doc_id)
            AND NOT EXISTS (SELECT 1 FROM messages m WHERE {_MSG_OF} AND m.embed_state = 'done' AND m.model_id = ?)
            AND NOT EXISTS (SELECT 1 FROM entries n WHERE {_ENTRY_OF} AND n.embed_state = 'done' AND n.model_id = ?)
            ORDER BY e.pos""",
            [model_id, model_id, model_id],
        ).fetchall()
    finally:
        db.con.unregister("_refs")
    return [int(r[0]) for r in rows]


def scan_index_rows(
    db: Database,
    shard: int,
    shards: int,
    model_id: str,
    after: tuple[Namespace, str] | None,
    limit: int,
    unembedded: bool = False,
) -> list[IndexRow]:
    """One page of a shard's vectors of ``model_id``, ordered by (namespace, doc_id).

    With ``unembedded`` the page also holds the shard's items with non-empty text and no vector
    of ``model_id`` (never embedded, failed, or changed since), with ``vector=None``: a shard that
    recovers from the store indexes them lexically until the embedder catches up."""
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ValidationError("shards", shards, "must be a positive integer")
    if not isinstance(shard, int) or not 0 <= shard < shards:
        raise ValidationError("shard", shard, f"must be in [0, {shards})")
    if unembedded:
        return _scan_items(db, shard, shards, model_id, after, limit)
    params: list[Any] = [model_id, shards, shards, shards, shard]
    cursor = ""
    if after is not None:
        cursor = "AND (e.app, e.user_id, e.kind, e.scope, e.doc_id) > (?, ?, ?, ?, ?)"
        params.extend([*after[0], after[1]])
    table = db.arrow(
        f"""
        SELECT e.app, e.user_id, e.kind, e.scope, e.doc_id, e.vector,
               coalesce(m.text, n.text) AS text, coalesce(CAST(m.seq AS DOUBLE), n.timestamp) AS recency,
               coalesce(m.created_at, n.timestamp) AS created_at, coalesce(m.sim_time, n.sim_time) AS sim_time,
               coalesce(m.importance, n.importance) AS importance
        FROM embeddings e
        LEFT JOIN messages m ON {_MSG_OF}
        LEFT JOIN entries n ON {_ENTRY_OF}
        WHERE e.model_id = ? AND ((e.user_hash % ?) + ?) % ? = ? {cursor}
          AND (m.id IS NOT NULL OR n.id IS NOT NULL)
        ORDER BY e.app, e.user_id, e.kind, e.scope, e.doc_id LIMIT {int(limit)}""",
        params,
    )
    return _index_rows(table)


def _scan_items(
    db: Database, shard: int, shards: int, model_id: str, after: tuple[Namespace, str] | None, limit: int
) -> list[IndexRow]:
    """:func:`scan_index_rows` driven by the items (messages and entries), each with its vector
    of ``model_id`` or none."""
    params: list[Any] = [shards, shards, shards, shard, shards, shards, shards, shard, model_id]
    cursor = ""
    if after is not None:
        cursor = "AND (i.app, i.user_id, i.kind, i.scope, i.doc_id) > (?, ?, ?, ?, ?)"
        params.extend([*after[0], after[1]])
    table = db.arrow(
        f"""
        SELECT i.app, i.user_id, i.kind, i.scope, i.doc_id, x.vector, i.text, i.recency,
               i.created_at, i.sim_time, i.importance FROM (
          SELECT app, user_id, 'conv' AS kind, conversation_id AS scope, id AS doc_id, text,
                 CAST(seq AS DOUBLE) AS recency, created_at, sim_time, importance
          FROM messages WHERE ((user_hash % ?) + ?) % ? = ?
          UNION ALL
          SELECT app, user_id, 'entry', coalesce(project_id, ''), id, text, timestamp, timestamp, sim_time, importance
          FROM entries WHERE ((user_hash % ?) + ?) % ? = ?) i
        LEFT JOIN embeddings x ON x.model_id = ? AND x.app = i.app AND x.user_id = i.user_id
          AND x.kind = i.kind AND x.scope = i.scope AND x.doc_id = i.doc_id
        WHERE (i.text <> '' OR x.vector IS NOT NULL) {cursor}
        ORDER BY i.app, i.user_id, i.kind, i.scope, i.doc_id LIMIT {int(limit)}""",
        params,
    )
    return _index_rows(table)


def _index_rows(table: pa.Table) -> list[IndexRow]:
    vec = table["vector"].combine_chunks()
    flat = vec.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    offsets = vec.offsets.to_numpy()
    valid = vec.is_valid().to_numpy(zero_copy_only=False) if vec.null_count else None
    cols: Sequence[list[Any]] = [
        table[c].to_pylist() for c in ("app", "user_id", "kind", "scope", "doc_id", "text", "recency")
    ]
    nan = float("nan")
    extra = zip(*(table[c].to_pylist() for c in ("created_at", "sim_time", "importance")))
    return [
        IndexRow(
            Namespace(a, u, k, s),
            d,
            flat[offsets[i] : offsets[i + 1]] if valid is None or valid[i] else None,
            t,
            float(r),
            (nan if c is None else c, nan if st is None else st, nan if im is None else im),
        )
        for i, ((a, u, k, s, d, t, r), (c, st, im)) in enumerate(zip(zip(*cols), extra))
    ]


# -- leveling a shard with the store: which items must have a vector there ---------------------

_US = "chr(31)"  # ids hold no control characters, so the unit separator joins them unambiguously
_REF_KEY = f"e.app || {_US} || e.user_id || {_US} || e.kind || {_US} || e.scope || {_US} || e.doc_id"
#: Every item (message or entry) as ``e``, with what :data:`EMBEDDED` and shard routing read.
ITEM_STATE = """
  SELECT app, user_id, 'conv' AS kind, conversation_id AS scope, id AS doc_id, text, embed_state, model_id, user_hash
  FROM messages
  UNION ALL
  SELECT app, user_id, 'entry', coalesce(project_id, ''), id, text, embed_state, model_id, user_hash FROM entries"""


def _shard_params(shard: int, shards: int, model_id: str) -> list[Any]:
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ValidationError("shards", shards, "must be a positive integer")
    if not isinstance(shard, int) or not 0 <= shard < shards:
        raise ValidationError("shard", shard, f"must be in [0, {shards})")
    return [model_id, shards, shards, shards, shard]


def index_digest(db: Database, shard: int, shards: int, model_id: str) -> tuple[int, int]:
    """``(count, checksum)`` of the shard's items that have a vector of ``model_id``
    (:data:`EMBEDDED`): the checksum is the sum, mod 2**64, of the low 64 bits of the MD5 of each
    item's key (:func:`memray.index.recovery.ref_key`), so a shard can compare its own without a
    transfer."""
    params = _shard_params(shard, shards, model_id)
    rows = db.sql(
        f"""SELECT count(*), coalesce(sum(md5_number_lower({_REF_KEY})), 0) FROM ({ITEM_STATE}) e
        WHERE ((e.user_hash % ?) + ?) % ? = ? AND {EMBEDDED.format(i="e")}""",
        [*params[1:], model_id, model_id],
    ).fetchall()
    return int(rows[0][0]), int(rows[0][1]) % (1 << 64)
