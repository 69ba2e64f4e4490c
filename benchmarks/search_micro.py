"""Search inside one shard, against the raw floor over the same vectors and texts: the
micro-benchmark behind the scoring kernel (:mod:`memray.index.scorer`) and the app-wide flat
index of :mod:`memray.index.flat`.

    python -m benchmarks.search_micro --n 1000 --namespaces 1 --queries 300
    python -m benchmarks.search_micro --n 50000 --namespaces 500 --queries 100

One :class:`~memray.index.shard.VectorShard` (in this process, no Ray) holds ``--n`` hash-embedded
messages over ``--namespaces`` conversations. Queries are stored messages with words dropped,
asked in the default hybrid mode with the hash embedder's calibration:

- ``conversation``: ``VectorShard.search`` of the query's conversation, against ``raw_conversation``
  (numpy exact top-k + BM25 top-k over that conversation, :mod:`benchmarks._raw`);
- ``app``: ``VectorShard.search_app`` over every conversation, against ``raw_app`` (numpy + BM25
  over all of them) and ``raw_app_numpy`` (the vector part alone).

- ``many``: batches of ``--batch`` (a list of sizes) conversation searches (each its query's
  conversation, as a tick's agents send them) through ``VectorShard.search_many`` (one batch of
  the kernel), against ``one_by_one`` (``VectorShard.search`` per search: batches of one) and
  ``raw`` (the raw floor of each search, summed); ``many_cpu_us_per_search`` is the process CPU
  time of the batched calls per search (steadier than wall time on a busy machine);
- ``shapes`` (``--shapes MxLxD,...``: M searches, each over its own namespace of L vectors of
  dim D, held as the shard holds them, one matrix per namespace): the ways to score them all,
  per batch: ``loop`` (one matrix-vector product per namespace), ``concat`` (gather into one
  matrix, one row-wise product with segment offsets), ``padded`` (gather into one (M, L, D)
  block, one batched matmul), and ``floor``: the batched matmul over a block already built (the
  same vectors in one array: what no gather costs). The loop won every shape measured.

Prints one JSON line (p50/p95/p99 in ms and the ratios of p50s). Run it with
``OPENBLAS_NUM_THREADS=1`` to compare trees: OpenBLAS's second thread makes a large matrix-vector
product swing 10x on a loaded 2-core machine (``docs/scoring.md``).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._harness import emit, pct_ms, ratio, scratch, sentence
from benchmarks._raw import RawBm25, RawExact, time_floor
from memray.config import IndexConfig
from memray.embedding.calibration import calibrate
from memray.embedding.hashing import HashEmbedder
from memray.ids import Namespace
from memray.index.base import IndexItem
from memray.index.search import NamespaceSearch, Query
from memray.index.shard import VectorShard

APP = "bench"


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    embedder = HashEmbedder()
    threshold, weight = calibrate(embedder)
    texts = [sentence(rng, 12) for _ in range(args.n)]
    vectors = embedder.embed(texts)
    conv_of = np.arange(args.n) % args.namespaces
    namespaces = [Namespace(APP, f"user-{c % 20}", "conv", f"c{c}") for c in range(args.namespaces)]
    shard = VectorShard(0, scratch("memray-search-micro-"), embedder.dim, embedder.model_id, IndexConfig())
    for lo in range(0, args.n, 5000):
        shard.upsert(
            [
                IndexItem(namespaces[conv_of[i]], f"m{i}", vectors[i], texts[i], float(i // args.namespaces))
                for i in range(lo, min(args.n, lo + 5000))
            ],
            embedder.model_id,
        )
    asked = [rng.randrange(args.n) for _ in range(args.queries)]
    qs = [" ".join(w for w in texts[i].split() if rng.random() > 0.33) for i in asked]
    qv = embedder.embed(qs)
    queries = [Query(q, v, args.k, "hybrid", None, embedder.model_id, threshold, weight) for q, v in zip(qs, qv)]
    members = [np.flatnonzero(conv_of == c) for c in range(args.namespaces)]
    raw = [(RawExact(vectors[m]), RawBm25([texts[i] for i in m])) for m in members]
    everything = (RawExact(vectors), RawBm25(texts))

    def both(pair: tuple[RawExact, RawBm25], i: int) -> None:
        pair[0].topk(qv[i], args.k)
        pair[1].topk(qs[i], args.k)

    def conversation(i: int) -> Any:
        return shard.search([namespaces[conv_of[asked[i]]]], queries[i])

    out = {
        "conversation": pct_ms(time_floor(len(qs), conversation)),
        "conversation_cpu_us": cpu_us(len(qs), conversation),
        "raw_conversation": pct_ms(time_floor(len(qs), lambda i: both(raw[conv_of[asked[i]]], i))),
        "app": pct_ms(time_floor(len(qs), lambda i: shard.search_app(APP, "conv", queries[i]))),
        "app_cpu_us": cpu_us(len(qs), lambda i: shard.search_app(APP, "conv", queries[i])),
        "raw_app": pct_ms(time_floor(len(qs), lambda i: both(everything, i))),
        "raw_app_numpy": pct_ms(time_floor(len(qs), lambda i: everything[0].topk(qv[i], args.k))),
    }

    def many(size: int) -> dict[str, Any]:
        batches = [range(lo, lo + size) for lo in range(0, len(qs) - size + 1, size)]
        requests = [[NamespaceSearch([namespaces[conv_of[asked[i]]]], queries[i]) for i in b] for b in batches]
        row: dict[str, Any] = {"batch": size}
        row["many"] = pct_ms(time_floor(len(batches), lambda b: shard.search_many(requests[b])))
        row["one_by_one"] = pct_ms(time_floor(len(batches), lambda b: [shard.search(*r) for r in requests[b]]))
        row["raw"] = pct_ms(time_floor(len(batches), lambda b: [both(raw[conv_of[asked[i]]], i) for i in batches[b]]))
        row["many_us_per_search"] = round(row["many"]["p50_ms"] * 1000.0 / size, 1)
        row["many_cpu_us_per_search"] = round(cpu_us(len(batches), lambda b: shard.search_many(requests[b])) / size, 1)
        row["many_p50_to_one_by_one"] = ratio(row["many"]["p50_ms"], row["one_by_one"]["p50_ms"])
        row["many_p50_to_raw"] = ratio(row["many"]["p50_ms"], row["raw"]["p50_ms"])
        return row

    out["many"] = [many(max(1, min(int(size), len(qs)))) for size in args.batch.split(",") if size]
    out["shapes"] = [shape_floors(*(int(x) for x in shape.split("x"))) for shape in args.shapes.split(",") if shape]
    out["conversation_p50_to_raw"] = ratio(out["conversation"]["p50_ms"], out["raw_conversation"]["p50_ms"])
    out["app_p50_to_raw"] = ratio(out["app"]["p50_ms"], out["raw_app"]["p50_ms"])
    out["app_p50_to_raw_numpy"] = ratio(out["app"]["p50_ms"], out["raw_app_numpy"]["p50_ms"])
    return out


def cpu_us(calls: int, fn: Callable[[int], Any]) -> float:
    """Process CPU time (µs) per call of ``calls`` sequential calls ``fn(i)``."""
    start = time.process_time()
    for i in range(calls):
        fn(i)
    return round((time.process_time() - start) / max(1, calls) * 1e6, 1)


def shape_floors(m: int, length: int, dim: int, repeats: int = 7) -> dict[str, Any]:
    """Per-batch p50 (ms) of each way to score ``m`` queries, each against its own namespace's
    ``length`` vectors (module docstring)."""
    rng = np.random.default_rng(0)
    mats = [rng.standard_normal((length, dim), dtype=np.float32) for _ in range(m)]
    queries = rng.standard_normal((m, dim), dtype=np.float32)
    segment = np.repeat(np.arange(m), length)
    block = np.stack(mats)

    def concat(_: int) -> Any:
        return np.einsum("nd,nd->n", np.concatenate(mats), queries[segment])

    def padded(_: int) -> Any:
        gathered = np.zeros((m, length, dim), dtype=np.float32)
        for i, mat in enumerate(mats):
            gathered[i] = mat
        return np.matmul(gathered, queries[:, :, None])

    ways = {
        "loop": lambda _: [mat @ q for mat, q in zip(mats, queries)],
        "concat": concat,
        "padded": padded,
        "floor": lambda _: np.matmul(block, queries[:, :, None]),
    }
    out: dict[str, Any] = {"m": m, "length": length, "dim": dim}
    for name, way in ways.items():
        out[f"{name}_ms"] = pct_ms(time_floor(repeats, way))["p50_ms"]
    out["loop_to_floor"] = ratio(out["loop_ms"], out["floor_ms"])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="messages in all")
    ap.add_argument("--namespaces", type=int, default=1, help="conversations they are spread over")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--batch", default="1,100", help="searches per search_many call, a list (many)")
    ap.add_argument("--shapes", default="100x50x256", help="MxLxD,... for the shapes comparison ('' skips it)")
    args = ap.parse_args(argv)
    return emit("search_micro", vars(args), run(args))


if __name__ == "__main__":
    main()
