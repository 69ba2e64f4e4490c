"""The bulk pass of the re-embedding job: read → embed → write, overlapped.

- **Read**: Ray Data reads the export's Parquet files; each read task reserves
  :data:`memray.jobs.resources.READ_CPUS` (the pool is sized around it, :func:`memray.jobs.resources.plan_pool`).
- **Embed**: an actor pool (:class:`EmbedBatches`) embeds the rows that need it and returns
  them as Arrow: the ids, and the vectors as a ``fixed_size_list<float32>`` column (null for a
  row it skipped: no text, already on the model).
- **Write**: this process takes the embedded batches as they come and hands them to one writer
  per store partition (:class:`memray.jobs.writers.PartitionWriters`), which commits them while the
  pool embeds the next ones. A batch counts as done once every partition committed its part;
  an export file is done once all of its rows are — that is what the progress file records, so
  a rerun skips finished files and, in the others, rows that already have a vector.

The pass polls its :class:`memray.jobs.control.Stop` about every second: on Ctrl-C or a passed
``--timeout`` it stops taking batches, lets the writers commit what is queued, records the
progress and shuts the Ray Data pipeline down (a hung one too).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import queue
import threading
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from memray.config import EmbedderConfig, MemoryConfig
from memray.embedding import build_embedder
from memray.ids import Namespace
from memray.jobs.common import ProgressFile, fail_point, log, pool_args
from memray.jobs.control import Meter, Stop
from memray.jobs.resources import PoolPlan
from memray.jobs.writers import PartitionWriters
from memray.store.layout import export_roots
from memray.store.partitions import StorePartitions
from memray.store.rows import EmbeddingRow

__all__ = ["EmbedBatches", "bulk_pass", "export_files", "TABLES"]

TABLES = ("messages", "entries")
_END = object()
_POLL_S = 1.0
_CLOSE_WAIT_S = 10.0


class EmbedBatches:
    """A Ray Data pool actor: embeds a batch of exported rows, returns their vectors as Arrow.

    Every input row comes back (its ``path`` tells the driver which file it came from); a row
    that needs no vector has a null ``vector``. With ``check_store`` (a resumed run) rows that
    already have a vector of the model in the store are skipped too."""

    def __init__(
        self,
        embedder_json: str,
        table: str,
        model_id: str,
        base: int,
        store_names: list[str] | None = None,
        namespace: str = "",
        threads: int = 0,
    ) -> None:
        config = EmbedderConfig.model_validate_json(embedder_json).model_copy(update={"cache_size": 0})
        if threads and config.kind == "local":  # one worker's share of the CPUs, not all of them
            import torch  # optional dependency: the [local] extra brings it

            torch.set_num_threads(threads)
        embedder = build_embedder(config)
        assert embedder is not None
        self.embedder = embedder
        self.dim = embedder.dim  # a local model loads here, before the first batch
        self.table, self.model_id, self.base = table, model_id, base
        self.store: StorePartitions | None = None
        if store_names:  # a resumed run asks the user's partition what it has
            # memray.jobs imports without Ray (tests/test_layers.py): ray when a job runs
            from memray.runtime.actors import partitions

            self.store = partitions(store_names, namespace)

    def __call__(self, batch: pa.Table) -> pa.Table:
        todo = pc.and_(pc.greater(batch["changed_version"], self.base), pc.not_equal(batch["text"], ""))
        done = pc.and_(
            pc.equal(batch["embed_state"], "done"), pc.equal(pc.fill_null(batch["model_id"], ""), self.model_id)
        )
        scope = batch["conversation_id"] if self.table == "messages" else pc.fill_null(batch["project_id"], "")
        wanted = np.flatnonzero(pc.fill_null(pc.and_(todo, pc.invert(done)), False).to_numpy(zero_copy_only=False))
        if len(wanted) and self.store is not None:  # a resumed run: skip what already has a vector
            kind = "conv" if self.table == "messages" else "entry"
            apps, users, scopes, docs = (
                col.take(pa.array(wanted)).to_pylist() for col in (batch["app"], batch["user_id"], scope, batch["id"])
            )
            refs = [(Namespace(a, u, kind, s), d) for a, u, s, d in zip(apps, users, scopes, docs)]
            keep = asyncio.run(self.store.missing_embeddings(self.model_id, refs))
            wanted = wanted[np.asarray(keep, dtype=np.int64)]
        vectors = np.zeros((batch.num_rows, self.dim), dtype=np.float32)
        if len(wanted):
            vectors[wanted] = self.embedder.embed(batch["text"].take(pa.array(wanted)).to_pylist())
        mask = np.ones(batch.num_rows, dtype=bool)
        mask[wanted] = False
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), self.dim, mask=pa.array(mask))
        return pa.table(
            {
                "path": batch["path"],
                "app": batch["app"],
                "user_id": batch["user_id"],
                "scope": scope,
                "doc_id": batch["id"],
                "vector": column,
            }
        )


def export_files(config: MemoryConfig) -> dict[str, list[str]]:
    """The export's Parquet files per table, over every history partition's export root, in a
    stable order."""
    out: dict[str, list[str]] = {}
    for table in TABLES:
        files: list[str] = []
        for root in export_roots(config):
            for dirpath, dirnames, names in os.walk(os.path.join(root, table)):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                files.extend(os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".parquet"))
        out[table] = files
    return out


def embedding_rows(out: pa.Table, kind: str, model_id: str) -> list[EmbeddingRow]:
    """The rows of a pool output batch that carry a vector, as the store takes them."""
    vector = out["vector"].combine_chunks()
    keep = np.flatnonzero(vector.is_valid().to_numpy(zero_copy_only=False))
    if not len(keep):
        return []
    dim = vector.type.list_size
    flat = vector.values.to_numpy(zero_copy_only=False).reshape(-1, dim)
    cols = (out[c].take(pa.array(keep)).to_pylist() for c in ("app", "user_id", "scope", "doc_id"))
    return [EmbeddingRow(Namespace(a, u, kind, s), d, model_id, flat[i]) for i, a, u, s, d in zip(keep, *cols)]


class _Files:
    """Rows committed per export file; a file is done once all of its rows are."""

    def __init__(self, sizes: dict[str, int], done: set[str]) -> None:
        self.sizes, self.done = sizes, done
        self.seen: Counter[str] = Counter()

    def credit(self, counts: Counter[str]) -> None:
        for path, n in counts.items():
            self.seen[path] += n
            if self.seen[path] >= self.sizes.get(path, 0):
                self.done.add(path)


def _fetch(batches: Iterator[pa.Table], out: queue.Queue[Any], closing: threading.Event) -> None:
    """Move the pipeline's output batches into ``out`` (a daemon thread: ``next`` blocks)."""
    try:
        for batch in batches:
            if closing.is_set():
                break
            out.put(batch)
    except BaseException as exc:  # handed to the driver loop, which raises it unless stopping
        out.put(exc)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()  # shuts Ray Data's executor down (its pool actors go)
        out.put(_END)


