"""Re-embed every message and entry with a model, build its indexes and cut over atomically.

    python -m jobs.backfill_embeddings --path DATA --model hash:384 | openai:<model>[:dim] | local:<name>
        [--since WATERMARK] [--batch-size N] [--workers N] [--base-url URL] [--address ADDR]

Steps (each safe to repeat, so a killed job is simply run again):

1. **Export** the store to Parquet, incrementally (``Memory.export``).
2. **Bulk pass** with Ray Data: ``read_parquet`` → ``map_batches`` on an actor pool
   (``ActorPoolStrategy(size=workers)``; each actor builds the embedder from its
   ``EmbedderConfig``, one GPU each for a local model when the cluster has GPUs) → vectors
   upserted into the store by ``(namespace, doc_id, model_id)`` (idempotent, so Ray Data's
   retries are harmless). Progress — the export files finished, and the watermark below which
   everything is done — is saved atomically in ``<root>/jobs/backfill-embeddings-<id>.json``.
3. **Stage**: every shard opens a staged index set for the new model next to the active one and
   loads the new vectors from the store; searches keep answering from the active model.
4. **Catch up** on writes that arrived meanwhile (``store.pending_embeddings``), **switch** the
   hosts' embedding pipelines to the new model (their new writes go to the staged indexes),
   catch up again, **cut over** every shard (one call each: a search sees the old set or the new
   one, never both), **record** the model in ``<root>/model.json`` (the facade's query embedder,
   restarted hosts and shards and the next ``memray.open`` follow it), catch up a last time and
   free the old indexes.

Ends with one JSON line: rows, rows_per_s, seconds, model, workers (and the phases' counts).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.common import ProgressFile, add_common_args, config_from_args, connect, emit, fail_point, log, pool_args
from memray.config import EmbedderConfig, MemoryConfig
from memray.errors import ValidationError
from memray.ids import Namespace, stable_hash
from memray.index.base import IndexItem
from memray.index.router import ShardRouter
from memray.progress import bar
from memray.store.layout import export_roots
from memray.store.partitions import StorePartitions
from memray.store.rows import EmbeddingRow

__all__ = ["parse_model", "run", "main", "EmbedBatches"]

_TABLES = ("messages", "entries")
_PAGE = 2048
_STAGE_PAGE = 20_000  # each scan_index_rows page re-sorts the shard's rows: few, large pages


def parse_model(spec: str, base_url: str | None = None, batch_size: int = 256) -> EmbedderConfig:
    """``hash:<dim>`` | ``openai:<model>[:<dim>]`` | ``local:<name>`` → an EmbedderConfig."""
    kind, _, rest = spec.partition(":")
    try:
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
    raise ValidationError("model", spec, "unknown model spec", "use hash:<dim>, openai:<model>[:<dim>] or local:<name>")


class EmbedBatches:
    """A Ray Data pool actor: embeds a batch of exported rows and upserts their vectors.

    Returns, per export file in the batch, the rows seen and embedded: the driver marks a file
    done once all its rows were seen. Writes are upserts, so a retried batch changes nothing."""

    def __init__(
        self,
        embedder_json: str,
        store_names: list[str],
        namespace: str,
        table: str,
        model_id: str,
        base: int,
        check_store: bool = False,
    ) -> None:

        from memray.embedding import build_embedder
        from memray.runtime.actors import partitions

        config = EmbedderConfig.model_validate_json(embedder_json).model_copy(update={"cache_size": 0})
        embedder = build_embedder(config)
        assert embedder is not None
        self.embedder = embedder
        self.store = partitions(store_names, namespace)  # one writer per partition: put_embeddings splits
        self.table, self.model_id, self.base, self.check_store = table, model_id, base, check_store

    def __call__(self, batch: pa.Table) -> dict[str, np.ndarray]:
        return asyncio.run(self._run(batch))

    async def _run(self, batch: pa.Table) -> dict[str, np.ndarray]:
        todo = pc.and_(pc.greater(batch["changed_version"], self.base), pc.not_equal(batch["text"], ""))
        done = pc.and_(
            pc.equal(batch["embed_state"], "done"), pc.equal(pc.fill_null(batch["model_id"], ""), self.model_id)
        )
        rows = batch.filter(pc.and_(todo, pc.invert(done)))
        kind = "conv" if self.table == "messages" else "entry"
        scope = rows["conversation_id"] if self.table == "messages" else pc.fill_null(rows["project_id"], "")
        refs = [
            (Namespace(a, u, kind, s), d)
            for a, u, s, d in zip(
                rows["app"].to_pylist(), rows["user_id"].to_pylist(), scope.to_pylist(), rows["id"].to_pylist()
            )
        ]
        if refs and self.check_store:  # a resumed run: skip what already has a vector of the model
            keep = await self.store.missing_embeddings(self.model_id, refs)
            rows, refs = rows.take(pa.array(keep, pa.int64())), [refs[i] for i in keep]
        if refs:
            vectors = self.embedder.embed(rows["text"].to_pylist())
            out = [EmbeddingRow(ns, d, self.model_id, vectors[i]) for i, (ns, d) in enumerate(refs)]
            await self.store.put_embeddings(out)
        seen = Counter(batch["path"].to_pylist())
        embedded = Counter(rows["path"].to_pylist())
        paths = sorted(seen)
        return {
            "path": np.array(paths, dtype=object),
            "seen": np.array([seen[p] for p in paths]),
            "embedded": np.array([embedded[p] for p in paths]),
        }


def _export_files(config: MemoryConfig) -> dict[str, list[str]]:
    """Every exported Parquet file of each table, over every history partition's export root."""
    out: dict[str, list[str]] = {}
    for table in _TABLES:
        files: list[str] = []
        for root in export_roots(config):
            for dirpath, dirnames, names in os.walk(os.path.join(root, table)):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                files.extend(os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".parquet"))
        out[table] = files
    return out


