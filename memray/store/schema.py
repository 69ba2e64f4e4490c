"""Tables of the history store, and the Arrow batches that feed them.

Rows arrive as NamedTuples; they become Arrow columns with ``zip(*rows)`` (no per-row dicts)
and are validated column-wise with ``pyarrow.compute``, so a 10k-row batch is checked in a few
milliseconds and a bad row is reported by field, value and position before anything is written.

There are no primary keys: DuckDB's ART index made the hot upsert ~2x slower on new rows and
~20x slower on updates, and the file 6x larger (measured at 1M rows; see the store report). The
store is the only writer of its file, so uniqueness is kept by the upsert (an anti-join) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memray.errors import InvalidIdError, ValidationError
from memray.ids import MAX_ID_CHARS, user_hash
from memray.store.rows import EmbeddingRow, EntryRow, MessageRow
from memray.validation import SURROGATE_HINT

__all__ = [
    "DDL",
    "MIGRATIONS",
    "TABLES",
    "MESSAGE_COLUMNS",
    "ENTRY_COLUMNS",
    "ROLES",
    "message_batch",
    "entry_batch",
    "embedding_batch",
    "ref_batch",
    "user_hashes",
]

ROLES = ("system", "user", "assistant", "tool")

DDL = (
    """CREATE TABLE IF NOT EXISTS meta (key VARCHAR, value BIGINT)""",
    """CREATE TABLE IF NOT EXISTS conversations (
        app VARCHAR NOT NULL, user_id VARCHAR NOT NULL, conversation_id VARCHAR NOT NULL,
        title VARCHAR, metadata_json VARCHAR NOT NULL, created_at DOUBLE NOT NULL,
        updated_at DOUBLE NOT NULL, last_seq BIGINT NOT NULL, user_hash BIGINT NOT NULL,
        changed_version BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS messages (
        app VARCHAR NOT NULL, user_id VARCHAR NOT NULL, conversation_id VARCHAR NOT NULL,
        id VARCHAR NOT NULL, seq BIGINT NOT NULL, role VARCHAR NOT NULL, parts_json VARCHAR NOT NULL,
        metadata_json VARCHAR NOT NULL, created_at DOUBLE NOT NULL, text VARCHAR NOT NULL,
        embed_state VARCHAR NOT NULL, model_id VARCHAR, embed_error VARCHAR,
        user_hash BIGINT NOT NULL, changed_version BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS entries (
        app VARCHAR NOT NULL, user_id VARCHAR NOT NULL, id VARCHAR NOT NULL, session_id VARCHAR,
        project_id VARCHAR, author VARCHAR NOT NULL, content_json VARCHAR NOT NULL,
        metadata_json VARCHAR NOT NULL, timestamp DOUBLE NOT NULL, text VARCHAR NOT NULL,
        embed_state VARCHAR NOT NULL, model_id VARCHAR, embed_error VARCHAR,
        user_hash BIGINT NOT NULL, changed_version BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS embeddings (
        app VARCHAR NOT NULL, user_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, scope VARCHAR NOT NULL,
        doc_id VARCHAR NOT NULL, model_id VARCHAR NOT NULL, vector FLOAT[] NOT NULL,
        user_hash BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS working_memory (
        app VARCHAR NOT NULL, user_id VARCHAR NOT NULL, scope VARCHAR NOT NULL,
        conversation_id VARCHAR NOT NULL, content VARCHAR, version BIGINT NOT NULL,
        updated_at DOUBLE NOT NULL, user_hash BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS summaries (
        app VARCHAR NOT NULL, user_id VARCHAR NOT NULL, conversation_id VARCHAR NOT NULL,
        text VARCHAR NOT NULL, summarized_through_seq BIGINT NOT NULL, version BIGINT NOT NULL,
        updated_at DOUBLE NOT NULL, user_hash BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS export_state (root VARCHAR, watermark BIGINT, exported_at DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS dead_letters (
        app VARCHAR NOT NULL, user_id VARCHAR NOT NULL, conversation_id VARCHAR NOT NULL,
        id VARCHAR NOT NULL, seq BIGINT NOT NULL, kind VARCHAR NOT NULL, error VARCHAR NOT NULL,
        payload VARCHAR NOT NULL, recorded_at DOUBLE NOT NULL, user_hash BIGINT NOT NULL)""",
    # the server's API keys (memray.store.keys): a SHA-256 digest of each key, never the key
    """CREATE TABLE IF NOT EXISTS api_keys (
        key_id VARCHAR NOT NULL, digest VARCHAR NOT NULL, app VARCHAR NOT NULL, user_id VARCHAR,
        read_only BOOLEAN NOT NULL, label VARCHAR, created_at DOUBLE NOT NULL, revoked_at DOUBLE)""",
)

#: Columns added after the first release, applied on every open (idempotent): a data directory
#: written by an older memray gains them (NULL in its old rows) and keeps working. Fresh files get
#: them the same way, so old and new files have one column order.
MIGRATIONS = (
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS sim_time DOUBLE",
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS importance DOUBLE",
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS agent_id VARCHAR",
    "ALTER TABLE messages ADD COLUMN IF NOT EXISTS sub_agent_id VARCHAR",
    "ALTER TABLE entries ADD COLUMN IF NOT EXISTS sim_time DOUBLE",
    "ALTER TABLE entries ADD COLUMN IF NOT EXISTS importance DOUBLE",
)

#: Tables that hold user data, in cascade order (children first).
TABLES = ("embeddings", "messages", "summaries", "working_memory", "conversations", "entries", "dead_letters")

MESSAGE_COLUMNS = MessageRow._fields
ENTRY_COLUMNS = EntryRow._fields

_CONTROL = r"[\x00-\x1f\x7f-\x9f]"


def user_hashes(apps: Sequence[str], users: Sequence[str]) -> pa.Array:
    """``user_hash`` per row, hashing each distinct (app, user) once."""
    cache = {k: user_hash(*k) for k in set(zip(apps, users))}
    return pa.array([cache[k] for k in zip(apps, users)], pa.int64())


def _column(name: str, values: Sequence[Any], typ: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, UnicodeError) as exc:
        i, bad = next(((i, v) for i, v in enumerate(values) if not _fits(v, typ)), (0, values[0] if values else None))
        if isinstance(bad, str):
            raise ValidationError(name, bad, f"cannot be encoded as UTF-8 (row {i})", SURROGATE_HINT) from exc
        raise ValidationError(name, bad, f"must be {typ} (row {i})", "fix the row's field type") from exc


def _fits(v: Any, typ: pa.DataType) -> bool:
    if pa.types.is_string(typ):
        if v is None:
            return True
        if not isinstance(v, str):
            return False
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if pa.types.is_integer(typ):
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _first(mask: pa.Array) -> int | None:
    """Index of the first true value of a boolean mask (nulls count as false)."""
    idx = int(pc.index(pc.fill_null(mask, False), True).as_py())
    return None if idx < 0 else idx


def _check(
    name: str,
    arr: pa.Array,
    bad: pa.Array,
    problem: str,
    hint: str = "",
    error: type[ValidationError] = ValidationError,
) -> None:
    i = _first(bad)
    if i is not None:
        raise error(name, arr[i].as_py(), f"{problem} (row {i})", hint)


def check_ids(name: str, arr: pa.Array, nullable: bool = False) -> None:
    """Vectorised :func:`memray.ids.validate_id`: non-empty, ≤ 256 characters, no control chars."""
    if not nullable:
        _check(name, arr, pc.is_null(arr), "must not be missing", error=InvalidIdError)
    n = pc.utf8_length(arr)
    _check(
        name,
        arr,
        pc.or_(pc.less(n, 1), pc.greater(n, MAX_ID_CHARS)),
        f"must be 1 to {MAX_ID_CHARS} characters",
        "use a shorter, non-empty id",
        InvalidIdError,
    )
    _check(
        name,
        arr,
        pc.match_substring_regex(arr, _CONTROL),
        "contains a control character",
        "remove control characters",
        InvalidIdError,
    )


def _check_json_object(name: str, arr: pa.Array) -> None:
    _check(name, arr, pc.invert(pc.starts_with(arr, "{")), "must be a JSON object", "pass json.dumps of a dict")


_FLOATS = ("created_at", "timestamp", "sim_time", "importance")


def _check_sim_columns(t: dict[str, pa.Array]) -> None:
    """``sim_time`` finite where present, ``importance`` in [0, 1] where present."""
    _check("sim_time", t["sim_time"], pc.invert(pc.is_finite(t["sim_time"])), "must be finite")
    imp = t["importance"]
    _check(
        "importance",
        imp,
        pc.or_(pc.less(imp, 0.0), pc.greater(imp, 1.0)),
        "must be in [0, 1]",
        "scale the rating into [0, 1]",
    )


def message_batch(rows: Sequence[MessageRow]) -> pa.Table:
    """Validate message rows and return them as an Arrow table with ``user_hash``."""
    cols = list(zip(*rows))
    t = {
        n: _column(n, c, pa.float64() if n in _FLOATS else pa.int64() if n == "seq" else pa.string())
        for n, c in zip(MESSAGE_COLUMNS, cols)
    }
    for name in ("app", "user_id", "conversation_id", "id"):
        check_ids(name, t[name])
    for name in ("agent_id", "sub_agent_id"):
        check_ids(name, t[name], nullable=True)
    _check_sim_columns(t)
    _check("seq", t["seq"], pc.less_equal(t["seq"], 0), "must be > 0", "seq starts at 1")
    _check("role", t["role"], pc.invert(pc.is_in(t["role"], pa.array(ROLES))), f"must be one of {ROLES}")
    for name in ("parts_json", "text"):
        _check(name, t[name], pc.is_null(t[name]), "must not be missing")
    _check(
        "parts_json", t["parts_json"], pc.invert(pc.starts_with(t["parts_json"], "[")), "must be a JSON array of parts"
    )
    _check_json_object("metadata_json", t["metadata_json"])
    _check("created_at", t["created_at"], pc.invert(pc.is_finite(t["created_at"])), "must be finite")
    t["user_hash"] = user_hashes(cols[0], cols[1])
    return pa.table(t)


def entry_batch(rows: Sequence[EntryRow]) -> pa.Table:
    """Validate entry rows and return them as an Arrow table with ``user_hash``."""
    cols = list(zip(*rows))
    t = {n: _column(n, c, pa.float64() if n in _FLOATS else pa.string()) for n, c in zip(ENTRY_COLUMNS, cols)}
    _check_sim_columns(t)
    for name in ("app", "user_id", "id"):
        check_ids(name, t[name])
    for name in ("session_id", "project_id"):
        check_ids(name, t[name], nullable=True)
    for name in ("author", "content_json", "text"):
        _check(name, t[name], pc.is_null(t[name]), "must not be missing")
    _check_json_object("metadata_json", t["metadata_json"])
    _check("timestamp", t["timestamp"], pc.invert(pc.is_finite(t["timestamp"])), "must be finite")
    t["user_hash"] = user_hashes(cols[0], cols[1])
    return pa.table(t)


def ref_batch(refs: Sequence[tuple[Any, str]]) -> pa.Table:
    """(Namespace, doc_id) pairs as an Arrow table (app, user_id, kind, scope, doc_id)."""
    namespaces = [r[0] for r in refs]
    cols = list(zip(*namespaces)) if namespaces else [(), (), (), ()]
    return pa.table(
        {
            "app": pa.array(cols[0], pa.string()),
            "user_id": pa.array(cols[1], pa.string()),
            "kind": pa.array(cols[2], pa.string()),
            "scope": pa.array(cols[3], pa.string()),
            "doc_id": pa.array([r[1] for r in refs], pa.string()),
        }
    )


def embedding_batch(rows: Sequence[EmbeddingRow]) -> pa.Table:
    """Validate embedding rows (kind, ids, finite non-empty vectors or None); keep the last per key."""
    last: dict[tuple[Any, str, str], EmbeddingRow] = {}
    for r in rows:
        last[(tuple(r.namespace), r.doc_id, r.model_id)] = r
    uniq = list(last.values())
    t = ref_batch([(r.namespace, r.doc_id) for r in uniq])
    _check(
        "namespace.kind",
        t["kind"],
        pc.invert(pc.is_in(t["kind"], pa.array(["conv", "entry"]))),
        "must be 'conv' or 'entry'",
    )
    model = _column("model_id", [r.model_id for r in uniq], pa.string())
    check_ids("model_id", model)
    vec = _vectors(uniq)
    apps, users = t["app"].to_pylist(), t["user_id"].to_pylist()
    return (
        t.append_column("model_id", model)
        .append_column("vector", vec)
        .append_column("user_hash", user_hashes(apps, users))
    )


def _vectors(rows: Sequence[EmbeddingRow]) -> pa.Array:
    """The rows' vectors as a list column, checked (non-empty and finite); null where a row has
    none (a recomputable model's: the item is marked, no vector kept). A batch with no vector
    at all (every batch of a recomputable model) is one null column, built without a row loop."""
    if all(r.vector is None for r in rows):
        return pa.nulls(len(rows), pa.list_(pa.float32()))
    none = np.zeros(0, np.float32)
    vectors = [none if r.vector is None else np.asarray(r.vector, dtype=np.float32).ravel() for r in rows]
    for i, v in enumerate(vectors):
        if rows[i].vector is not None and (v.size == 0 or not bool(np.isfinite(v).all())):
            raise ValidationError(
                "vector", rows[i].doc_id, f"must be non-empty and finite (row {i})", "re-embed the item"
            )
    offsets = np.zeros(len(vectors) + 1, dtype=np.int32)
    np.cumsum([v.size for v in vectors], out=offsets[1:])
    flat = np.concatenate(vectors) if vectors else np.zeros(0, np.float32)
    absent = [r.vector is None for r in rows]
    mask = pa.array(absent, pa.bool_()) if any(absent) else None
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, pa.float32()), mask=mask)
