"""`EmbeddingPipeline`: write first, then embed.

Items reach the pipeline only after the store has committed them. The pipeline embeds them in
batches off the event loop, then stores the vectors (the store is the truth indexes are rebuilt
from; a recomputable model's are not stored, only the items marked embedded, and shards recompute
them from the text) and upserts them into the vector shards, both at once. If embedding fails the items are
still indexed lexically, marked failed in the store, and retried with backoff; if it is slow (past
``lexical_after_s``) they are indexed lexically while it runs, so a hanging endpoint does not keep
durable messages out of search. If the store or a shard refuses the batch (down, restarting) the
batch is retried with backoff too, until both hold it: ``wait_idle(retries=True)`` returns only
then. The backfill job fills any gap left by a crash. A failure here never loses or blocks a
message.

Every shard upsert carries a **stamp** (increasing, starting from the wall clock in nanoseconds,
so a restarted host's stamps follow its predecessor's), and ``on_indexed(items, stamp)`` is told
of every upsert the shards confirmed: the conversation host keeps its read-your-writes tails with
it (:mod:`memray.conversation.read_your_writes`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

import numpy as np

from memray.embedding.base import Embedder
from memray.ids import Namespace
from memray.index.base import IndexItem
from memray.index.router import ShardRouter
from memray.metrics import EMBEDDING_FAILURES
from memray.store.partitions import StorePartitions
from memray.store.rows import EmbeddingRow, RowList

__all__ = ["EmbeddingPipeline", "PendingItem"]

log = logging.getLogger(__name__)


class PendingItem(NamedTuple):
    namespace: Namespace
    doc_id: str
    text: str
    recency: float
    payload: str = ""  # the item as JSON, kept by the shard so hits need no store read
    columns: tuple[float, float, float] | None = None  # (created_at, sim_time, importance); None: unknown


class EmbeddingPipeline:
    def __init__(
        self,
        embedder: Embedder | None,
        store: StorePartitions,
        router: ShardRouter,
        batch_size: int = 512,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        lexical_after_s: float = 0.5,
    ) -> None:
        self._embedder = embedder
        self._store = store
        self._router = router
        self._batch_size = batch_size
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._lexical_after_s = lexical_after_s
        self._queue: list[PendingItem] = []
        self._retry: list[PendingItem] = []
        self._busy: list[PendingItem] = []  # the batch being embedded and indexed now
        self._task: asyncio.Task[None] | None = None
        self._retry_task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.embedded = 0
        self.failures = 0
        self.last_error: str | None = None
        self._stamp = time.time_ns()
        #: Told of every upsert the shards confirmed: ``on_indexed(items, stamp)``.
        self.on_indexed: Callable[[list[PendingItem], int], None] | None = None

    @property
    def model_id(self) -> str:
        return self._embedder.model_id if self._embedder is not None else "none"

    def set_embedder(self, embedder: Embedder | None) -> None:
        """Embed from now on with ``embedder`` (a re-embedding cutover). A batch already being
        embedded finishes with, and is labelled by, the embedder it started with."""
        self._embedder = embedder

    def submit(self, items: list[PendingItem]) -> None:
        if not items:
            return
        if self._retry:  # a newer version of an item supersedes its failed older one
            newer = {(i.namespace, i.doc_id) for i in items}
            self._retry = [i for i in self._retry if (i.namespace, i.doc_id) not in newer]
        self._queue.extend(items)
        self._idle.clear()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def forget(self, predicate: Callable[[Namespace], bool]) -> int:
        """Drop queued work (and failed items awaiting a retry) for namespaces being deleted.
        Returns how many items were dropped. A batch already being embedded is not stopped:
        ``wait_idle`` after ``forget`` to let it land before deleting what it writes."""
        return self._drop(lambda item: predicate(item.namespace))

    def forget_items(self, refs: Collection[tuple[Namespace, str]]) -> int:
        """Drop queued and retry work for these (namespace, doc_id) items; returns how many."""
        wanted = {(Namespace(*ns), doc) for ns, doc in refs}
        return self._drop(lambda item: (item.namespace, item.doc_id) in wanted)

    def forget_if(self, gone: Callable[[PendingItem], bool]) -> int:
        """Drop queued and retry work for the items ``gone`` selects; returns how many."""
        return self._drop(gone)

    def unconfirmed(self) -> list[tuple[Namespace, str]]:
        """Every item submitted and not yet confirmed indexed: queued, being processed, or
        awaiting a retry (what a fork must re-read: :mod:`memray.runtime.fork`)."""
        return list(dict.fromkeys((i.namespace, i.doc_id) for i in (*self._busy, *self._queue, *self._retry)))

    def count_if(self, predicate: Callable[[PendingItem], bool]) -> int:
        """Items queued or awaiting a retry that ``predicate`` selects."""
        return sum(1 for i in (*self._queue, *self._retry) if predicate(i))

    def count(self, predicate: Callable[[Namespace], bool]) -> int:
        """Items queued or awaiting a retry whose namespace matches ``predicate``."""
        return sum(1 for i in (*self._queue, *self._retry) if predicate(i.namespace))

    def _drop(self, gone: Callable[[PendingItem], bool]) -> int:
        before = len(self._queue) + len(self._retry)
        self._queue = [i for i in self._queue if not gone(i)]
        self._retry = [i for i in self._retry if not gone(i)]
        return before - len(self._queue) - len(self._retry)

    async def wait_idle(self, timeout_s: float | None = None, retries: bool = False) -> bool:
        """Wait until nothing is queued; with ``retries``, also until no failed item waits for a
        retry (every item submitted so far is embedded and indexed). False on timeout."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
                while retries and self._retry:
                    await asyncio.sleep(0.05)
                    await self._idle.wait()
            return True
        except TimeoutError:
            return False

    async def _run(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[: self._batch_size], self._queue[self._batch_size :]
                self._busy = batch
                await self._process(batch)
                self._busy = []
        finally:
            self._busy = []
            self._task = None
            if not self._queue:
                self._idle.set()

    async def _process(self, batch: list[PendingItem]) -> None:
        embedder = self._embedder  # one model per batch, even if set_embedder runs meanwhile
        model_id = embedder.model_id if embedder is not None else "none"
        vectors = await self._embed(batch, embedder, model_id)
        if vectors is None:
            return
        # The shard and the store take the vectors at once: a message is searchable without
        # waiting behind the store's queue (the store copy is what a rebuilt shard reads). A
        # recomputable model's vectors are not stored, only the items marked embedded: a rebuilt
        # shard recomputes them from the text (memray.index.recompute).
        keep = not getattr(embedder, "recomputable", False)
        rows = RowList(
            EmbeddingRow(i.namespace, i.doc_id, model_id, v if keep else None) for i, v in zip(batch, vectors)
        )
        results: tuple[Any, Any] = await asyncio.gather(
            self._store.put_embeddings(rows), self._upsert(batch, vectors, model_id), return_exceptions=True
        )
        stored, indexed = results
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        if isinstance(stored, Exception):  # the store is down: retried (the shard may hold them already)
            self._fail(batch, f"storing vectors failed: {stored!r}")
        elif indexed is not True:  # a shard is down: retried until it takes them
            self._fail(batch, f"indexing failed: {indexed!r}")
        else:
            self.last_error = None  # embedded, stored and indexed: whatever failed before has recovered

    async def _embed(self, batch: list[PendingItem], embedder: Embedder | None, model_id: str) -> np.ndarray | None:
        """The vectors, or None when there are none to store (no embedder: the texts are indexed
        lexically; a failure: retried). A slow embedder (past ``lexical_after_s``) gets the texts
        indexed lexically while it works; a failed one gets them indexed before the failure is
        recorded (so an error seen in ``stats`` means the items are findable by text)."""
        if embedder is None:
            indexed = await self._upsert(batch, None, model_id)
            if indexed is not True:
                self._fail(batch, f"indexing failed: {indexed!r}")
            return None
        task = asyncio.ensure_future(asyncio.to_thread(embedder.embed, [i.text for i in batch]))
        indexed = False
        if not (await asyncio.wait({task}, timeout=self._lexical_after_s))[0]:
            await self._upsert(batch, None, model_id)
            indexed = True
        try:
            vectors = await task
        except Exception as exc:
            if not indexed:
                await self._upsert(batch, None, model_id)
            EMBEDDING_FAILURES.inc(len(batch))
            self._fail(batch, f"embedding failed: {exc!r}")
            try:
                await self._store.mark_embedding_failed([(i.namespace, i.doc_id) for i in batch], repr(exc))
            except Exception:
                log.warning("could not mark %d items as failed to embed", len(batch))
            return None
        self.embedded += len(batch)
        return vectors

    async def _upsert(self, batch: list[PendingItem], vectors: np.ndarray | None, model_id: str) -> bool | Exception:
        """Upsert ``batch`` into the shards; True once they hold it, else the error (logged)."""
        self._stamp += 1
        stamp = self._stamp
        items = [
            IndexItem(
                i.namespace,
                i.doc_id,
                None if vectors is None else vectors[n],
                i.text,
                i.recency,
                i.payload,
                stamp,
                i.columns,
            )
            for n, i in enumerate(batch)
        ]
        try:
            await self._router.upsert(items, model_id)
        except Exception as exc:  # a shard is down: the batch is retried (and the shard recovers from the store)
            log.warning("indexing %d items failed (%r); retrying", len(items), exc)
            return exc
        if self.on_indexed is not None:
            self.on_indexed(batch, stamp)
        return True

    def _fail(self, batch: list[PendingItem], reason: str) -> None:
        self.failures += 1
        self.last_error = reason
        log.warning("%s (%d items); retrying with backoff", reason, len(batch))
        queued = {(i.namespace, i.doc_id) for i in self._queue}  # a newer version is queued
        self._retry.extend(i for i in batch if (i.namespace, i.doc_id) not in queued)
        if self._retry_task is None:
            self._retry_task = asyncio.get_running_loop().create_task(self._retry_loop())

    async def _retry_loop(self) -> None:
        delay = self._backoff_s
        try:
            while self._retry:
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff_max_s)
                items, self._retry = self._retry, []
                before = self.failures
                self.submit(items)
                await self.wait_idle()
                if self.failures == before:
                    delay = self._backoff_s
        finally:
            self._retry_task = None

    async def close(self) -> None:
        for task in (self._task, self._retry_task):
            if task is not None:
                task.cancel()