class _Stream:
    """One table's pipeline driven to its end or to a stop: batches go to the writers as they
    come, and are credited (``checkpoint(vectors written so far)``) in order once committed."""

    def __init__(
        self, ds: Any, kind: str, model_id: str, files: _Files, meter: Meter, stop: Stop, checkpoint: Any
    ) -> None:
        self.ds, self.kind, self.model_id, self.files = ds, kind, model_id, files
        self.meter, self.stop, self.checkpoint = meter, stop, checkpoint
        self.pending: deque[tuple[asyncio.Future[list[int]], Counter[str]]] = deque()
        self.written = 0

    async def run(self, writers: PartitionWriters) -> int:
        """Returns the vectors committed."""
        out: queue.Queue[Any] = queue.Queue(maxsize=2)
        closing = threading.Event()
        # no prefetch thread of Ray Data's own: the fetch thread is the only one to end at a stop
        # (the pipeline still runs ahead of it, its operators are asynchronous)
        batches = iter(self.ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0))
        thread = threading.Thread(target=_fetch, args=(batches, out, closing), daemon=True, name="backfill-fetch")
        thread.start()
        await writers.start()
        try:
            while self.stop.reason is None:
                try:
                    item = await asyncio.to_thread(out.get, True, _POLL_S)
                except queue.Empty:
                    item = None
                await self.commit(wait=False)
                self.meter.tick()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                if item is not None:
                    rows = embedding_rows(item, self.kind, self.model_id)
                    self.pending.append((await writers.write(rows), Counter(item["path"].to_pylist())))
            await self.commit(wait=True)
        finally:
            closing.set()
            await writers.close()
            await _close(self.ds, thread, out)
        return self.written

    async def commit(self, wait: bool) -> None:
        while self.pending and (wait or self.pending[0][0].done()):
            future, counts = self.pending.popleft()
            self.written += sum(await future)
            self.files.credit(counts)
            self.meter.add(sum(counts.values()))
            self.checkpoint(self.written)


async def _close(ds: Any, thread: threading.Thread, out: queue.Queue[Any]) -> None:
    """End the fetch thread before returning (a thread left running could call into Ray after it
    shut down). It ends by itself at the end of the data; stopped early it may be blocked in
    ``next`` for a whole batch, or forever in a hung pipeline: the executor is shut down first."""
    if thread.is_alive():
        for executor in getattr(ds, "_memray_executors", []):
            with contextlib.suppress(Exception):
                executor.shutdown(force=True)  # kills the pool's actors; a blocked next() raises
    waited = 0.0
    while thread.is_alive() and waited < _CLOSE_WAIT_S:
        with contextlib.suppress(queue.Empty):
            while True:
                out.get_nowait()
        await asyncio.to_thread(thread.join, 0.2)
        waited += 0.2
    if thread.is_alive():
        log(f"Ray Data did not stop within {_CLOSE_WAIT_S:g} s (it is left to Ray's shutdown)")


