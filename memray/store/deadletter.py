"""Dead letters: messages that were acknowledged but cannot be stored, recorded instead of retried.

Two kinds of row live in ``dead_letters``:

- ``rejected``: the store refused the row for a reason no retry can fix (a data error: text that
  is not UTF-8, a non-finite time, a value DuckDB cannot convert). :func:`commit_messages` finds
  such rows by bisecting the group commit — the other rows of the batch, of every conversation,
  commit — and records each bad row with its error and what could be kept of it (JSON with
  ASCII escapes, so even a lone surrogate is kept legibly).
- ``lost``: acknowledged with ``durable=False`` and never committed because the host holding it
  was killed (see :mod:`memray.conversation.ledger`). Only its id and seq are known.

A dead letter keeps its seq: the conversation's ``last_seq`` is raised over it, so the seq is
never given to another message. A later commit of the same id (a retried call) deletes the
``lost`` letter: the message was not lost after all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import pyarrow as pa

from memray.errors import MemrayError, ValidationError
from memray.ids import user_hash
from memray.store.database import Database
from memray.store.messages import Correction, append_messages
from memray.store.rows import MessageRow

__all__ = [
    "DeadLetter",
    "CommitResult",
    "commit_messages",
    "record",
    "resolve_acknowledged",
    "is_data_error",
    "count",
    "list_letters",
]


class DeadLetter(NamedTuple):
    app: str
    user_id: str
    conversation_id: str
    id: str
    seq: int
    kind: str  # "rejected" | "lost"
    error: str
    payload: str  # the row as JSON with ASCII escapes ("" when nothing but id and seq is known)


class CommitResult(NamedTuple):
    corrections: list[Correction]
    rejected: list[DeadLetter]
    positions: list[int] = []  # of each rejected row in the input (its ids may be stored escaped)


def is_data_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the *data* is unacceptable (a retry would fail the same way), as
    opposed to the store being unable to write just now (I/O, closed, out of memory)."""
    import duckdb

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ValidationError):
            return True
        if isinstance(
            cur,
            (
                duckdb.ConversionException,
                duckdb.InvalidInputException,
                duckdb.ConstraintException,
                duckdb.TypeMismatchException,
                duckdb.OutOfRangeException,
            ),
        ):
            return True
        if isinstance(cur, (UnicodeError, OverflowError, pa.ArrowInvalid, pa.ArrowTypeError)):
            return True
        if isinstance(cur, (TypeError, ValueError)) and not isinstance(cur, MemrayError):
            return True
        cur = cur.__cause__
    return False


