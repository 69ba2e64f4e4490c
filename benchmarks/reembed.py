"""Re-embedding throughput of ``jobs.backfill_embeddings`` against its floor, in one run.

    python -m benchmarks.reembed --rows 100000 --workers 2 [--plot reembed.png]

Seeds a store with ``--rows`` messages (written straight into a fresh DuckDB file, not embedded),
then measures, in this run:

* ``floor_rows_per_s``: the hash embedder's own throughput in one process (same texts, same batch
  size), times ``--workers`` — what a perfectly parallel job would do;
* ``job_rows_per_s``: the job's bulk phase (export read by Ray Data, embedded on an actor pool,
  vectors upserted through the store actor), rows / seconds including Ray Data's start-up;
* ``ratio`` = job / floor (target ≥ 0.7), and the whole job's rows/s (staging and cutover too);
* ``store_write_rows_per_s``: ``put_embeddings`` alone (one DuckDB writer, vectors ready) — with
  an embedder as cheap as the hash one this single writer, not the pool, bounds the job, so
  ``ratio_vs_store_floor`` compares the job with min(embedder × workers, store writes).

Prints one JSON line; ``--plot`` draws the two bars to a PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from typing import Any

import numpy as np

from benchmarks._harness import git_sha
from memray.config import EmbedderConfig, MemoryConfig
from memray.embedding import HashEmbedder
from memray.ids import Namespace
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow, MessageRow


def texts(n: int, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)]
    lengths = rng.integers(8, 40, n)
    words = rng.zipf(1.3, int(lengths.sum())) % len(vocab)
    out, at = [], 0
    for length in lengths:
        out.append(" ".join(vocab[w] for w in words[at : at + length]))
        at += length
    return out


def seed_store(path: str, corpus: list[str], users: int = 200, per_conv: int = 50) -> None:
    store = HistoryStore(MemoryConfig(path=path).store_path)
    os.makedirs(path, exist_ok=True)
    store.open()
    now = time.time()
    rows = [
        MessageRow(
            "bench",
            f"u{(i // per_conv) % users}",
            f"c{i // per_conv}",
            f"m{i}",
            i % per_conv + 1,
            "user",
            json.dumps([{"type": "text", "text": t}]),
            "{}",
            now,
            t,
        )
        for i, t in enumerate(corpus)
    ]
    for at in range(0, len(rows), 20_000):
        store.append_messages(rows[at : at + 20_000])
    store.close()


def floor(corpus: list[str], dim: int, batch: int) -> float:
    embedder = HashEmbedder(dim)
    sample = corpus[: min(len(corpus), 40_000)]
    embedder.embed(sample[:batch])  # warm the token table like a pool actor's first batch does
    t0 = time.perf_counter()
    for at in range(0, len(sample), batch):
        embedder.embed(sample[at : at + batch])
    return len(sample) / (time.perf_counter() - t0)


def store_floor(corpus: list[str], dim: int, batch: int) -> float:
    """Rows/s of ``put_embeddings`` alone (one DuckDB writer, in this process, vectors ready):
    every vector the job makes goes through it, so the job cannot beat it."""
    sample = corpus[: min(len(corpus), 40_000)]
    path = tempfile.mkdtemp(prefix="memray-reembed-floor-")
    try:
        seed_store(path, sample)
        store = HistoryStore(MemoryConfig(path=path).store_path)
        store.open()
        vectors = HashEmbedder(dim).embed(sample)
        rows = [
            EmbeddingRow(Namespace("bench", f"u{(i // 50) % 200}", "conv", f"c{i // 50}"), f"m{i}", "floor", vectors[i])
            for i in range(len(sample))
        ]
        t0 = time.perf_counter()
        for at in range(0, len(rows), batch):
            store.put_embeddings(rows[at : at + batch])
        rate = len(rows) / (time.perf_counter() - t0)
        store.close()
        return rate
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(rows: int, workers: int, dim: int, batch: int, shards: int, cpus_per_worker: float) -> dict[str, Any]:
    import ray

    from jobs.backfill_embeddings import run as backfill

    corpus = texts(rows)
    single = floor(corpus, dim, batch)
    store_rate = store_floor(corpus, dim, batch)
    path = tempfile.mkdtemp(prefix="memray-reembed-")
    try:
        seed_store(path, corpus)
        # no embedder in the seeded memray: its hosts would otherwise embed the backlog meanwhile
        config = MemoryConfig(path=path, mode="ray", hosts=1, shards=shards, embedder=EmbedderConfig(kind="none"))
        started = not ray.is_initialized()
        if started:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, namespace="memray-bench")
        try:
            result = backfill(config, EmbedderConfig(kind="hash", dim=dim), workers, batch, None, cpus_per_worker)
        finally:
            if started:
                ray.shutdown()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    floor_rate = single * workers
    return {
        "benchmark": "reembed",
        "git": git_sha(),
        "rows": rows,
        "workers": workers,
        "dim": dim,
        "batch_size": batch,
        "cpus": os.cpu_count(),
        "single_process_rows_per_s": round(single, 1),
        "floor_rows_per_s": round(floor_rate, 1),
        "job_rows_per_s": result["bulk_rows_per_s"],
        "ratio": round(result["bulk_rows_per_s"] / floor_rate, 3),
        "target_ratio": 0.7,
        "store_write_rows_per_s": round(store_rate, 1),
        "ratio_vs_store_floor": round(result["bulk_rows_per_s"] / min(floor_rate, store_rate), 3),
        "job_total_rows_per_s": result["rows_per_s"],
        "job_seconds": result["seconds"],
        "bulk_seconds": result["bulk_seconds"],
        "job_rows": result["rows"],
    }


def plot(record: dict[str, Any], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    labels = [f"embedder × {record['workers']}\n(floor)", "backfill job\n(bulk phase)"]
    values = [record["floor_rows_per_s"], record["job_rows_per_s"]]
    ax.bar(labels, values, color=["#999999", "#3b75af"])
    ax.set_ylabel("rows / s")
    ax.set_title(f"re-embedding {record['rows']:,} rows, hash dim {record['dim']}: ratio {record['ratio']:.2f}")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reembed", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--plot", default=None, help="write a PNG here")
    args = parser.parse_args(argv)
    record = run(args.rows, args.workers, args.dim, args.batch_size, args.shards, args.cpus_per_worker)
    print(json.dumps(record), flush=True)
    if args.plot:
        plot(record, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