def bulk_pass(
    mem: Any,
    target: EmbedderConfig,
    model_id: str,
    dim: int,
    state: dict[str, Any],
    progress: ProgressFile,
    plan: PoolPlan,
    batch_size: int,
    stop: Stop,
    progress_s: float = 5.0,
) -> tuple[int, list[Meter]]:
    """Embed every exported row changed after ``state['base']`` that has no vector of
    ``model_id`` yet; returns the vectors written and each table's meter. Returns early when
    ``stop`` asks."""
    done: set[str] = set(state["files_done"])
    resumed = bool(state["base"] or state["files_done"] or state.get("written"))
    total, meters = 0, []
    for table, all_files in export_files(mem.config).items():
        todo = [f for f in all_files if f not in done]
        if not todo or stop.reason is not None:
            continue
        sizes = {f: pq.read_metadata(f).num_rows for f in todo}
        log(f"bulk {table}: {len(todo)} files, {sum(sizes.values()):,} rows")
        ds = _pipeline(mem, target, model_id, dim, table, todo, int(state["base"]), resumed, plan, batch_size)
        meter = Meter(f"embedding {table}", sum(sizes.values()), progress_s)
        meters.append(meter)
        written_before, batches = int(state.get("written", 0)), 0

        def checkpoint(written: int, before: int = written_before) -> None:
            nonlocal batches
            batches += 1
            state.update(files_done=sorted(done), written=before + written)
            progress.save(state)
            fail_point("bulk", batches)

        writers = PartitionWriters(mem.internals.deployment.stores.clients)  # one writer per history partition
        stream = _Stream(ds, table_kind(table), model_id, _Files(sizes, done), meter, stop, checkpoint)
        total += asyncio.run(stream.run(writers))
        meter.tick(force=True)
    return total, meters


def _pipeline(
    mem: Any,
    target: EmbedderConfig,
    model_id: str,
    dim: int,
    table: str,
    files: list[str],
    base: int,
    resumed: bool,
    plan: PoolPlan,
    batch_size: int,
) -> Any:
    """The Ray Data dataset: read ``files`` (tasks of ``plan.read_cpus``) → :class:`EmbedBatches`
    on the planned pool, making vectors of ``dim``.

    The files are read by a task-pool ``map_batches`` over their paths, not ``read_parquet``:
    Ray Data 2.60's ``read_parquet`` starts with a file-listing task that always reserves a whole
    CPU (it takes no resource arguments), which a 2-CPU machine running the pool cannot give."""
    import ray.data  # 580 ms (python -X importtime), and memray.jobs imports without Ray

    scope = "conversation_id" if table == "messages" else "project_id"
    ds = (
        ray.data.from_items([{"path": f} for f in files], override_num_blocks=max(1, min(len(files), 64)))
        .map_batches(
            functools.partial(read_files, columns=[*_READ_COLUMNS, scope]),
            batch_size=None,
            batch_format="pyarrow",
            num_cpus=plan.read_cpus,
        )
        .map_batches(
            EmbedBatches,
            batch_size=batch_size,
            batch_format="pyarrow",
            num_cpus=plan.cpus_per_worker,
            num_gpus=plan.gpus_per_worker,
            **pool_args(plan.workers, mem.config.verbose),
            fn_constructor_kwargs={
                "embedder_json": target.model_dump_json(),
                "table": table,
                "model_id": model_id,
                "base": base,
                "store_names": mem.internals.deployment.store_names() if resumed else [],
                "namespace": mem.config.namespace,
                "threads": plan.threads,
            },
        )
    )
    # A map task's outputs are merged into one block up to this size, and a block travels on
    # only when complete: at half of one batch's vectors, each pool call's output streams to
    # the writers as soon as it is made (Ray Data's 128 MiB default held a whole file's rows).
    ds.context.target_max_block_size = max(64 * 1024, batch_size * dim * 4 // 2)
    _capture_executors(ds)
    return ds


def _capture_executors(ds: Any) -> None:
    """Keep each executor the dataset creates in ``ds._memray_executors``, so a stop can shut
    a pipeline down. Ray Data has no public handle, and its own (``_current_executor``) is set
    only once the first output arrives: a pipeline stopped while its pool starts, or a hung
    one, would have none."""
    create = ds._create_executor
    ds._memray_executors = []

    def capturing() -> Any:
        executor = create()
        ds._memray_executors.append(executor)
        return executor

    ds._create_executor = capturing


_READ_COLUMNS = ["app", "user_id", "id", "text", "changed_version", "embed_state", "model_id"]


def read_files(batch: pa.Table, columns: list[str]) -> pa.Table:
    """A read task: the rows of the Parquet files named in ``batch['path']`` (``columns`` and the
    file's path)."""
    tables = []
    for path in batch["path"].to_pylist():
        t = pq.read_table(path, columns=columns)
        tables.append(t.append_column("path", pa.array([path] * t.num_rows, pa.string())))
    return pa.concat_tables(tables)


def table_kind(table: str) -> str:
    return "conv" if table == "messages" else "entry"
