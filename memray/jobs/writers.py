"""One vector writer per history-store partition, running alongside the embedding.

A user's rows live on partition ``user_hash(app, user_id) % len(stores)``
(:func:`memray.store.layout.partition_of`; ``stores`` is the deployment's ``stores.clients``,
in partition order). Each partition has one writer task and a short queue: batches to different
partitions are written in parallel, batches to one partition one after the other
(its store is a single DuckDB writer anyway), and a full queue makes :meth:`write` wait — the
job then stops pulling embedded batches, and Ray Data's backpressure pauses the pool.

The only store call is :meth:`StoreClient.put_embeddings` (an idempotent upsert by
``(namespace, doc_id, model_id)``), so a batch written twice after a resume changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from memray.store.client import StoreClient
from memray.store.layout import partition_of
from memray.store.rows import EmbeddingRow, RowList

__all__ = ["PartitionWriters"]

_Item = tuple[list[EmbeddingRow], "asyncio.Future[int]"]


class PartitionWriters:
    """Writers over ``stores`` (partition i = ``stores[i]``), each with ``depth`` batches queued."""

    def __init__(self, stores: Sequence[StoreClient], depth: int = 2) -> None:
        self.stores = list(stores)
        self.depth = depth
        self.written = [0] * len(self.stores)
        self._queues: list[asyncio.Queue[_Item | None]] = []
        self._tasks: list[asyncio.Task[None]] = []

    def partition_of(self, app: str, user_id: str) -> int:
        return partition_of(app, user_id, len(self.stores))

    async def start(self) -> None:
        self._queues = [asyncio.Queue(self.depth) for _ in self.stores]
        self._tasks = [asyncio.create_task(self._drain(i)) for i in range(len(self.stores))]

    async def write(self, rows: list[EmbeddingRow]) -> asyncio.Future[list[int]]:
        """Queue ``rows`` on their partitions' writers (waiting while a queue is full); the
        future resolves, with the vectors written per part, once every part is committed."""
        parts: dict[int, RowList[EmbeddingRow]] = {}  # (each part pickles as columns: RowList)
        for row in rows:
            parts.setdefault(self.partition_of(row.namespace.app, row.namespace.user_id), RowList()).append(row)
        loop = asyncio.get_running_loop()
        futures = []
        for i, part in sorted(parts.items()):
            future: asyncio.Future[int] = loop.create_future()
            await self._queues[i].put((part, future))
            futures.append(future)
        return asyncio.gather(*futures)

    async def close(self) -> None:
        """Write what is queued, then stop the writers."""
        for queue in self._queues:
            await queue.put(None)
        await asyncio.gather(*self._tasks)

    async def _drain(self, i: int) -> None:
        queue, store = self._queues[i], self.stores[i]
        while (item := await queue.get()) is not None:
            rows, future = item
            try:
                n = await store.put_embeddings(rows)
            except Exception as exc:  # handed to whoever waits on the batch
                future.set_exception(exc)
            else:
                self.written[i] += n
                future.set_result(n)
