"""Lists per field or Arrow for a batch of messages between processes, one JSON line.

    python -m benchmarks.wire_format_micro --messages 5000

An ``add_many`` carries its messages to a host as columns (:class:`memray.models.wire.MessageBatch`:
one Python list per field), and the host works on each message in Python (its buffer, seq, the
ledger, the persist wheel, the embedding items). Per message, best of 5, for ``--messages`` chat
messages as ``examples/tick.py`` writes them:

- ``lists``: memray's form: the columns made from the messages, through Ray's pickler and back,
  and the messages built from them (what the host works on);
- ``arrow``: the same columns as one Arrow record batch (typed), through Arrow's IPC stream and
  back, then read out as Python values and the messages built from them, since the host's work
  is Python per message;
- ``lists_transport`` and ``arrow_transport``: the trip alone, columns to columns, neither side
  building or reading Python values (what Arrow would cost if the host's work were vectorised).

What it decided: the wire to and from a host carries lists per field, not Arrow. At 5,000
messages (load 0.04): the whole trip 2.39 us a message as lists, 2.44 as Arrow; the trip alone
0.26 against 0.17 (Arrow's is the cheaper at that size, 0.22 against 0.26 at 500), and reading
Arrow's values out for Python takes that back. Building the messages is most of either (1.5 us;
making the columns 0.4), and both are small beside what a host spends on a message (the hosts'
1.6 CPU-s of a 10,000-agent tick over its 20,000 messages: ~80 us each, all their work counted,
``docs/performance.md``): the format of the wire is not where that time goes. The store,
which hands its rows to DuckDB, does take them as Arrow (``memray/store/messages.py``).
"""

from __future__ import annotations

import argparse
from typing import Any

import pyarrow as pa
import ray.cloudpickle as cp  # Ray's pickler: what a call's arguments and answer go through

from benchmarks._harness import best_us, emit, ratio
from memray.models import Message
from memray.models.wire import decode_messages, encode_messages
from memray.runtime import collector

_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("role", pa.string()),
        ("parts", pa.string()),  # one text part each here: its text
        ("created_at", pa.float64()),
        ("metadata", pa.string()),
        ("seq", pa.int64()),
        ("sim_time", pa.float64()),
        ("importance", pa.float64()),
        ("agent_id", pa.string()),
        ("sub_agent_id", pa.string()),
        ("named", pa.bool_()),  # the caller chose the id
    ]
)


def messages(n: int) -> list[Message]:
    return [
        Message(
            id=f"m{i}", role="user" if i % 2 == 0 else "assistant", parts=f"agent {i}, tick 3: I moved to Lisbon in May"
        )
        for i in range(n)
    ]


def to_arrow(columns: tuple[list[Any], ...]) -> bytes:
    batch = pa.record_batch(list(columns), schema=_SCHEMA)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, _SCHEMA) as writer:
        writer.write_batch(batch)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def from_arrow(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(data).read_next_batch()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=5000)
    args = ap.parse_args(argv)
    collector.raise_thresholds()  # as in memray's processes
    msgs = messages(args.messages)
    columns = encode_messages(msgs)
    assert columns is not None and len(columns) == len(_SCHEMA)

    def lists() -> list[Message]:
        return decode_messages(cp.loads(cp.dumps(encode_messages(msgs))))  # type: ignore[no-untyped-call]

    def arrow() -> list[Message]:
        batch = from_arrow(to_arrow(encode_messages(msgs)))  # type: ignore[arg-type]
        return decode_messages(tuple(column.to_pylist() for column in batch.columns))

    assert lists() == msgs and arrow() == msgs
    n = args.messages
    results: dict[str, Any] = {
        "lists_us_per_message": best_us(lists, n),
        "arrow_us_per_message": best_us(arrow, n),
        "lists_transport_us_per_message": best_us(lambda: cp.loads(cp.dumps(columns)), n),  # type: ignore[no-untyped-call]
        "arrow_transport_us_per_message": best_us(lambda: from_arrow(to_arrow(columns)), n),
    }
    results["arrow_over_lists"] = ratio(results["arrow_us_per_message"], results["lists_us_per_message"])
    return emit("wire_format_micro", {"messages": n}, results)


if __name__ == "__main__":
    main()
