"""`EmbeddingPipeline`: write first, then embed.

Items reach the pipeline only after the store has committed them. The pipeline embeds them in
batches off the event loop, stores the vectors (the store is the truth indexes are rebuilt
from), then upserts them into the vector shards. If embedding fails the items are still indexed
lexically, marked failed in the store, and retried with backoff; the backfill job fills any gap
left by a crash. A failure here never loses or blocks a message.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from memray.metrics import EMBEDDING_FAILURES
from memray.runtime.ref import ActorRef
from memray.store.rows import EmbeddingRow, Namespace

if TYPE_CHECKING:
    from memray.embedding.base import Embedder
    from memray.index.router import ShardRouter

__all__ = ["EmbeddingPipeline", "PendingItem"]

log = logging.getLogger(__name__)


class PendingItem(NamedTuple):
    namespace: Namespace
    doc_id: str
    text: str
    recency: float
    payload: str = ""  # the item as JSON, kept by the shard so hits need no store read


class EmbeddingPipeline:
    def __init__(
        self, embedder: Embedder | None, store: ActorRef, router: ShardRouter,
        batch_size: int = 512, backoff_s: float = 0.5, backoff_max_s: float = 30.0,
    ) -> None:
        self._embedder = embedder
        self._store = store
        self._router = router
        self._batch_size = batch_size
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._queue: list[PendingItem] = []
        self._retry: list[PendingItem] = []
        self._task: asyncio.Task[None] | None = None
        self._retry_task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.embedded = 0
        self.failures = 0
        self.last_error: str | None = None

    @property
    def model_id(self) -> str:
        return self._embedder.model_id if self._embedder is not None else "none"

    def submit(self, items: list[PendingItem]) -> None:
        if not items:
            return
        self._queue.extend(items)
        self._idle.clear()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def forget(self, predicate: Callable[[Namespace], bool]) -> None:
        """Drop queued work for namespaces being deleted."""
        self._queue = [i for i in self._queue if not predicate(i.namespace)]
        self._retry = [i for i in self._retry if not predicate(i.namespace)]

    async def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until nothing is queued (failed items waiting for a retry do not count)."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
            return True
        except TimeoutError:
            return False

    async def _run(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[: self._batch_size], self._queue[self._batch_size :]
                await self._process(batch)
        finally:
            self._task = None
            if not self._queue:
                self._idle.set()

    async def _process(self, batch: list[PendingItem]) -> None:
        vectors = await self._embed(batch)
        if vectors is not None:
            try:
                rows = [EmbeddingRow(i.namespace, i.doc_id, self.model_id, v) for i, v in zip(batch, vectors)]
                await self._store.call("put_embeddings", rows)
            except Exception as exc:  # the store is down: retry the whole item later
                self._fail(batch, f"storing vectors failed: {exc!r}")
                return
        await self._upsert(batch, vectors)

    async def _embed(self, batch: list[PendingItem]) -> np.ndarray | None:
        if self._embedder is None:
            return None
        try:
            vectors = await asyncio.to_thread(self._embedder.embed, [i.text for i in batch])
        except Exception as exc:
            EMBEDDING_FAILURES.inc(len(batch))
            self._fail(batch, f"embedding failed: {exc!r}")
            try:
                await self._store.call("mark_embedding_failed", [(i.namespace, i.doc_id) for i in batch], repr(exc))
            except Exception:
                log.warning("could not mark %d items as failed to embed", len(batch))
            return None
        self.embedded += len(batch)
        return vectors

    async def _upsert(self, batch: list[PendingItem], vectors: np.ndarray | None) -> None:
        from memray.index.base import IndexItem

        items = [
            IndexItem(i.namespace, i.doc_id, None if vectors is None else vectors[n], i.text, i.recency, i.payload)
            for n, i in enumerate(batch)
        ]
        try:
            await self._router.upsert(items, self.model_id)
        except Exception as exc:  # a shard is down: it rebuilds these from the store when it is back
            log.warning("indexing %d items failed (%r); the shard recovers them from the store", len(items), exc)

    def _fail(self, batch: list[PendingItem], reason: str) -> None:
        self.failures += 1
        self.last_error = reason
        log.warning("%s (%d items); retrying with backoff", reason, len(batch))
        self._retry.extend(batch)
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

    async def sweep(self, limit: int = 10_000) -> int:
        """Queue durable items that have no vector of the current model (after a crash)."""
        if self._embedder is None:
            return 0
        rows = await self._store.call("pending_embeddings", self.model_id, limit)
        self.submit([PendingItem(ns, doc_id, text, 0.0) for ns, doc_id, text in rows])
        return len(rows)

    async def close(self) -> None:
        for task in (self._task, self._retry_task):
            if task is not None:
                task.cancel()