def commit_messages(db: Database, rows: Sequence[MessageRow]) -> CommitResult:
    """:func:`~memray.store.messages.append_messages`, except that rows the store rejects for a
    data error are isolated and recorded as dead letters instead of failing the whole batch.

    The batch is tried whole (the common case: one transaction). On a data error it is split in
    halves, each tried in its own transaction, recursively, down to the single rows at fault.
    If the database then fails to commit a probe transaction, the error was not about the data:
    it is raised and nothing is dead-lettered (the caller retries the batch later). Durability: every row is,
    when this returns, either committed or recorded in ``dead_letters`` (both WAL-committed)."""
    try:
        return CommitResult(append_messages(db, rows), [], [])
    except Exception as exc:
        if not is_data_error(exc):
            raise
        first = exc
    corrections: list[Correction] = []
    bad: list[tuple[int, BaseException]] = []

    def attempt(lo: int, hi: int) -> None:
        try:
            corrections.extend(append_messages(db, rows[lo:hi]))
        except Exception as exc:
            if not is_data_error(exc):
                raise
            if hi - lo == 1:
                bad.append((lo, exc))
                return
            mid = (lo + hi) // 2
            attempt(lo, mid)
            attempt(mid, hi)

    if len(rows) == 1:
        bad.append((0, first))
    else:
        attempt(0, len(rows) // 2)
        attempt(len(rows) // 2, len(rows))
    if not _healthy(db):  # the rows did not fail for their data: the store cannot write now
        raise first
    letters = [_letter(rows[i], "rejected", exc) for i, exc in bad]
    record(db, letters)
    return CommitResult(corrections, letters, [i for i, _ in bad])


def _healthy(db: Database) -> bool:
    """Whether the database still commits a write transaction (so the rows that failed, failed
    for themselves)."""
    try:
        with db.transaction(bump=False):
            db.sql("UPDATE meta SET value = value WHERE key = 'version'")
        return True
    except Exception:
        return False


def _letter(row: MessageRow, kind: str, exc: BaseException) -> DeadLetter:
    payload = json.dumps(row._asdict(), ensure_ascii=True, default=repr)
    error = f"{type(exc).__name__}: {exc}"
    return DeadLetter(
        _safe(row.app),
        _safe(row.user_id),
        _safe(row.conversation_id),
        _safe(row.id),
        int(row.seq),
        kind,
        _safe(error)[:2000],
        payload,
    )


def _safe(value: Any) -> str:
    """``value`` as a str the store can hold: itself if it encodes as UTF-8, else with escapes."""
    text = value if isinstance(value, str) else repr(value)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def record(db: Database, letters: Sequence[DeadLetter]) -> int:
    """Record dead letters (one transaction) and raise each conversation's ``last_seq`` over their
    seqs, creating the conversation if it has none, so no seq is given out twice. A letter for a
    (conversation, id) already recorded replaces it. Durability: committed on return."""
    if not letters:
        return 0
    now = time.time()
    cols = list(zip(*letters))
    table = pa.table(
        {
            "app": pa.array(cols[0], pa.string()),
            "user_id": pa.array(cols[1], pa.string()),
            "conversation_id": pa.array(cols[2], pa.string()),
            "id": pa.array(cols[3], pa.string()),
            "seq": pa.array(cols[4], pa.int64()),
            "kind": pa.array(cols[5], pa.string()),
            "error": pa.array(cols[6], pa.string()),
            "payload": pa.array(cols[7], pa.string()),
            "recorded_at": pa.array([now] * len(letters), pa.float64()),
            "user_hash": pa.array([user_hash(a, u) for a, u in zip(cols[0], cols[1])], pa.int64()),
        }
    )
    db.dead_letters_possible = True  # (before the insert: a rollback only leaves it conservative)
    with db.transaction(_dead=table) as version:
        db.sql(
            "DELETE FROM dead_letters d USING _dead n WHERE d.app = n.app AND d.user_id = n.user_id "
            "AND d.conversation_id = n.conversation_id AND d.id = n.id"
        )
        db.sql(
            "INSERT INTO dead_letters SELECT app, user_id, conversation_id, id, seq, kind, error, payload, "
            "recorded_at, user_hash FROM _dead"
        )
        db.sql(f"""UPDATE conversations c SET last_seq = greatest(c.last_seq, a.seq), changed_version = {version}
                   FROM (SELECT app, user_id, conversation_id, max(seq) AS seq FROM _dead GROUP BY ALL) a
                   WHERE c.app = a.app AND c.user_id = a.user_id AND c.conversation_id = a.conversation_id""")
        db.sql(f"""INSERT INTO conversations SELECT a.app, a.user_id, a.conversation_id, NULL, '{{}}', {now}, {now},
                   a.seq, a.user_hash, {version} FROM (SELECT app, user_id, conversation_id, max(seq) AS seq,
                   any_value(user_hash) AS user_hash FROM _dead GROUP BY app, user_id, conversation_id) a
                   ANTI JOIN conversations c ON c.app = a.app AND c.user_id = a.user_id
                   AND c.conversation_id = a.conversation_id""")
    return len(letters)


def count(db: Database) -> dict[str, int]:
    """Dead letters per kind (``{"rejected": n, "lost": m}``)."""
    found = dict(db.sql("SELECT kind, count(*) FROM dead_letters GROUP BY kind").fetchall())
    return {k: int(found.get(k, 0)) for k in ("rejected", "lost")}


def list_letters(
    db: Database, app: str | None = None, user_id: str | None = None, limit: int = 100
) -> list[DeadLetter]:
    """Dead letters, newest first, optionally of one app or user."""
    where, params = ["TRUE"], []
    if app is not None:
        where.append("app = ?")
        params.append(app)
    if user_id is not None:
        where.append("user_id = ?")
        params.append(user_id)
    rows = db.sql(
        f"SELECT app, user_id, conversation_id, id, seq, kind, error, payload FROM dead_letters "
        f"WHERE {' AND '.join(where)} ORDER BY recorded_at DESC, seq DESC LIMIT {int(limit)}",
        params,
    ).fetchall()
    return [DeadLetter(*r) for r in rows]


def resolve_acknowledged(db: Database, acked: Sequence[tuple[Any, str, int]], reason: str) -> list[DeadLetter]:
    """Given ``(conversation key, id, seq)`` records a host acknowledged before it stopped, record
    the ones the store does not hold as ``lost`` dead letters (raising their conversations'
    ``last_seq`` over them) and return those. Durability: committed on return."""
    last: dict[tuple[str, str, str, str], int] = {}
    for key, i, seq in acked:
        k = (key.app, key.user_id, key.conversation_id, i)
        last[k] = max(seq, last.get(k, 0))
    if not last:
        return []
    cols = list(zip(*last))
    table = pa.table(
        {
            "app": pa.array(cols[0], pa.string()),
            "user_id": pa.array(cols[1], pa.string()),
            "conversation_id": pa.array(cols[2], pa.string()),
            "id": pa.array(cols[3], pa.string()),
            "seq": pa.array(list(last.values()), pa.int64()),
        }
    )
    db.con.register("_acked", table)
    try:
        missing = db.sql(
            "SELECT a.app, a.user_id, a.conversation_id, a.id, a.seq FROM _acked a ANTI JOIN messages m "
            "ON m.app = a.app AND m.user_id = a.user_id AND m.conversation_id = a.conversation_id "
            "AND m.id = a.id ORDER BY ALL"
        ).fetchall()
    finally:
        db.con.unregister("_acked")
    letters = [DeadLetter(a, u, c, i, int(s), "lost", reason, "") for a, u, c, i, s in missing]
    record(db, letters)
    return letters
