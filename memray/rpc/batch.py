"""`Coalescer`: concurrent single requests answered by one batched call.

Thousands of agents calling ``context()`` at once would each make their own store call; the
store is one actor, so they would queue one by one. A coalescer collects the requests made in
the same turn of the event loop (and while a batch is in flight) and answers them with one call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeAlias, TypeVar

__all__ = ["Coalescer", "Answer", "unwrap"]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")

#: What a batched call answers for each of its requests: the answer, or the error that request
#: alone would have raised (the others are answered all the same).
Answer: TypeAlias = T | BaseException


def unwrap(answer: Answer[T]) -> T:
    """One request's answer from a batch: its value, or its error raised."""
    if isinstance(answer, BaseException):
        raise answer
    return answer


class Coalescer(Generic[K, V]):
    def __init__(
        self,
        fetch: Callable[[list[K]], Awaitable[list[V]]],
        max_batch: int = 4096,
        weight: Callable[[K], int] = lambda _: 1,
    ) -> None:
        """``fetch`` answers a list of requests in order; a batch holds requests of at most
        ``max_batch`` total ``weight`` (one each by default), and always at least one."""
        self._fetch = fetch
        self._max_batch = max_batch
        self._weight = weight
        self._pending: list[tuple[K, asyncio.Future[V]]] = []
        self._task: asyncio.Task[None] | None = None

    async def get(self, request: K) -> V:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[V] = loop.create_future()
        self._pending.append((request, fut))
        if self._task is None:
            self._task = loop.create_task(self._run())
        return await fut

    async def _run(self) -> None:
        try:
            while self._pending:
                await asyncio.sleep(0)  # let the callers of this turn join the batch
                n = self._take()
                batch, self._pending = self._pending[:n], self._pending[n:]
                try:
                    results = await self._fetch([request for request, _ in batch])
                except Exception as exc:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                for (_, fut), result in zip(batch, results):
                    if not fut.done():
                        fut.set_result(result)
        finally:
            self._task = None

    def _take(self) -> int:
        """How many of the pending requests the next batch takes."""
        total = 0
        for n, (request, _) in enumerate(self._pending):
            total += self._weight(request)
            if n and total > self._max_batch:
                return n
        return len(self._pending)
