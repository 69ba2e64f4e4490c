"""Re-embedding throughput of :mod:`memray.jobs.backfill_embeddings` against its embedder, in one run.

    python -m benchmarks.reembed --model local:all-MiniLM-L6-v2 --rows 20000 [--workers N] [--plot reembed.png]
    python -m benchmarks.reembed --model hash:128 --rows 100000      # the store-bound case

Seeds a store with ``--rows`` chat-like messages (written straight into a fresh DuckDB file, not
embedded), plans the job's pool as the job does (``--workers`` / ``--cpus-per-worker``, default:
from the free CPUs), then measures, in this run:

* ``embedder_rows_per_s``: the embedder alone in one fresh process, with the threads one pool
  worker gets (``threads``: torch's intra-op threads for a local model) and the niceness Ray
  gives its workers (15 unless ``RAY_worker_niceness`` says otherwise), over the same texts and
  batch size, after loading; ``floor_rows_per_s`` is that × ``workers`` — what a perfectly
  parallel job would do, and what ``ratio`` (target ≥ 0.7) compares the job with;
* ``parallel_rows_per_s``: ``workers`` such processes embedding at the same time — what the
  machine really gives that many embedders right now (this box is shared: another engineer's
  load shows up here and in the job alike, not in the single-process figure);
* ``job_rows_per_s``: the job's bulk phase — Ray Data starting its pool (each worker loading
  the model), reading the export, embedding, writing the vectors through the store — rows /
  seconds from its start; ``job_steady_rows_per_s`` the same from the first batch written on,
  and ``job_startup_s`` until then (compare ``embedder_load_s``: a fresh process importing and
  loading the embedder, which every pool worker has to do too);
* for the hash embedder, ``store_write_rows_per_s``: ``put_embeddings`` alone (one DuckDB
  writer, vectors ready), which bounds a job whose embedder is that cheap.

Prints one JSON line (with the load average before and after); ``--plot`` draws the bars.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import tempfile
import time
from typing import Any

from benchmarks._harness import emit, log, machine, plot_bars, ratio, sentence, start_ray
from memray.config import EmbedderConfig, MemoryConfig
from memray.ids import Namespace
from memray.jobs.backfill_embeddings import parse_model
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow, MessageRow

_USERS, _PER_CONV = 200, 50


def texts(n: int, seed: int = 11) -> list[str]:
    """Chat-like messages of 8-30 words."""
    rng = random.Random(seed)
    return [sentence(rng, rng.randint(8, 30)) for _ in range(n)]


def seed_store(path: str, corpus: list[str]) -> None:
    store = HistoryStore(MemoryConfig(path=path).store_path)
    os.makedirs(path, exist_ok=True)
    store.open()
    now = time.time()
    rows = [
        MessageRow(
            "bench",
            f"u{(i // _PER_CONV) % _USERS}",
            f"c{i // _PER_CONV}",
            f"m{i}",
            i % _PER_CONV + 1,
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


def _embed_rate(config_json: str, sample: list[str], batch: int, threads: int, start: Any, out: Any) -> None:
    """In a fresh process: load the embedder with ``threads`` threads, wait for ``start``, then
    embed ``sample`` in batches of ``batch``; puts (rows/s, seconds to load) on ``out``. Runs at
    the niceness Ray gives its workers (``RAY_worker_niceness``, 15 by default), as the pool's
    actors do: on a shared machine other work then takes from both alike."""
    t_load = time.perf_counter()
    os.nice(int(os.environ.get("RAY_worker_niceness", "15")) - os.nice(0))
    config = EmbedderConfig.model_validate_json(config_json)
    if config.kind == "local":
        import torch

        torch.set_num_threads(threads)
    from memray.embedding import build_embedder

    embedder = build_embedder(config)
    assert embedder is not None
    embedder.embed(sample[: min(len(sample), 64)])  # load the model / warm the token table
    load_s = time.perf_counter() - t_load
    start.wait()
    t0 = time.perf_counter()
    for at in range(0, len(sample), batch):
        embedder.embed(sample[at : at + batch])
    out.put((len(sample) / (time.perf_counter() - t0), load_s))


def embedder_rates(
    config: EmbedderConfig, sample: list[str], batch: int, threads: int, procs: int
) -> list[tuple[float, float]]:
    """(rows/s, seconds to import and load) of each of ``procs`` fresh processes embedding
    ``sample`` at the same time."""
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(procs), ctx.Queue()
    args = (config.model_dump_json(), sample, batch, threads, start, out)
    workers = [ctx.Process(target=_embed_rate, args=args) for _ in range(procs)]
    for w in workers:
        w.start()
    rates = [out.get() for _ in workers]
    for w in workers:
        w.join()
    return rates


def store_floor(corpus: list[str], dim: int, batch: int) -> float:
    """Rows/s of ``put_embeddings`` alone (one DuckDB writer, in this process, vectors ready)."""
    from memray.embedding import HashEmbedder

    sample = corpus[: min(len(corpus), 40_000)]
    path = tempfile.mkdtemp(prefix="memray-reembed-floor-")
    try:
        seed_store(path, sample)
        store = HistoryStore(MemoryConfig(path=path).store_path)
        store.open()
        vectors = HashEmbedder(dim).embed(sample)
        rows = [
            EmbeddingRow(
                Namespace("bench", f"u{(i // _PER_CONV) % _USERS}", "conv", f"c{i // _PER_CONV}"),
                f"m{i}",
                "floor",
                vectors[i],
            )
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memray.jobs.backfill_embeddings import BATCH_SIZES
    from memray.jobs.backfill_embeddings import run as backfill
    from memray.jobs.resources import free_resources, plan_pool

    target = parse_model(args.model)
    batch = args.batch_size or BATCH_SIZES.get(target.kind, 1024)
    corpus = texts(args.rows)
    load_before = machine()["load_avg"]
    started = start_ray(args.address)
    try:
        plan = plan_pool(*free_resources(), args.workers, args.cpus_per_worker, use_gpus=target.kind == "local")
        sample = corpus[: min(len(corpus), args.floor_rows)]
        log(f"embedder alone: 1 process, then {plan.workers} at once, {len(sample)} rows, {plan.threads} thread(s)")
        single, load_s = embedder_rates(target, sample, batch, plan.threads, 1)[0]
        parallel = sum(rate for rate, _ in embedder_rates(target, sample, batch, plan.threads, plan.workers))
        store_rate = store_floor(corpus, target.dim or 256, batch) if target.kind == "hash" else None
        path = tempfile.mkdtemp(prefix="memray-reembed-")
        try:
            seed_store(path, corpus)
            # no embedder in the seeded memray: its hosts would otherwise embed the backlog meanwhile
            config = MemoryConfig(
                path=path, mode="ray", hosts=1, shards=args.shards, embedder=EmbedderConfig(kind="none")
            )
            log(f"the job: {args.rows} rows, {plan.describe()}")
            job = backfill(config, target, plan.workers, batch, None, plan.cpus_per_worker)
        finally:
            shutil.rmtree(path, ignore_errors=True)
    finally:
        if started:
            import ray

            ray.shutdown()
    floor = single * plan.workers
    results: dict[str, Any] = {
        "model": job["model"],
        "workers": plan.workers,
        "cpus_per_worker": plan.cpus_per_worker,
        "threads": plan.threads,
        "batch_size": batch,
        "embedder_rows_per_s": round(single, 1),
        "floor_rows_per_s": round(floor, 1),
        "parallel_rows_per_s": round(parallel, 1),
        "job_rows_per_s": job["bulk_rows_per_s"],
        "ratio": ratio(job["bulk_rows_per_s"], floor),
        "target_ratio": 0.7,
        "ratio_vs_parallel": ratio(job["bulk_rows_per_s"], parallel),
        "job_steady_rows_per_s": job["bulk_steady_rows_per_s"],
        "ratio_steady": ratio(job["bulk_steady_rows_per_s"] or 0.0, floor),
        "job_startup_s": job["bulk_startup_s"],
        "embedder_load_s": round(load_s, 2),
        "bulk_seconds": job["bulk_seconds"],
        "job_rows": job["rows"],
        "job_seconds": job["seconds"],
        "job_total_rows_per_s": job["rows_per_s"],
        "load_avg_before": load_before,
    }
    if store_rate is not None:
        results["store_write_rows_per_s"] = round(store_rate, 1)
        results["ratio_vs_store_floor"] = ratio(job["bulk_rows_per_s"], min(floor, store_rate))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reembed", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local:all-MiniLM-L6-v2", help="hash:<dim> | local:<name> | openai:...")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=None, help="pool actors (default: as the job plans it)")
    parser.add_argument("--cpus-per-worker", type=float, default=None)
    parser.add_argument("--batch-size", type=int, default=None, help="default: the job's for the model")
    parser.add_argument("--floor-rows", type=int, default=2000, help="rows each floor process embeds")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: start a local Ray)")
    parser.add_argument("--plot", default=None, help="write a PNG here")
    args = parser.parse_args(argv)
    results = run(args)
    params = {k: getattr(args, k) for k in ("model", "rows", "workers", "cpus_per_worker", "batch_size", "shards")}
    record = emit("reembed", params, results)
    if args.plot:
        bars = {
            f"embedder × {record['workers']} (floor)": record["floor_rows_per_s"],
            f"{record['workers']} embedders at once": record["parallel_rows_per_s"],
            "job (bulk phase)": record["job_rows_per_s"],
            "job, steady": record["job_steady_rows_per_s"] or 0.0,
        }
        plot_bars(
            args.plot,
            f"re-embedding {args.rows:,} rows with {record['model']}: ratio {record['ratio']}",
            list(bars),
            {"rows/s": list(bars.values())},
            "rows / s",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
