"""Where HNSW starts to beat exact search for one namespace: sets ``IndexConfig.exact_threshold``.

    python -m benchmarks.index_crossover --dim 256 --sizes 250,500,1000,2000,4000,8000,16000

For each namespace size ``n`` it builds an :class:`ExactIndex` and an :class:`HnswIndex` (the
``IndexConfig`` defaults: M, ef_construction, ef, one thread) over clustered unit vectors and
times single-vector top-10 queries on both (p50/p95, µs), the build (s; the cost a shard pays once
when it promotes a namespace) and HNSW's recall@10 against exact. The crossover is the smallest
size at which HNSW's p50 is below exact's p50; the floor it is compared with is exact search,
measured in the same run. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks._harness import git_sha
from memray.config import IndexConfig
from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex

Vec = npt.NDArray[np.float32]


def clustered(rng: np.random.Generator, n: int, dim: int, clusters: int, spread: float) -> Vec:
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = spread * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    v = centres[rng.integers(0, clusters, n)] + noise
    out: Vec = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def _latency_us(search: Any, queries: Vec) -> tuple[float, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        search(q, 10)
        times.append((time.perf_counter() - t0) * 1e6)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def measure(n: int, dim: int, queries: int, cfg: IndexConfig, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    clusters = max(2, n // 100)
    data = clustered(rng, n, dim, clusters, 1.0)
    qs = clustered(rng, queries, dim, clusters, 1.0)
    t0 = time.perf_counter()
    exact = ExactIndex(dim)
    exact.add(np.arange(n), data)
    exact_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    hnsw = HnswIndex(dim, m=cfg.hnsw_m, ef_construction=cfg.hnsw_ef_construction, ef=cfg.hnsw_ef, capacity=n)
    hnsw.add(np.arange(n), data)
    hnsw_build = time.perf_counter() - t0
    exact_p50, exact_p95 = _latency_us(exact.search, qs)
    hnsw_p50, hnsw_p95 = _latency_us(hnsw.search, qs)
    truth, _ = exact.search(qs, 10)
    got, _ = hnsw.search(qs, 10)
    recall = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth.tolist(), got.tolist())]))
    return {
        "n": n,
        "exact_p50_us": round(exact_p50, 1),
        "exact_p95_us": round(exact_p95, 1),
        "hnsw_p50_us": round(hnsw_p50, 1),
        "hnsw_p95_us": round(hnsw_p95, 1),
        "exact_build_s": round(exact_build, 4),
        "hnsw_build_s": round(hnsw_build, 3),
        "hnsw_recall_at_10": round(recall, 3),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--sizes", default="250,500,1000,2000,4000,8000,16000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--ef", type=int, default=None, help="override IndexConfig.hnsw_ef")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cfg = IndexConfig() if args.ef is None else IndexConfig(hnsw_ef=args.ef)
    rows = [measure(int(n), args.dim, args.queries, cfg, args.seed) for n in args.sizes.split(",")]
    crossover = next((r["n"] for r in rows if r["hnsw_p50_us"] < r["exact_p50_us"]), None)
    result = {
        "benchmark": "index_crossover",
        "git_sha": git_sha(),
        "dim": args.dim,
        "queries": args.queries,
        "hnsw_m": cfg.hnsw_m,
        "hnsw_ef_construction": cfg.hnsw_ef_construction,
        "hnsw_ef": cfg.hnsw_ef,
        "floor": "exact search (numpy), same run",
        "sizes": rows,
        "crossover_n": crossover,
        "configured_exact_threshold": cfg.exact_threshold,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
