"""Micro-benchmarks that decided the write path's choices, one JSON line.

    python -m benchmarks.write_path_micro --n 10000

Each pair times the old and the new way of one step a host pays per message of an ``add_many``
(found by profiling live host actors, ``py-spy record -p PID``, during ``benchmarks.ingest``):

- ``key_pickle``: conversation keys through Ray's pickler (cloudpickle): the frozen-dataclass
  default (its ``_dataclass_setstate`` calls ``dataclasses.fields`` per key: 5% of a host's
  samples) vs ``ConversationKey.__reduce__`` (rebuilt from its three strings);
- ``message_batch``: an ``add_many``'s messages through cloudpickle, whose per-object hook runs
  in Python for every model, part and dict: as the validated pydantic models vs as
  :class:`~memray.models.wire.MessageBatch` columns (encode in the caller + pickle round trip +
  decode in the host);
- ``persist_write_us``: CPU time per conversation write of ``n`` conversations written once each
  (debounce 1 ms, the store a no-op), as the host scheduled them before the persist wheel — a
  ``TimerHandle``, then a task awaiting the group commit's coalescer, per conversation — vs one
  :class:`~memray.conversation.persist.PersistWheel` (one timer, one task and one ``write_many``
  per due slot), with the floor: the same no-op ``write_many`` called once with every owner.
- ``edge_validation_us``: the caller's side, before any of that: ``coerce_message`` of the dict
  most callers pass (``{"id", "role", "content"}``) through pydantic's ``model_validate`` and
  validators vs the plain-dict path that builds the same message without pydantic, with the
  floor: a dict copied per message.
- ``store_rows_us``: a group commit's message rows and an embedding pipeline's rows (static
  embedder: no vector; MiniLM: its 384 floats) through cloudpickle and back, on their way to
  the store: as the named tuples vs as a :class:`~memray.store.rows.RowList` (columns, each
  namespace once, the vectors one matrix), with the floor: the same values as plain tuples.
- ``payload_us``: a shard item's payload (the message as JSON) made from its stored row, each
  value through ``json.dumps`` vs the encoder's ``encode`` with the absent optional fields
  skipped at once.
- ``lag_us``: per conversation of a write, recording when the store committed its messages
  (``LagRecorder.committed``): one call per conversation (a counter add and a histogram update
  each) vs one call for the whole write.

Results on the 2-core machine while busy (load average 20-40), µs per message: keys 5.6 → 2.2;
messages 42 → 2.3 + 1.0 + 9 (encode, round trip, decode). Edge validation, quieter: 15.4 → 2.9
µs (floor 0.1). Rows to the store, quieter: message rows 5.2 → 2.0 (plain tuples 1.5), embedding
rows 7.4 → 2.3 (1.0), with vectors 21 → 4.3 (9.7: as plain tuples each vector is its own buffer).
Later, quiet: payloads 3.2 → 1.4 µs a message; the commit lag 6.9 → 1.7 µs a conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import ray.cloudpickle as cp

from benchmarks._harness import best_us, emit
from memray.conversation.persist import PersistWheel
from memray.ids import ConversationKey, conversation_namespace
from memray.metrics import LagRecorder
from memray.models import Message, coerce_message
from memray.models import messages as records
from memray.models.wire import MessageBatch
from memray.rpc.batch import Coalescer
from memray.store.rows import EmbeddingRow, MessageRow, RowList, message_payload, message_to_row, payload_extras


def _dataclass_key(t: tuple[str, str, str]) -> Any:
    """A key that pickles the frozen-dataclass way (what ``ConversationKey`` did before)."""
    from dataclasses import dataclass

    global _OldKey
    if _OldKey is None:

        @dataclass(frozen=True, slots=True)
        class OldKey:
            app: str
            user_id: str
            conversation_id: str

        OldKey.__qualname__ = OldKey.__name__ = "_OldKeyType"
        globals()["_OldKeyType"] = OldKey
        _OldKey = OldKey
    return _OldKey(*t)


_OldKey: Any = None


class _Written:
    """Counts writes; ``all`` is set once ``n`` have landed."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.count = 0
        self.all = asyncio.Event()

    def add(self, k: int) -> None:
        self.count += k
        if self.count >= self.n:
            self.all.set()

    async def write_many(self, owners: list[int]) -> list[int | Exception]:
        self.add(len(owners))
        return list(owners)


