"""What a shard's batched calls cost on the wire: items and queries as objects against
:mod:`memray.index.wire`'s batches, through a real Ray actor call, one JSON line.

    python -m benchmarks.index_wire_micro --n 5000 --dim 384

Found by profiling a shard actor during a 10,000-agent tick (``py-spy record -p PID`` on
``examples/tick.py --agents 10000``): Ray deserialising the arguments was 16% of its samples,
about a vector buffer per item (``_frombuffer``, ``_deserialize_pickle5_data``). Per form, the
best of ``--repeat`` calls of an actor method that only counts what it got (ms per call):

- ``upsert``: ``n`` :class:`~memray.index.base.IndexItem` (one tick's messages of ``n``
  conversations on one shard) as a list, and as an :class:`~memray.index.wire.ItemBatch`;
- ``search_many``: ``n`` :class:`~memray.index.search.NamespaceSearch` with a query vector each,
  as a list, and as a :class:`~memray.index.wire.SearchBatch`;
- ``replies``: ``n`` :class:`~memray.index.search.ShardReply` (three hits each, the query's
  BM25 statistics, one watched namespace) answered by the actor, as a list, as
  :class:`PlainReplies` (plain tuples, rebuilt on arrival): the form tried and not taken, since
  it was slower (memray's replies stay named tuples), and as a
  :class:`~memray.index.wire.ReplyBatch` (what a shard answers: the same named tuples, pickled
  by the standard library's pickler);
- ``floor``: the same call carrying the raw data: the vectors as one matrix and the texts as a
  list (what no wire format can beat).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._harness import emit, log, ratio, start_ray
from memray.ids import Namespace
from memray.index.base import IndexItem, ShardHit
from memray.index.lexical import Bm25Stats
from memray.index.search import NamespaceSearch, Query, ShardReply
from memray.index.wire import ItemBatch, ReplyBatch, SearchBatch


class Counter:
    """An actor that only counts what it got (its arguments are unpickled before the call), and
    answers what it was given to keep."""

    def __init__(self) -> None:
        self.kept: Any = None

    def take(self, batch: Any) -> int:
        return len(batch)

    def keep(self, answer: Any) -> None:
        self.kept = answer

    def give(self) -> Any:
        return self.kept


class PlainReplies(list[ShardReply]):
    """Replies that pickle as plain tuples and are rebuilt as named tuples on arrival."""

    def __reduce__(self) -> tuple[Any, ...]:
        def plain(r: ShardReply) -> tuple[Any, ...]:
            hits = [(tuple(h.namespace), *h[1:]) for h in r.hits]
            return (hits, tuple(r.stats), [(tuple(ns), v) for ns, v in r.stamps.items()], list(r.held.items()))

        return (_plain_replies, ([plain(r) for r in self],))


def _plain_replies(plain: list[tuple[Any, ...]]) -> PlainReplies:
    return PlainReplies(
        ShardReply(
            [ShardHit(Namespace(*ns), *rest) for ns, *rest in hits],
            Bm25Stats(*stats),
            {Namespace(*ns): v for ns, v in stamps},
            {Namespace(*ns): v for ns, v in held},
        )
        for hits, stats, stamps, held in plain
    )


def best_ms(call: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return round(best * 1000, 2)


def data(n: int, dim: int) -> tuple[list[IndexItem], list[NamespaceSearch], list[ShardReply], np.ndarray, list[str]]:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    texts = [f"Today (day {i % 9}) I tidied the garden and read for an hour, agent {i}." for i in range(n)]
    spaces = [Namespace("default", f"agent-{i}", "conv", "main") for i in range(n)]
    items = [
        IndexItem(ns, f"m{i:012d}", vectors[i], texts[i], float(i), f'{{"id": "m{i:012d}"}}', 3, (1.0, np.nan, np.nan))
        for i, ns in enumerate(spaces)
    ]
    searches = [NamespaceSearch([ns], Query(texts[i], vectors[i], k=3)) for i, ns in enumerate(spaces)]
    stats = Bm25Stats(12, 140, {"tidi": 9, "garden": 9, "read": 10, "hour": 11})
    replies = [
        ShardReply(
            [ShardHit(ns, f"m{i:012d}-{h}", 0.5 - h / 10, float(h), f'{{"id": "m{i:012d}-{h}"}}') for h in range(3)],
            stats,
            {ns: 3},
            {ns: [2 * i]},
        )
        for i, ns in enumerate(spaces)
    ]
    return items, searches, replies, vectors, texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()

    import ray

    start_ray(None)
    actor: Any = ray.remote(Counter).options(num_cpus=0).remote()
    ray.get(actor.take.remote([]))
    items, searches, replies, vectors, texts = data(args.n, args.dim)

    def call(batch: Any) -> Callable[[], Any]:
        return lambda: ray.get(actor.take.remote(batch))

    log("timing")
    floor = best_ms(call((vectors, texts)), args.repeat)
    results: dict[str, Any] = {"floor_ms": floor}
    for name, objects, batch in (("upsert", items, ItemBatch(items)), ("search_many", searches, SearchBatch(searches))):
        as_objects, as_batch = best_ms(call(objects), args.repeat), best_ms(call(batch), args.repeat)
        results[name] = {
            "objects_ms": as_objects,
            "batch_ms": as_batch,
            "speedup": ratio(as_objects, as_batch),
            "batch_over_floor": ratio(as_batch, floor),
        }
    answered = []
    for answer in (replies, PlainReplies(replies), ReplyBatch(replies)):
        ray.get(actor.keep.remote(answer))  # (kept as it arrives: the same form)
        answered.append(best_ms(lambda: ray.get(actor.give.remote()), args.repeat))
    as_objects, as_plain, as_batch = answered
    results["replies"] = {
        "objects_ms": as_objects,
        "plain_ms": as_plain,
        "batch_ms": as_batch,
        "speedup": ratio(as_objects, as_batch),
    }
    ray.shutdown()
    emit("index_wire_micro", vars(args), results)


if __name__ == "__main__":
    main()
