"""Bring every conversation's summary up to date, in parallel.

    python -m jobs.backfill_summaries DATA [--workers N] [--force] [--address ADDR]

Exports the store (incrementally), lists every conversation and its last ``seq`` from the export
with DuckDB, then runs :meth:`memray.conversation.summary.SummaryKeeper.maybe_update` for each on
a Ray Data actor pool (each actor builds the configured summariser once). Without ``--force`` a
conversation is folded when its unsummarised history is over ``trigger_tokens`` (as online);
with ``--force`` everything older than the last ``keep_messages`` messages is folded.

Idempotent and resumable: each summary is written by compare-and-set together with the ``seq``
it covers, so that ``summarized_through_seq`` *is* the durable progress record — a rerun (or a
retried batch) finds the conversations already done at one store read each and folds nothing.
Ends with one JSON line: conversations, updated, unchanged, failed, seconds, workers.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import time
from typing import Any

import duckdb
import numpy as np

from memray.cli_args import DefaultsHelpFormatter
from memray.config import MemoryConfig, SummarizerConfig
from memray.conversation.summarizer import build_summarizer
from memray.conversation.summary import SummaryKeeper
from memray.ids import ConversationKey
from memray.jobs.common import add_common_args, config_from_args, connect, emit, log, pool_args
from memray.jobs.resources import free_resources, plan_pool
from memray.progress import bar
from memray.store.layout import export_roots

__all__ = ["SummarizeBatches", "conversation_keys", "run", "main"]


class SummarizeBatches:
    """A Ray Data pool actor: updates the summaries of a batch of conversations."""

    def __init__(self, summarizer_json: str, store_names: list[str], namespace: str, force: bool) -> None:
        # memray.jobs imports without Ray (tests/test_layers.py): ray when a job runs
        from memray.runtime.actors import partitions

        config = SummarizerConfig.model_validate_json(summarizer_json)
        summarizer = build_summarizer(config)
        assert summarizer is not None
        self.keeper = SummaryKeeper(partitions(store_names, namespace), summarizer, config)
        self.force = force

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return asyncio.run(self._run(batch))

    async def _run(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        keys = [
            ConversationKey.of(str(a), str(u), str(c))
            for a, u, c in zip(batch["app"], batch["user_id"], batch["conversation_id"])
        ]
        results = await asyncio.gather(
            *(self.keeper.maybe_update(k, int(s), force=self.force) for k, s in zip(keys, batch["last_seq"])),
            return_exceptions=True,
        )
        status = [
            "failed" if isinstance(r, BaseException) else "unchanged" if r is None else "updated" for r in results
        ]
        return {"status": np.array(status, dtype=object)}


def conversation_keys(config: MemoryConfig) -> list[dict[str, Any]]:
    """(app, user_id, conversation_id, last_seq) of every exported conversation (every history
    partition's export root), via DuckDB."""
    patterns = [os.path.join(root, "messages", "*", "*", "*.parquet") for root in export_roots(config)]
    pattern = [p for p in patterns if glob.glob(p)]
    if not pattern:
        return []
    con = duckdb.connect()
    try:
        rows = con.execute(
            "SELECT app, user_id, conversation_id, max(seq) FROM read_parquet(?, hive_partitioning = true) "
            "GROUP BY ALL ORDER BY ALL",
            [pattern],
        ).fetchall()
    finally:
        con.close()
    return [{"app": a, "user_id": u, "conversation_id": c, "last_seq": int(s)} for a, u, c, s in rows]


def run(
    config: MemoryConfig,
    workers: int | None = None,
    force: bool = False,
    batch_size: int = 64,
    cpus_per_worker: float | None = None,
) -> dict[str, Any]:
    import ray.data  # 580 ms (python -X importtime), and memray.jobs imports without Ray

    t0 = time.monotonic()
    mem, owned = connect(config)
    counts = {"updated": 0, "unchanged": 0, "failed": 0}
    try:
        # the conversations come from this process (from_items): no read tasks to leave room for
        plan = plan_pool(*free_resources(), workers, cpus_per_worker, read_cpus=0.0)
        workers = plan.workers
        mem.flush()
        manifest = mem.export()
        keys = conversation_keys(mem.config)
        log(f"export watermark {manifest['watermark']}: {len(keys)} conversations (workers={workers}, force={force})")
        if keys:
            ds = ray.data.from_items(keys).map_batches(
                SummarizeBatches,
                batch_size=batch_size,
                batch_format="numpy",
                num_cpus=plan.cpus_per_worker,
                **pool_args(workers, mem.config.verbose),
                fn_constructor_kwargs={
                    "summarizer_json": mem.config.summarizer.model_dump_json(),
                    "store_names": mem.internals.deployment.store_names(),
                    "namespace": mem.config.namespace,
                    "force": force,
                },
            )
            with bar(len(keys), "summaries", unit="conv") as shown:
                for out in ds.iter_batches(batch_size=None, batch_format="numpy"):
                    for status in out["status"]:
                        counts[str(status)] += 1
                    shown.update(len(out["status"]))
                    shown.set_postfix_str(f"updated {counts['updated']}, failed {counts['failed']}", refresh=False)
                    if shown.disable:  # no terminal: a line per batch instead of the bar
                        log(f"{sum(counts.values())}/{len(keys)} conversations: {counts}")
    finally:
        mem.close(terminate=owned)
    seconds = time.monotonic() - t0
    return {
        "job": "backfill_summaries",
        "conversations": len(keys),
        **counts,
        "seconds": round(seconds, 3),
        "conversations_per_s": round(len(keys) / seconds, 1) if seconds else 0.0,
        "workers": workers,
        "force": force,
    }


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(
        prog="python -m jobs.backfill_summaries",
        description=__doc__.splitlines()[0],
        formatter_class=DefaultsHelpFormatter,
    )
    add_common_args(parser)
    parser.add_argument(
        "--force", action="store_true", help="fold everything older than keep_messages, whatever the trigger"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="conversations per map_batches call")
    return parser


def run_args(args: argparse.Namespace) -> int:
    result = run(config_from_args(args), args.workers, args.force, args.batch_size, args.cpus_per_worker)
    emit(result)
    return 1 if result["failed"] else 0


def main(argv: list[str] | None = None) -> int:
    return run_args(build_parser().parse_args(argv))
