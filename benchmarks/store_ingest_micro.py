"""Micro-benchmark of the history store's hot path: ``append_messages`` group commits.

Prints one JSON line: rows/s of ``HistoryStore.append_messages`` for new rows and for re-upserts
of existing rows, against the floor measured in the same run — a plain Arrow
``INSERT INTO t SELECT * FROM arrow_table`` of the same rows (built the same way, with
``zip(*rows)``) into a bare table in the same kind of file, one transaction per batch — and
``statement_ms``: the median time of each SQL statement of a group commit of ``--small`` rows
(the size a host's commits have), which is what decided to fold the conversation upsert into
one MERGE (it was an aggregate, an UPDATE and an INSERT) and to skip clearing dead letters
while there are none. ``mark_statement_ms`` does the same for ``put_embeddings`` of those rows
with a recomputable model (marks, no vectors: what the embedding pipeline stores for the hash
embedder), which decided to find live items with the marking ``UPDATE … RETURNING`` instead of a
``SELECT … EXISTS … OR EXISTS`` (a nested loop) and to skip the vector statements.

    python -m benchmarks.store_ingest_micro --existing 200000 --batch 10000 --batches 10
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import tempfile
import time
from typing import Any

from benchmarks._harness import emit, raw_arrow_insert
from memray.ids import Namespace
from memray.store import database
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow, MessageRow

PARTS = '[{"type": "text", "text": "hello there, this is message %d"}]'


def make_rows(start: int, n: int, conversations: int) -> list[MessageRow]:
    """``n`` rows spread over ``conversations`` conversations of 1/10 as many users."""
    out = []
    for i in range(start, start + n):
        c = i % conversations
        out.append(
            MessageRow(
                "bench",
                f"user-{c % max(1, conversations // 10)}",
                f"conv-{c}",
                f"msg-{i}",
                i // conversations + 1,
                "user",
                PARTS % i,
                f'{{"turn": {i}}}',
                1.7e9 + i,
                f"hello there, this is message {i}",
            )
        )
    return out


def namespace_of(row: MessageRow) -> Namespace:
    return Namespace(row.app, row.user_id, "conv", row.conversation_id)


def time_batches(fn, batches: list[list[MessageRow]]) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    for b in batches:
        fn(b)
    return sum(len(b) for b in batches) / (time.perf_counter() - t)


def statement_ms(store: HistoryStore, batches: list[list[MessageRow]], marks: bool = False) -> dict[str, float]:
    """Median milliseconds of each statement while ``batches`` are committed (the SQL text's
    first words name it), or with ``marks`` while they are marked embedded with a recomputable
    model; ``total`` is the median of whole calls."""
    spent: dict[str, list[float]] = collections.defaultdict(list)
    plain, arrow = database.Database.sql, database.Database.arrow

    def timed(fn: Any) -> Any:
        def run(self: database.Database, query: str, params: Any = None) -> Any:
            t = time.perf_counter()
            try:
                return fn(self, query, params)
            finally:
                spent[" ".join(query.split()[:3])].append((time.perf_counter() - t) * 1000)

        return run

    database.Database.sql, database.Database.arrow = timed(plain), timed(arrow)  # type: ignore[method-assign]
    try:
        for b in batches:
            t = time.perf_counter()
            if marks:
                store.put_embeddings([EmbeddingRow(namespace_of(r), r.id, "hash-256", None) for r in b])
            else:
                store.append_messages(b)
            spent["total"].append((time.perf_counter() - t) * 1000)
    finally:
        database.Database.sql, database.Database.arrow = plain, arrow  # type: ignore[method-assign]
    return {name: round(statistics.median(ms), 2) for name, ms in sorted(spent.items(), key=lambda kv: -sum(kv[1]))}


def floor_rate(path: str, batches: list[list[MessageRow]]) -> float:
    return raw_arrow_insert(path, [r for b in batches for r in b], len(batches[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--existing", type=int, default=200_000, help="rows already in the store")
    ap.add_argument("--batch", type=int, default=10_000, help="rows per append_messages call")
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--conversations", type=int, default=2_000, help="conversations per batch")
    ap.add_argument("--small", type=int, default=2_000, help="rows per commit for statement_ms")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = HistoryStore(os.path.join(tmp, "history.duckdb"))
        store.open()
        for s in range(0, args.existing, 50_000):
            store.append_messages(make_rows(s, min(50_000, args.existing - s), args.conversations))
        start = args.existing
        batches = [make_rows(start + i * args.batch, args.batch, args.conversations) for i in range(args.batches)]
        new_rate = time_batches(store.append_messages, batches)
        update_batches = [[r._replace(text=r.text + " (edited)") for r in b] for b in batches[:3]]
        update_rate = time_batches(store.append_messages, update_batches)
        start += args.batches * args.batch
        small = [make_rows(start + i * args.small, args.small, args.conversations) for i in range(10)]
        statements = statement_ms(store, small)
        marking = statement_ms(store, small, marks=True)
        store.close()
        floor = floor_rate(os.path.join(tmp, "floor.duckdb"), batches)
    params = {
        "existing_rows": args.existing,
        "batch_rows": args.batch,
        "batches": args.batches,
        "conversations_per_batch": args.conversations,
    }
    emit(
        "store_ingest_micro",
        params,
        {
            "append_new_rows_per_s": round(new_rate),
            "append_update_rows_per_s": round(update_rate),
            "floor_raw_arrow_insert_rows_per_s": round(floor),
            "ratio_to_raw_arrow_insert": round(new_rate / floor, 3),
            "small_commit_rows": args.small,
            "statement_ms": statements,
            "mark_statement_ms": marking,
        },
    )


if __name__ == "__main__":
    main()