def _bulk(
    mem: Any,
    target: EmbedderConfig,
    model_id: str,
    state: dict[str, Any],
    progress: ProgressFile,
    workers: int,
    batch_size: int,
    cpus: float,
) -> int:
    """Embed every exported row changed after ``state['base']``; returns the rows embedded."""
    import pyarrow.parquet as pq
    import ray
    import ray.data

    gpus = 1 if target.kind == "local" and ray.cluster_resources().get("GPU", 0) >= 1 else 0  # type: ignore[no-untyped-call]
    store_names = mem._deployment.store_names()
    total = float(ray.cluster_resources().get("CPU", 1.0))  # type: ignore[no-untyped-call]
    if cpus * workers > total - 1:  # the pool must leave a whole CPU: each read task asks for one
        cpus = max(0.1, (total - 1) / workers)
        log(f"{workers} workers x {cpus:.2f} CPUs each, leaving room for the read tasks ({total:g} CPUs in all)")
    done: set[str] = set(state["files_done"])
    embedded, batches = 0, 0
    for table, files in _export_files(mem.config).items():
        todo = [f for f in files if f not in done]
        if not todo:
            continue
        sizes = {f: pq.read_metadata(f).num_rows for f in todo}
        log(f"bulk {table}: {len(todo)} files, {sum(sizes.values())} rows (workers={workers}, gpus/worker={gpus})")
        ds = ray.data.read_parquet(todo, include_paths=True).map_batches(
            EmbedBatches,
            batch_size=batch_size,
            batch_format="pyarrow",
            num_cpus=cpus,
            num_gpus=gpus,
            **pool_args(workers, mem.config.verbose),
            fn_constructor_kwargs={
                "embedder_json": target.model_dump_json(),
                "store_names": store_names,
                "namespace": mem.config.namespace,
                "table": table,
                "model_id": model_id,
                "base": int(state["base"]),
                "check_store": bool(state["base"] or state["files_done"]),
            },
        )
        seen: Counter[str] = Counter()
        with bar(sum(sizes.values()), f"embedding {table}", unit="row") as shown:
            for out in ds.iter_batches(batch_size=None, batch_format="numpy"):
                for path, n, e in zip(out["path"], out["seen"], out["embedded"]):
                    seen[str(path)] += int(n)
                    embedded += int(e)
                    shown.update(int(n))
                    if seen[str(path)] >= sizes[str(path)]:
                        done.add(str(path))
                batches += 1
                state["files_done"] = sorted(done)
                progress.save(state)
                fail_point("bulk", batches)
                if shown.disable:  # no terminal: a line per batch instead of the bar
                    log(
                        f"bulk {table}: {sum(seen.values())}/{sum(sizes.values())} rows read, {embedded} embedded, "
                        f"{len(done)}/{len(todo)} files done"
                    )
    return embedded


async def _index_items(
    store: StorePartitions, model_id: str, pending: list[tuple[Namespace, str, str]], vectors: np.ndarray
) -> list[IndexItem]:
    """Index items for vectors just stored: recency and payload from the store (deleted ones dropped)."""
    from memray.index.columns import columns_of
    from memray.store.rows import row_to_message

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
    store, total = mem._deployment.stores, 0
    for _ in range(max_rounds):
        pending = await store.pending_embeddings(model_id, _PAGE)
        if not pending:
            break
        vectors = await asyncio.to_thread(embedder.embed, [p[2] for p in pending])
        await store.put_embeddings(
            [EmbeddingRow(ns, doc, model_id, vectors[i]) for i, (ns, doc, _) in enumerate(pending)]
        )
        items = await _index_items(store, model_id, pending, vectors)
        if items:
            await ShardRouter(mem._deployment.shards).upsert(items, model_id)
        total += len(pending)
        if len(pending) < _PAGE:
            break
    return total


