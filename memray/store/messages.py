"""Messages: the group-commit upsert (the hot path) and history reads."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import pyarrow as pa

from memray.errors import ValidationError
from memray.ids import ConversationKey
from memray.models.filter import MessageFilter
from memray.sim_time import Window
from memray.store.database import Database
from memray.store.rows import MessageRow
from memray.store.schema import MESSAGE_COLUMNS, ROLES, message_batch

__all__ = [
    "append_messages",
    "get_messages",
    "fetch_messages",
    "stored_seqs",
    "assigned_seqs",
    "json_equal",
    "Correction",
]


class Correction(NamedTuple):
    """A row the store already held under another seq: the seq and created_at it keeps."""

    app: str
    user_id: str
    conversation_id: str
    id: str
    seq: int
    created_at: float


_KEY = "m.app = b.app AND m.user_id = b.user_id AND m.conversation_id = b.conversation_id AND m.id = b.id"
_COLS = ", ".join(MESSAGE_COLUMNS)
_SELECT = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS)


def append_messages(db: Database, rows: Sequence[MessageRow]) -> list[Correction]:
    """Upsert ``rows`` and get-or-create their conversations in one transaction.

    Existing rows (same app, user, conversation, id) keep their stored seq and created_at; role,
    parts, metadata and text are replaced, embed_state is reset to 'pending' and their stored
    vectors are dropped (they describe the old text). Returns a correction for every input row
    whose seq differs from the one the store keeps. Durability: committed (WAL) on return."""
    if not rows:
        return []
    unique, first = _dedupe(rows)
    batch = message_batch(unique)
    with db.transaction(_batch=batch) as version:
        existing = db.sql(
            f"SELECT b.app, b.user_id, b.conversation_id, b.id, m.seq, m.created_at "
            f"FROM messages m JOIN _batch b ON {_KEY}"
        ).fetchall()
        stored = {(r[0], r[1], r[2], r[3]): (int(r[4]), float(r[5])) for r in existing}
        if stored:
            _update_existing(db, batch, stored, version)
        else:
            _insert(db, "_batch", version)
            _touch_conversations(db, "_batch", "TRUE", version)
        # a dead letter (lost, or rejected) of an id stored now is no longer true: the message is here
        if db.dead_letters_possible:
            db.sql(f"DELETE FROM dead_letters d USING _batch b WHERE {_KEY.replace('m.', 'd.')}")
    kept = {**first, **stored}  # the (seq, created_at) the store keeps, where it may differ
    out: list[Correction] = []
    for r in rows if kept else ():
        k = (r.app, r.user_id, r.conversation_id, r.id)
        if k in kept and kept[k][0] != r.seq:
            out.append(Correction(*k, *kept[k]))
    return out


def _dedupe(rows: Sequence[MessageRow]) -> tuple[Sequence[MessageRow], dict[Any, tuple[int, float]]]:
    """Collapse ids repeated in one batch: the first occurrence's seq/created_at, the last content.
    Returns the unique rows and, only for repeated ids, the kept (seq, created_at)."""
    keys = [(r.app, r.user_id, r.conversation_id, r.id) for r in rows]
    if len(set(keys)) == len(keys):
        return rows, {}
    first: dict[Any, MessageRow] = {}
    last: dict[Any, MessageRow] = {}
    for k, r in zip(keys, rows):
        first.setdefault(k, r)
        last[k] = r
    unique = [last[k]._replace(seq=first[k].seq, created_at=first[k].created_at) for k in first]
    repeated = {k for k in first if first[k] is not last[k]}
    return unique, {k: (first[k].seq, first[k].created_at) for k in repeated}


def _insert(db: Database, source: str, version: int) -> None:
    db.sql(
        f"INSERT INTO messages ({_COLS}, embed_state, model_id, embed_error, user_hash, changed_version) "
        f"SELECT {_COLS}, 'pending', NULL, NULL, user_hash, {version} FROM {source}"
    )


def _update_existing(db: Database, batch: pa.Table, stored: dict[Any, tuple[int, float]], version: int) -> None:
    keys = zip(*(batch[c].to_pylist() for c in ("app", "user_id", "conversation_id", "id")))
    is_new = pa.array([k not in stored for k in keys], pa.bool_())
    db.con.register("_flagged", batch.append_column("is_new", is_new))
    try:
        db.sql(f"""UPDATE messages m SET role = b.role, parts_json = b.parts_json,
                   metadata_json = b.metadata_json, text = b.text, sim_time = b.sim_time,
                   importance = b.importance, agent_id = b.agent_id, sub_agent_id = b.sub_agent_id,
                   embed_state = 'pending',
                   model_id = NULL, embed_error = NULL, changed_version = {version}
                   FROM (SELECT * FROM _flagged WHERE NOT is_new) b WHERE {_KEY}""")
        db.sql("""DELETE FROM embeddings e USING (SELECT * FROM _flagged WHERE NOT is_new) b
                  WHERE e.kind = 'conv' AND e.app = b.app AND e.user_id = b.user_id
                  AND e.scope = b.conversation_id AND e.doc_id = b.id""")
        _insert(db, "(SELECT * FROM _flagged WHERE is_new)", version)
        _touch_conversations(db, "_flagged", "is_new", version)
    finally:
        db.con.unregister("_flagged")


def _touch_conversations(db: Database, source: str, is_new: str, version: int) -> None:
    """Raise last_seq to the batch's new rows, bump updated_at, create missing conversations.
    A conversation without a title takes its first user message's text (80 characters).
    One MERGE over the batch aggregated once (a few thousand rows), never the messages table:
    it replaced an aggregate, an UPDATE and an INSERT (three statements, ~2–3 ms each)."""
    now = time.time()
    db.sql(f"""MERGE INTO conversations c USING (
                   SELECT app, user_id, conversation_id, coalesce(max(seq) FILTER (WHERE {is_new}), 0) AS max_seq,
                          min(created_at) AS first_at, any_value(user_hash) AS user_hash,
                          left(arg_min(text, seq) FILTER (WHERE role = 'user' AND text <> ''), 80) AS title
                   FROM {source} GROUP BY app, user_id, conversation_id) a
               ON c.app = a.app AND c.user_id = a.user_id AND c.conversation_id = a.conversation_id
               WHEN MATCHED THEN UPDATE SET last_seq = greatest(c.last_seq, a.max_seq), updated_at = {now},
                   title = coalesce(c.title, a.title), changed_version = {version}
               WHEN NOT MATCHED THEN INSERT VALUES (a.app, a.user_id, a.conversation_id, a.title, '{{}}',
                   least(a.first_at, {now}), {now}, a.max_seq, a.user_hash, {version})""")


def get_messages(db: Database, key: ConversationKey, where: MessageFilter) -> list[MessageRow]:
    """Messages of one conversation that ``where`` keeps (:class:`~memray.models.filter.MessageFilter`),
    by seq: its ``limit`` = the most recent N matching, oldest first."""
    limit, roles, metadata = where.limit, where.roles, where.metadata
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValidationError("limit", limit, "must be a non-negative integer or None")
    if limit == 0:
        return []
    clauses = ["app = ?", "user_id = ?", "conversation_id = ?"]
    params: list[Any] = [key.app, key.user_id, key.conversation_id]
    if where.before_seq is not None:
        clauses.append("seq < ?")
        params.append(int(where.before_seq))
    if where.after_seq is not None:
        clauses.append("seq > ?")
        params.append(int(where.after_seq))
    if where.window is not None:
        w = Window(*where.window)
        for column, op, bound in (
            ("sim_time", ">=", w.after),
            ("sim_time", "<", w.before),
            ("created_at", ">=", w.created_after),
            ("created_at", "<", w.created_before),
        ):
            if bound is not None:
                clauses.append(f"{column} {op} ?")
                params.append(float(bound))
    for column, value in (("agent_id", where.agent_id), ("sub_agent_id", where.sub_agent_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if roles is not None:
        bad = [r for r in roles if r not in ROLES]
        if bad:
            raise ValidationError("roles", bad, f"must be among {ROLES}")
        if not roles:
            return []
        clauses.append(f"role IN ({', '.join('?' for _ in roles)})")
        params.extend(roles)
    query = f"SELECT {_COLS} FROM messages WHERE {' AND '.join(clauses)} ORDER BY seq DESC"
    if metadata is None and limit is not None:
        query += f" LIMIT {limit}"
    if metadata is None:
        found = [MessageRow._make(r) for r in db.sql(query, params).fetchall()]
    else:
        found = []
        for r in _stream(db, query, params):
            if _metadata_matches(r[7], metadata):
                found.append(MessageRow._make(r))
                if limit is not None and len(found) >= limit:
                    break
    if limit is not None:
        found = found[:limit]
    found.reverse()
    return found


def _stream(db: Database, query: str, params: list[Any], chunk: int = 2048) -> Iterator[tuple[Any, ...]]:
    result = db.sql(query, params)
    while batch := result.fetchmany(chunk):
        yield from batch


def _metadata_matches(metadata_json: str, want: dict[str, Any]) -> bool:
    have = json.loads(metadata_json)
    return all(k in have and json_equal(have[k], v) for k, v in want.items())


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: bools are not numbers, 1 == 1.0, objects ignore key order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def fetch_messages(db: Database, app: str, user_id: str, refs: list[tuple[str, str]]) -> list[MessageRow]:
    """Messages by (conversation_id, id) of one user, in the order of ``refs`` (missing skipped)."""
    if not refs:
        return []
    conv, ids = zip(*refs)
    wanted = pa.table({"conversation_id": pa.array(conv, pa.string()), "id": pa.array(ids, pa.string())})
    db.con.register("_refs", wanted)
    try:
        rows = db.sql(
            f"""SELECT {_SELECT} FROM messages m SEMI JOIN _refs b
                          ON m.conversation_id = b.conversation_id AND m.id = b.id
                          WHERE m.app = ? AND m.user_id = ?""",
            [app, user_id],
        ).fetchall()
    finally:
        db.con.unregister("_refs")
    by_key = {(r[2], r[3]): MessageRow._make(r) for r in rows}
    return [by_key[k] for k in dict.fromkeys(refs) if k in by_key]


def stored_seqs(db: Database, requests: Sequence[tuple[ConversationKey, Sequence[str]]]) -> list[dict[str, int]]:
    """For each ``(conversation, ids)``: the stored seq of each id the store holds. One query
    for all requests."""
    return _seqs(db, requests, letters=False)


def assigned_seqs(db: Database, requests: Sequence[tuple[ConversationKey, Sequence[str]]]) -> list[dict[str, int]]:
    """For each ``(conversation, ids)``: the seq each id was given — its stored message's, or
    its dead letter's (acknowledged and lost in a host restart, or rejected: that seq is the
    id's, and a retry that stores it after all must keep it). A host asks before giving a seq
    to an id it does not hold in memory, so a re-added or retried message keeps its seq."""
    return _seqs(db, requests, letters=db.dead_letters_possible)


def _seqs(
    db: Database, requests: Sequence[tuple[ConversationKey, Sequence[str]]], letters: bool
) -> list[dict[str, int]]:
    if not requests:
        return []
    cols: tuple[list[Any], ...] = ([], [], [], [], [])
    for n, (key, ids) in enumerate(requests):
        for i in ids:
            for col, v in zip(cols, (key.app, key.user_id, key.conversation_id, i, n)):
                col.append(v)
    out: list[dict[str, int]] = [{} for _ in requests]
    if not cols[0]:
        return out
    wanted = pa.table(
        {
            "app": pa.array(cols[0], pa.string()),
            "user_id": pa.array(cols[1], pa.string()),
            "conversation_id": pa.array(cols[2], pa.string()),
            "id": pa.array(cols[3], pa.string()),
            "n": pa.array(cols[4], pa.int64()),
        }
    )
    db.con.register("_ask", wanted)
    try:
        rows = db.sql(f"SELECT b.n, b.id, m.seq FROM messages m JOIN _ask b ON {_KEY}").fetchall()
        if letters:
            lettered = f"SELECT b.n, b.id, d.seq FROM dead_letters d JOIN _ask b ON {_KEY.replace('m.', 'd.')}"
            rows = db.sql(lettered).fetchall() + rows  # (a stored message wins)
    finally:
        db.con.unregister("_ask")
    for n, i, seq in rows:
        out[int(n)][str(i)] = int(seq)
    return out
