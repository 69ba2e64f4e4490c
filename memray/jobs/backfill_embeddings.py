"""Re-embed every message and entry with a model, build its indexes and cut over atomically.

    python -m jobs.backfill_embeddings DATA --model static | minilm | hash:384 | openai:<model>[:dim] | local:<name>
        [--workers N] [--cpus-per-worker C] [--timeout S] [--since WATERMARK] [--batch-size N]
        [--base-url URL] [--address ADDR]

Steps (each safe to repeat, so a killed or interrupted job is simply run again):

0. **Plan** the actor pool from the CPUs (and GPUs) the cluster has free, before anything starts:
   a pool that would leave Ray Data's read tasks no slot is refused with what would fit
   (:mod:`memray.jobs.resources`).
1. **Export** the store to Parquet, incrementally (``Memory.export``).
2. **Bulk pass** (:mod:`memray.jobs.bulk`): Ray Data reads the export, an actor pool embeds, one writer
   per store partition upserts the vectors by ``(namespace, doc_id, model_id)`` — the three
   overlap. Progress — the export files finished, and the watermark below which everything is
   done — is saved atomically in ``<root>/jobs/backfill-embeddings-<id>.json``; a line with
   rows, rows/s and ETA goes to stderr every ``--progress-every`` seconds.
3. **Stage**: every shard opens a staged index set for the new model next to the active one and
   loads the new vectors from the store; searches keep answering from the active model.
4. **Catch up** on writes that arrived meanwhile (``store.pending_embeddings``), **switch** the
   hosts' embedding pipelines to the new model (their new writes go to the staged indexes),
   catch up again, **cut over** every shard (one call each: a search sees the old set or the new
   one, never both), **record** the model in ``<root>/model.json`` (the facade's query embedder,
   restarted hosts and shards and the next ``memray.open`` follow it), catch up a last time and
   free the old indexes.

Ctrl-C or ``--timeout`` (:mod:`memray.jobs.control`) stops the bulk pass or the staging after the
batches in flight, saves the progress and exits 130 / 124; step 4 is never cut in half (a
signal during it is honoured once it is done). Store calls: ``put_embeddings``,
``missing_embeddings`` (resumed runs), ``pending_embeddings``, ``fetch_messages``,
``get_entries``, ``scan_index_rows``, and the export.

Ends with one JSON line: status, rows, rows_per_s, seconds, model, workers (and the phases' counts).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import numpy as np

from memray.cli_args import DefaultsHelpFormatter
from memray.config import EmbedderConfig, MemoryConfig
from memray.embedding import build_embedder
from memray.embedding.active import read_active_model, write_active_model
from memray.errors import ValidationError
from memray.ids import Namespace, stable_hash
from memray.index.base import IndexItem
from memray.index.columns import columns_of
from memray.index.router import ShardRouter
from memray.jobs.bulk import EmbedBatches, bulk_pass, export_files
from memray.jobs.common import ProgressFile, add_common_args, config_from_args, connect, emit, fail_point, log
from memray.jobs.control import EXIT_CODES, Meter, Stop
from memray.jobs.resources import PoolPlan, free_resources, plan_pool
from memray.store.partitions import StorePartitions
from memray.store.rows import EmbeddingRow, RowList, row_to_message

__all__ = ["parse_model", "run", "main", "EmbedBatches"]

#: Rows per pool call, by embedder kind: a local model's batch takes seconds on a CPU (and a
#: stop waits for the batches in flight); the static and hash embedders' take milliseconds.
BATCH_SIZES = {"local": 256, "minilm": 64, "static": 4096, "hash": 2048, "openai": 1024}
_PAGE = 2048
_STAGE_PAGE = 20_000  # each scan_index_rows page re-sorts the shard's rows: few, large pages


def parse_model(spec: str, base_url: str | None = None, batch_size: int = 256) -> EmbedderConfig:
    """``static[:<model>]`` | ``minilm`` | ``hash:<dim>`` | ``openai:<model>[:<dim>]`` |
    ``local:<name>`` → an EmbedderConfig."""
    kind, _, rest = spec.partition(":")
    try:
        if kind == "static":
            return EmbedderConfig(kind="static", model=rest or None)
        if kind == "minilm" and not rest:
            return EmbedderConfig(kind="minilm", batch_size=min(batch_size, 64))
        if kind == "hash":
            return EmbedderConfig(kind="hash", dim=int(rest or 256), batch_size=min(batch_size, 2048))
        if kind == "openai" and rest:
            model, _, dim = rest.rpartition(":") if rest.rsplit(":", 1)[-1].isdigit() else (rest, "", "")
            extra: dict[str, Any] = {"dim": int(dim), "send_dimensions": True} if dim else {}
            return EmbedderConfig(kind="openai", model=model, base_url=base_url, **extra)
        if kind == "local" and rest:
            return EmbedderConfig(kind="local", model=rest)
    except ValueError as exc:
        raise ValidationError(
            "model", spec, str(exc).splitlines()[0], "e.g. hash:384, openai:text-embedding-3-small:512"
        ) from exc
    raise ValidationError(
        "model", spec, "unknown model spec", "use static, minilm, hash:<dim>, openai:<model>[:<dim>] or local:<name>"
    )


async def _index_items(
    store: StorePartitions, model_id: str, pending: list[tuple[Namespace, str, str]], vectors: np.ndarray
) -> list[IndexItem]:
    """Index items for vectors just stored: recency and payload from the store (deleted ones dropped)."""
    by_user: dict[tuple[str, str], list[int]] = {}
    for i, (ns, _, _) in enumerate(pending):
        by_user.setdefault((ns.app, ns.user_id), []).append(i)
    items = []
    for (app, user), idx in by_user.items():
        convs = [i for i in idx if pending[i][0].kind == "conv"]
        rows = await store.fetch_messages(app, user, [(pending[i][0].scope, pending[i][1]) for i in convs])
        found = {(r.conversation_id, r.id): r for r in rows}
        for i in convs:
            ns, doc, text = pending[i]
            r = found.get((ns.scope, doc))
            if r is not None:
                items.append(
                    IndexItem(
                        ns,
                        doc,
                        vectors[i],
                        text,
                        float(r.seq),
                        row_to_message(r).model_dump_json(),
                        columns=columns_of(r.created_at, r.sim_time, r.importance),
                    )
                )
        ents = [i for i in idx if pending[i][0].kind == "entry"]
        if ents:
            erows = {r.id: r for r in await store.get_entries(app, user, [pending[i][1] for i in ents])}
            for i in ents:
                ns, doc, text = pending[i]
                if doc in erows:
                    e = erows[doc]
                    items.append(
                        IndexItem(
                            ns,
                            doc,
                            vectors[i],
                            text,
                            float(e.timestamp),
                            columns=columns_of(e.timestamp, e.sim_time, e.importance),
                        )
                    )
    return items


async def _catch_up(mem: Any, embedder: Any, model_id: str, max_rounds: int = 50) -> int:
    """Embed what has no vector of ``model_id`` yet (writes since the export) and index it: into
    the staged indexes before the cutover, the active ones after. Returns the rows embedded."""
    store, total = mem.internals.deployment.stores, 0
    for _ in range(max_rounds):
        pending = await store.pending_embeddings(model_id, _PAGE)
        if not pending:
            break
        vectors = await asyncio.to_thread(embedder.embed, [p[2] for p in pending])
        await store.put_embeddings(
            RowList(EmbeddingRow(ns, doc, model_id, vectors[i]) for i, (ns, doc, _) in enumerate(pending))
        )
        items = await _index_items(store, model_id, pending, vectors)
        if items:
            await ShardRouter(mem.internals.deployment.shards).upsert(items, model_id)
        total += len(pending)
        if len(pending) < _PAGE:
            break
    return total


async def _stage(mem: Any, model_id: str, dim: int, stop: Stop) -> int:
    """Load the new model's vectors from the store into a staged index set on every shard that
    is not on the model yet. Returns the vectors staged. On a stop request the staged sets are
    dropped (searches never saw them; a rerun stages again)."""
    shards, store, total = mem.internals.deployment.shards, mem.internals.deployment.stores, 0
    for i, shard in enumerate(shards):
        if not await shard.stage_begin(model_id, dim):
            continue  # this shard already cut over (a resumed run)
        async for rows in store.index_pages(i, len(shards), model_id, _STAGE_PAGE):
            if stop.reason is not None:
                await asyncio.gather(*(s.stage_abort() for s in shards))
                return total
            total += await shard.stage_upsert(rows, model_id)
        log(f"shard {i}: staged {model_id}")
        fail_point("stage")
    return total


async def _switch(mem: Any, target: EmbedderConfig, embedder: Any, model_id: str) -> dict[str, int]:
    dep = mem.internals.deployment
    counts = {"catch_up": await _catch_up(mem, embedder, model_id)}
    await asyncio.gather(*(h.set_embedder(target) for h in dep.hosts))
    log("hosts embed new writes with", model_id)
    counts["catch_up"] += await _catch_up(mem, embedder, model_id)
    for i, shard in enumerate(dep.shards):
        if await shard.cutover(model_id):
            log(f"shard {i}: cut over to {model_id}")
        fail_point("cutover")

    record = read_active_model(mem.config.root)
    if record is None or record.embedder != target:
        write_active_model(mem.config.root, target, model_id, embedder.dim)
        log("recorded the active model", model_id)
    counts["final_catch_up"] = await _catch_up(mem, embedder, model_id)
    await asyncio.gather(*(s.retire_release() for s in dep.shards))
    await asyncio.gather(*(s.snapshot() for s in dep.shards))
    return counts


def _plan(target: EmbedderConfig, workers: int | None, cpus_per_worker: float | None) -> PoolPlan:
    """The pool for this cluster, checked before anything starts (see :mod:`memray.jobs.resources`)."""
    free_cpus, free_gpus = free_resources()
    plan = plan_pool(free_cpus, free_gpus, workers, cpus_per_worker, use_gpus=target.kind == "local")
    log(f"pool: {plan.describe()}")
    return plan


def run(
    config: MemoryConfig,
    target: EmbedderConfig,
    workers: int | None = None,
    batch_size: int | None = None,
    since: int | None = None,
    cpus_per_worker: float | None = None,
    timeout_s: float | None = None,
    progress_s: float = 5.0,
) -> dict[str, Any]:
    """Run (or resume) the backfill of ``target`` over the memray at ``config``; returns the
    result record (also the JSON line of :func:`main`). ``status`` is ``"done"``, or
    ``"interrupted"`` / ``"timed_out"`` when Ctrl-C or ``timeout_s`` stopped it early: the
    progress is saved and the same call resumes it."""
    # memray.jobs imports without Ray (tests/test_layers.py): ray when a job runs
    from memray.runtime.actors import ensure_ray

    t0 = time.monotonic()
    stop = Stop(timeout_s)
    embedder = build_embedder(target.model_copy(update={"cache_size": 0}))
    if embedder is None:
        raise ValidationError("model", target.kind, "cannot backfill without an embedder", "pick a model")
    model_id = embedder.model_id
    batch_size = batch_size or BATCH_SIZES.get(target.kind, 1024)
    progress = ProgressFile(config.root, f"backfill-embeddings-{stable_hash(model_id):016x}")
    state = progress.load()
    if state is None or state.get("model_id") != model_id:
        state = {"model_id": model_id, "base": 0, "files_done": []}
    if since is not None:
        state["base"] = since
    bulk, staged, bulk_s, plan = 0, 0, 0.0, None
    meters: list[Meter] = []
    counts = {"catch_up": 0, "final_catch_up": 0}
    with stop.signals():
        ensure_ray(config)
        plan = _plan(target, workers, cpus_per_worker)  # before memray starts: a pool that cannot fit says so now
        mem, owned = connect(config)
        try:
            mem.wait_indexed(30.0)
            manifest = mem.export()
            log(
                f"export: {manifest['rows']} changed rows, watermark {manifest['watermark']}; "
                f"resuming above {state['base']}"
            )
            t_bulk = time.monotonic()
            bulk, meters = bulk_pass(
                mem, target, model_id, embedder.dim, state, progress, plan, batch_size, stop, progress_s
            )
            bulk_s = time.monotonic() - t_bulk
            if stop.reason is None:
                _finish_bulk(mem, state, manifest, progress)
                staged = asyncio.run(_stage(mem, model_id, embedder.dim, stop))
            if stop.reason is None:
                with stop.critical():
                    counts = asyncio.run(_switch(mem, target, embedder, model_id))
                state["finished_at"] = time.time()
            progress.save(state)
        finally:
            mem.close(terminate=owned)
    if stop.reason is not None:
        log(stop.message())
    seconds = time.monotonic() - t0
    rows = bulk + counts["catch_up"] + counts["final_catch_up"]
    return {
        "job": "backfill_embeddings",
        "status": "done" if "finished_at" in state else stop.reason,
        "model": model_id,
        "workers": plan.workers if plan else workers,
        "cpus_per_worker": plan.cpus_per_worker if plan else cpus_per_worker,
        "batch_size": batch_size,
        "rows": rows,
        "rows_per_s": round(rows / seconds, 1) if seconds else 0.0,
        "seconds": round(seconds, 3),
        "bulk_rows": bulk,
        "bulk_seconds": round(bulk_s, 3),
        "bulk_rows_per_s": round(bulk / bulk_s, 1) if bulk_s and bulk else 0.0,
        # the first table's pipeline: until its first batch was written, then the rate after
        "bulk_startup_s": _rounded(meters[0].startup_s() if meters else None, 3),
        "bulk_steady_rows_per_s": _rounded(meters[0].steady_rate() if meters else None, 1),
        "staged_vectors": staged,
        **counts,
        "watermark": state["base"],
    }


def _rounded(x: float | None, digits: int) -> float | None:
    return None if x is None else round(x, digits)


def _finish_bulk(mem: Any, state: dict[str, Any], manifest: dict[str, Any], progress: ProgressFile) -> None:
    """Every row of the current export files is done: later runs read only files that a later
    export rebuilt (and, in them, rows changed above the new base)."""
    files = {f for fs in export_files(mem.config).values() for f in fs}
    state.update(
        base=max(int(state["base"]), int(manifest["watermark"])),
        files_done=sorted(files & set(state["files_done"])),
        written=0,
    )
    progress.save(state)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(
        prog="python -m jobs.backfill_embeddings",
        description=__doc__.splitlines()[0],
        formatter_class=DefaultsHelpFormatter,
    )
    add_common_args(parser)
    parser.add_argument("--model", required=True, help="hash:<dim> | openai:<model>[:<dim>] | local:<name>")
    parser.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible endpoint for openai: models (default: OPENAI_BASE_URL, else OpenAI's)",
    )
    parser.add_argument(
        "--since",
        type=int,
        default=None,
        help="treat rows changed at or below this watermark as done (default: resume from the saved progress)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="rows per pool call (default: 256 for local: models, 1024 for openai:, 2048 for hash:)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="stop after this many seconds, progress saved, exit status 124 (default: no limit)",
    )
    parser.add_argument("--progress-every", type=float, default=5.0, help="seconds between progress lines")
    return parser


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    args = (parser or build_parser()).parse_args(argv)
    return run_args(args)


def run_args(args: argparse.Namespace) -> int:
    target = parse_model(args.model, args.base_url)
    result = run(
        config_from_args(args),
        target,
        args.workers,
        args.batch_size,
        args.since,
        args.cpus_per_worker,
        args.timeout,
        args.progress_every,
    )
    emit(result)
    return EXIT_CODES.get(result["status"], 0)