async def _stage(mem: Any, model_id: str, dim: int) -> int:
    """Load the new model's vectors from the store into a staged index set on every shard that
    is not on the model yet. Returns the vectors staged."""
    shards, store, total = mem._deployment.shards, mem._deployment.stores, 0
    for i, shard in enumerate(shards):
        if not await shard.stage_begin(model_id, dim):
            continue  # this shard already cut over (a resumed run)
        async for rows in store.index_pages(i, len(shards), model_id, _STAGE_PAGE):
            total += await shard.stage_upsert(rows, model_id)
        log(f"shard {i}: staged {model_id}")
        fail_point("stage")
    return total


async def _switch(mem: Any, target: EmbedderConfig, embedder: Any, model_id: str) -> dict[str, int]:
    dep = mem._deployment
    counts = {"catch_up": await _catch_up(mem, embedder, model_id)}
    await asyncio.gather(*(h.set_embedder(target) for h in dep.hosts))
    log("hosts embed new writes with", model_id)
    counts["catch_up"] += await _catch_up(mem, embedder, model_id)
    for i, shard in enumerate(dep.shards):
        if await shard.cutover(model_id):
            log(f"shard {i}: cut over to {model_id}")
        fail_point("cutover")
    from memray.embedding.active import read_active_model, write_active_model

    record = read_active_model(mem.config.root)
    if record is None or record.embedder != target:
        write_active_model(mem.config.root, target, model_id, embedder.dim)
        log("recorded the active model", model_id)
    counts["final_catch_up"] = await _catch_up(mem, embedder, model_id)
    await asyncio.gather(*(s.retire_release() for s in dep.shards))
    await asyncio.gather(*(s.snapshot() for s in dep.shards))
    return counts


def run(
    config: MemoryConfig,
    target: EmbedderConfig,
    workers: int = 2,
    batch_size: int = 1024,
    since: int | None = None,
    cpus_per_worker: float = 1.0,
) -> dict[str, Any]:
    """Run (or resume) the backfill of ``target`` over the memray at ``config``; returns the
    result record (also the JSON line of :func:`main`)."""
    from memray.embedding import build_embedder

    t0 = time.monotonic()
    embedder = build_embedder(target.model_copy(update={"cache_size": 0}))
    if embedder is None:
        raise ValidationError("model", target.kind, "cannot backfill without an embedder", "pick a model")
    model_id = embedder.model_id
    progress = ProgressFile(config.root, f"backfill-embeddings-{stable_hash(model_id):016x}")
    state = progress.load()
    if state is None or state.get("model_id") != model_id:
        state = {"model_id": model_id, "base": 0, "files_done": []}
    if since is not None:
        state["base"] = since
    mem, owned = connect(config)
    try:
        mem.wait_indexed(30.0)
        manifest = mem.export()
        log(
            f"export: {manifest['rows']} changed rows, watermark {manifest['watermark']}; "
            f"resuming above {state['base']}"
        )
        t_bulk = time.monotonic()
        bulk = _bulk(mem, target, model_id, state, progress, workers, batch_size, cpus_per_worker)
        bulk_s = time.monotonic() - t_bulk
        # every row of the current export files is now done: later runs read only files that a
        # later export rebuilt (and, in them, rows changed above the new base)
        files = {f for fs in _export_files(mem.config).values() for f in fs}
        state.update(
            base=max(int(state["base"]), int(manifest["watermark"])),
            files_done=sorted(files & set(state["files_done"])),
        )
        progress.save(state)
        staged = asyncio.run(_stage(mem, model_id, embedder.dim))
        counts = asyncio.run(_switch(mem, target, embedder, model_id))
        state["finished_at"] = time.time()
        progress.save(state)
    finally:
        mem.close(terminate=owned)
    seconds = time.monotonic() - t0
    rows = bulk + counts["catch_up"] + counts["final_catch_up"]
    return {
        "job": "backfill_embeddings",
        "model": model_id,
        "workers": workers,
        "rows": rows,
        "rows_per_s": round(rows / seconds, 1) if seconds else 0.0,
        "seconds": round(seconds, 3),
        "bulk_rows": bulk,
        "bulk_seconds": round(bulk_s, 3),
        "bulk_rows_per_s": round(bulk / bulk_s, 1) if bulk_s and bulk else 0.0,
        "staged_vectors": staged,
        **counts,
        "watermark": state["base"],
    }


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    from memray.cli import DefaultsHelpFormatter

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
    parser.add_argument("--batch-size", type=int, default=1024, help="rows per map_batches call")
    return parser


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    args = (parser or build_parser()).parse_args(argv)
    return run_args(args)


def run_args(args: argparse.Namespace) -> int:
    target = parse_model(args.model, args.base_url)
    result = run(config_from_args(args), target, args.workers, args.batch_size, args.since, args.cpus_per_worker)
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