class _TimerAndTask:
    """A conversation's write as the host made it before the wheel: its own timer, then its own
    task, whose commit waits on a future of the shared coalescer."""

    __slots__ = ("_commit", "_written", "_timer")

    def __init__(self, commit: Coalescer[int, int], written: _Written) -> None:
        self._commit = commit
        self._written = written
        self._timer: asyncio.TimerHandle | None = None

    def schedule(self, debounce_s: float) -> None:
        loop = asyncio.get_running_loop()
        self._timer = loop.call_at(loop.time() + debounce_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        await self._commit.get(1)
        self._written.add(1)


async def _noop_commit(requests: list[int]) -> list[int]:
    return requests


def persist_cpu_us(n: int, debounce_s: float = 0.001, repeat: int = 3) -> dict[str, float]:
    """CPU µs per conversation write, best of ``repeat``: old per-conversation scheduling, the
    wheel, and the floor (one ``write_many`` call with every owner)."""

    async def old() -> float:
        written = _Written(n)
        commit: Coalescer[int, int] = Coalescer(_noop_commit)
        t0 = time.process_time()
        for _ in range(n):
            _TimerAndTask(commit, written).schedule(debounce_s)
        await written.all.wait()
        return time.process_time() - t0

    async def wheel() -> float:
        written = _Written(n)
        persist = PersistWheel(written.write_many, debounce_s)
        t0 = time.process_time()
        for i in range(n):
            persist.chain(i).schedule()
        await written.all.wait()
        return time.process_time() - t0

    async def floor() -> float:
        written = _Written(n)
        t0 = time.process_time()
        await written.write_many(list(range(n)))
        return time.process_time() - t0

    out = {}
    for name, fn in (("timer_and_task_per_conversation", old), ("wheel", wheel), ("floor_one_call", floor)):
        out[name] = round(min(asyncio.run(fn()) for _ in range(repeat)) / n * 1e6, 3)
    return out


def edge_validation_us(n: int) -> dict[str, float]:
    """``coerce_message`` of ``n`` plain dicts, through pydantic and through the plain-dict path."""
    dicts = [{"id": f"m{i}", "role": "user", "content": f"hello there, message number {i}"} for i in range(n)]

    def coerce() -> None:
        for d in dicts:
            coerce_message(d)

    plain = best_us(coerce, n)
    with mock.patch.object(records, "_plain_message", return_value=None):
        pydantic = best_us(coerce, n)
    return {"pydantic": pydantic, "plain_dict": plain, "dict_copy_floor": best_us(lambda: [dict(d) for d in dicts], n)}


def store_rows_us(keys: list[ConversationKey], msgs: list[Message]) -> dict[str, dict[str, float]]:
    """Rows to the store through cloudpickle and back: named tuples, columns, plain tuples."""
    n = len(keys)
    rows = [message_to_row(k, m.model_copy(update={"seq": 1})) for k, m in zip(keys, msgs)]
    vectors = list(np.random.default_rng(0).random((n, 384), dtype=np.float32))  # each its own (pickle shares one)
    embedded = {
        "message_rows": rows,
        "embedding_rows": [EmbeddingRow(conversation_namespace(k), m.id, "static", None) for k, m in zip(keys, msgs)],
        "embedding_rows_with_vectors": [
            EmbeddingRow(conversation_namespace(k), m.id, "minilm", v) for k, m, v in zip(keys, msgs, vectors)
        ],
    }

    def trip(obj: Any) -> Callable[[], Any]:
        return lambda: cp.loads(cp.dumps(obj))

    def plain(row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(tuple(v) if isinstance(v, tuple) else v for v in row)

    return {
        name: {
            "named_tuples": best_us(trip(batch), n),
            "row_list": best_us(trip(RowList(batch)), n),
            "plain_tuples_floor": best_us(trip([plain(r) for r in batch]), n),
        }
        for name, batch in embedded.items()
    }


def _payload_dumps(row: MessageRow) -> str:
    """The payload as :func:`~memray.store.rows.message_payload` made it before: every value
    through ``json.dumps``."""
    extra = "".join(f',"{name}":{json.dumps(value, ensure_ascii=False)}' for name, value in payload_extras(row))
    return (
        f'{{"id":{json.dumps(row.id, ensure_ascii=False)},"role":"{row.role}","parts":{row.parts_json},'
        f'"created_at":{row.created_at!r},"metadata":{row.metadata_json},"seq":{row.seq}{extra}}}'
    )


def payload_us(keys: list[ConversationKey], msgs: list[Message]) -> dict[str, float]:
    rows = [message_to_row(k, m.model_copy(update={"seq": 1})) for k, m in zip(keys, msgs)]
    assert [_payload_dumps(r) for r in rows] == [message_payload(r) for r in rows]
    return {
        "dumps_per_value": best_us(lambda: [_payload_dumps(r) for r in rows], len(rows)),
        "encode_skipping_absent": best_us(lambda: [message_payload(r) for r in rows], len(rows)),
    }


def lag_us(keys: list[ConversationKey], msgs: list[Message]) -> dict[str, float]:
    """Per conversation of a write (one message each): its commit recorded alone, or with the
    write's others in one call."""
    done = [(k, [m.id]) for k, m in zip(keys, msgs)]

    def timed(record: Callable[[LagRecorder], None]) -> Callable[[], None]:
        def run() -> None:
            rec = LagRecorder("bench")
            for k, ids in done:
                rec.acked(k, ids, 0.0)
            record(rec)

        return run

    acked_only = best_us(timed(lambda rec: None), len(done))
    per_conversation = best_us(timed(lambda rec: [rec.committed([one], 1.0) for one in done]), len(done))
    per_write = best_us(timed(lambda rec: rec.committed(done, 1.0)), len(done))
    return {"per_conversation": round(per_conversation - acked_only, 3), "per_write": round(per_write - acked_only, 3)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    args = ap.parse_args(argv)
    n = args.n
    keys = [ConversationKey("bench", f"user-{i // 4}", f"conv-{i}") for i in range(n)]
    tuples = [(k.app, k.user_id, k.conversation_id) for k in keys]
    old_keys = [_dataclass_key(t) for t in tuples]
    msgs = [Message(id=f"m{i}", role="user", parts=f"hello there, message number {i}") for i in range(n)]  # type: ignore[arg-type]
    batch = [(k, [m]) for k, m in zip(keys, msgs)]
    wire = MessageBatch.encode(batch)
    results = {
        "key_pickle_us": {
            "dataclass_state": best_us(lambda: cp.loads(cp.dumps(old_keys)), n),
            "reduce_to_strings": best_us(lambda: cp.loads(cp.dumps(keys)), n),
            "tuples_floor": best_us(lambda: cp.loads(cp.dumps(tuples)), n),
        },
        "message_batch_us": {
            "pydantic_round_trip": best_us(lambda: cp.loads(cp.dumps(batch)), n),
            "columns_encode": best_us(lambda: MessageBatch.encode(batch), n),
            "columns_round_trip": best_us(lambda: cp.loads(cp.dumps(wire)), n),
            "columns_decode": best_us(wire.decode, n),
        },
        "persist_write_us": persist_cpu_us(n),
        "edge_validation_us": edge_validation_us(n),
        "store_rows_us": store_rows_us(keys, msgs),
        "payload_us": payload_us(keys, msgs),
        "lag_us": lag_us(keys, msgs),
    }
    return emit("write_path_micro", {"n": n}, results)


if __name__ == "__main__":
    main()
