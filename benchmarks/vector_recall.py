"""Recall@10 and latency of the sharded vector path against exact search, at N vectors.

    python -m benchmarks.vector_recall --n 1000000 --shards 4 --dim 64 [--plot out.png]

Builds ``--shards`` in-process :class:`~memray.index.shard.VectorShard` objects holding N clustered
unit vectors: ``--big-share`` of them in ``--big`` large namespaces (above the exact threshold,
so HNSW serves them) and the rest in many small namespaces (one per user, ~``--small-size``
vectors each, searched exactly), users placed on shards by the router's rule. Then it measures:

- recall@10 of scoped searches (one user: one namespace) on HNSW and on exact namespaces, and of
  app-wide searches (``ShardRouter.search_app``: fan-out to every shard, merged top-k), each
  against exact numpy search over the same vectors;
- latency p50/p99 of scoped and app-wide queries through :class:`ShardRouter` over in-process
  refs (the real call path minus Ray's ~1 ms round trip), next to the floor measured in the same
  run: exact numpy search over the same namespace (scoped) or over all N vectors (app-wide), and
  for HNSW namespaces raw hnswlib (:class:`benchmarks._raw.RawHnsw`: the shard's M,
  ef_construction and ef, one thread) built over the same vectors.

Prints one JSON line; ``--plot`` writes a PNG of the latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks._harness import scratch
from benchmarks._raw import RawHnsw
from benchmarks.index_crossover import git_sha
from memray.config import IndexConfig
from memray.ids import Namespace, user_hash
from memray.index.base import IndexItem
from memray.index.client import ShardClient
from memray.index.router import ShardRouter
from memray.index.search import Query
from memray.index.shard import VectorShard
from memray.rpc.local import LocalRef

Vec = npt.NDArray[np.float32]
APP = "bench"
K = 10


def unit_rows(v: Vec) -> Vec:
    out: Vec = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def make_data(rng: np.random.Generator, sizes: list[int], dim: int, spread: float) -> Vec:
    """Each namespace draws from its own few topic centres (clustered, like a user's history)."""
    parts = []
    for n in sizes:
        centres = unit_rows(rng.standard_normal((max(2, n // 500), dim)).astype(np.float32))
        noise = spread * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
        parts.append(unit_rows(centres[rng.integers(0, len(centres), n)] + noise))
    return np.concatenate(parts)


def layout(n: int, shards: int, big: int, big_share: float, small_size: int) -> tuple[list[str], list[int]]:
    """User ids and namespace sizes: ``big`` large users spread evenly over shards, then small ones."""
    big_n = int(n * big_share) // big if big else 0
    users: list[str] = []
    sizes: list[int] = []
    per_shard = [0] * shards
    candidates = (f"user-{i}" for i in range(10**9))
    while len(users) < big:
        u = next(candidates)
        s = user_hash(APP, u) % shards
        if per_shard[s] < -(-big // shards):
            per_shard[s] += 1
            users.append(u)
            sizes.append(big_n)
    rest = n - big_n * big
    while rest > 0:
        users.append(next(candidates))
        sizes.append(min(small_size, rest))
        rest -= sizes[-1]
    return users, sizes


def build(shards: list[VectorShard], users: list[str], sizes: list[int], data: Vec, chunk: int = 20_000) -> None:
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    work: dict[int, list[int]] = {}
    for i, u in enumerate(users):
        work.setdefault(user_hash(APP, u) % len(shards), []).append(i)

    def fill(s: int) -> None:
        for i in work.get(s, []):
            ns = Namespace(APP, users[i], "conv", "c")
            for lo in range(int(offsets[i]), int(offsets[i + 1]), chunk):
                hi = min(lo + chunk, int(offsets[i + 1]))
                shards[s].upsert([IndexItem(ns, str(j), data[j], "", float(j)) for j in range(lo, hi)], "bench")

    with ThreadPoolExecutor(len(shards)) as pool:  # hnswlib releases the GIL while it inserts
        list(pool.map(fill, range(len(shards))))


def exact_topk(data: Vec, queries: Vec, k: int, base: int = 0) -> list[set[int]]:
    out = []
    for lo in range(0, len(queries), 16):
        sims = queries[lo : lo + 16] @ data.T
        top = np.argpartition(-sims, min(k, data.shape[0] - 1), axis=1)[:, :k]
        out += [set((row + base).tolist()) for row in top]
    return out


def pct(times: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(float(np.percentile(times, 50)) * 1e3, 3),
        "p99_ms": round(float(np.percentile(times, 99)) * 1e3, 3),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    users, sizes = layout(args.n, args.shards, args.big, args.big_share, args.small_size)
    data = make_data(rng, sizes, args.dim, args.spread)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    cfg = IndexConfig(exact_threshold=args.exact_threshold, hnsw_ef=args.ef, neighbour_weight=0.0)  # against exact kNN
    tmp = scratch("memray-vector-recall-")
    shards = [VectorShard(i, os.path.join(tmp, f"s{i}"), args.dim, "bench", cfg) for i in range(args.shards)]
    t0 = time.perf_counter()
    build(shards, users, sizes, data)
    build_s = time.perf_counter() - t0
    stats = [s.stats() for s in shards]

    def queries_for(idx: list[int]) -> tuple[Vec, list[int]]:
        picks = [int(rng.integers(offsets[i], offsets[i + 1])) for i in idx]
        noise = 0.5 * args.spread * rng.standard_normal((len(idx), args.dim)).astype(np.float32) / np.sqrt(args.dim)
        return unit_rows(data[picks] + noise), idx

    big_idx = [int(i) for i in rng.integers(0, args.big, args.queries)] if args.big else []
    small_idx = [int(i) for i in rng.integers(args.big, len(users), args.queries)] if len(users) > args.big else []
    refs = [LocalRef(s, f"shard {s.shard_id}") for s in shards]
    router = ShardRouter([ShardClient(ref) for ref in refs])
    loop = asyncio.new_event_loop()
    result: dict[str, Any] = {}
    try:
        for name, idx in (("scoped_hnsw", big_idx), ("scoped_exact", small_idx)):
            if not idx:
                continue
            qs, _ = queries_for(idx)
            recalls, times, floor, raw_hnsw = [], [], [], []
            hnsw: dict[int, RawHnsw] = {}
            if name == "scoped_hnsw":
                for i in sorted(set(idx)):
                    lo, hi = int(offsets[i]), int(offsets[i + 1])
                    hnsw[i] = RawHnsw(data[lo:hi], cfg.hnsw_m, cfg.hnsw_ef_construction, cfg.hnsw_ef)
            for q, i in zip(qs, idx):
                ns = Namespace(APP, users[i], "conv", "c")
                t0 = time.perf_counter()
                res = loop.run_until_complete(router.search([ns], Query("", q, K, "vector", 0.0, None, -1.0)))
                times.append(time.perf_counter() - t0)
                lo, hi = int(offsets[i]), int(offsets[i + 1])
                t0 = time.perf_counter()
                truth = exact_topk(data[lo:hi], q[None, :], K, lo)[0]
                floor.append(time.perf_counter() - t0)
                if i in hnsw:
                    t0 = time.perf_counter()
                    hnsw[i].topk(q, K)
                    raw_hnsw.append(time.perf_counter() - t0)
                recalls.append(len(truth & {int(h.doc_id) for h in res.hits}) / K)
            result[name] = {
                "queries": len(idx),
                "recall_at_10": round(float(np.mean(recalls)), 4),
                "latency": pct(times),
                "floor_exact_latency": pct(floor),
            }
            if raw_hnsw:
                result[name]["floor_raw_hnsw_latency"] = pct(raw_hnsw)
                result[name]["ratio_p50_to_raw_hnsw"] = round(
                    result[name]["latency"]["p50_ms"] / max(1e-9, result[name]["floor_raw_hnsw_latency"]["p50_ms"]), 3
                )
            result[name]["ratio_p50_to_exact"] = round(
                result[name]["latency"]["p50_ms"] / max(1e-9, result[name]["floor_exact_latency"]["p50_ms"]), 3
            )
        qs, _ = queries_for([int(i) for i in rng.integers(0, len(users), args.app_queries)])
        times = []
        got = []
        for q in qs:
            t0 = time.perf_counter()
            res = loop.run_until_complete(router.search_app(APP, "conv", Query("", q, K, "vector", 0.0, None, -1.0)))
            times.append(time.perf_counter() - t0)
            got.append({int(h.doc_id) for h in res.hits})
        t0 = time.perf_counter()
        floor_times = []
        truths = []
        for q in qs:  # one query at a time, like the router's calls
            t0 = time.perf_counter()
            truths += exact_topk(data, q[None, :], K)
            floor_times.append(time.perf_counter() - t0)
        result["app_wide"] = {
            "queries": len(qs),
            "recall_at_10": round(float(np.mean([len(t & g) / K for t, g in zip(truths, got)])), 4),
            "latency": pct(times),
            "floor_exact_latency": pct(floor_times),
        }
        result["app_wide"]["ratio_p50_to_exact"] = round(
            result["app_wide"]["latency"]["p50_ms"] / max(1e-9, result["app_wide"]["floor_exact_latency"]["p50_ms"]), 3
        )
    finally:
        loop.close()
        for ref in refs:
            ref.shutdown()
    out = {
        "benchmark": "vector_recall",
        "git_sha": git_sha(),
        "n": args.n,
        "dim": args.dim,
        "shards": args.shards,
        "namespaces": len(users),
        "big_namespaces": args.big,
        "big_namespace_size": sizes[0] if args.big else 0,
        "small_namespace_size": args.small_size,
        "exact_threshold": cfg.exact_threshold,
        "hnsw_m": cfg.hnsw_m,
        "hnsw_ef_construction": cfg.hnsw_ef_construction,
        "hnsw_ef": cfg.hnsw_ef,
        "spread": args.spread,
        "build_s": round(build_s, 1),
        "hnsw_namespaces": sum(s["hnsw_namespaces"] for s in stats),
        "vectors_per_shard": [s["vectors"] for s in stats],
        "rss_mb": _rss_mb(),
        "floor": "exact numpy search over the same vectors, and raw hnswlib for HNSW namespaces, same run",
        **result,
    }
    return out


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return round(int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except OSError:
        return 0.0


def plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in ("scoped_hnsw", "scoped_exact", "app_wide") if n in result]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(7, 4))
    for off, key, label in ((-0.2, "latency", "memray (router)"), (0.2, "floor_exact_latency", "exact numpy floor")):
        ax.bar(
            x + off,
            [result[n][key]["p50_ms"] for n in names],
            0.4,
            label=f"{label} p50",
            yerr=[[0] * len(names), [result[n][key]["p99_ms"] - result[n][key]["p50_ms"] for n in names]],
        )
    ax.set_xticks(x, [f"{n}\nrecall@10={result[n]['recall_at_10']}" for n in names])
    ax.set_ylabel("ms (bar p50, whisker p99)")
    ax.set_yscale("log")
    ax.set_title(f"vector_recall: N={result['n']:,} dim={result['dim']} shards={result['shards']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--big", type=int, default=8, help="large (HNSW) namespaces")
    parser.add_argument("--big-share", type=float, default=0.6, help="share of N in the large namespaces")
    parser.add_argument("--small-size", type=int, default=1_000, help="vectors per small (exact) namespace")
    parser.add_argument("--exact-threshold", type=int, default=IndexConfig().exact_threshold)
    parser.add_argument("--ef", type=int, default=IndexConfig().hnsw_ef)
    parser.add_argument("--spread", type=float, default=1.0, help="cluster noise (1.0: hard, overlapping)")
    parser.add_argument("--queries", type=int, default=200, help="scoped queries of each kind")
    parser.add_argument("--app-queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", default=None, help="write a PNG here")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result))
    if args.plot:
        plot(result, args.plot)
    return result


if __name__ == "__main__":
    main()
