"""`Admission`: a host takes writes only as fast as they become durable (backpressure).

Acknowledging an ``add`` is a buffer append; persisting it is a store transaction. Without a
bound, a burst is acknowledged far faster than it persists and the acknowledged-but-not-durable
backlog (what a host crash loses, and the durable lag) grows without limit. ``Admission`` bounds
that backlog per host at ``MemoryConfig.max_unpersisted`` messages:

- a call that fits (backlog + its messages ≤ bound, or the backlog is empty) goes through at once;
- otherwise a blocking call (``block=True``, the default) joins a FIFO queue and waits until the
  commits make room (``released()``), at most ``timeout_s``, then raises :class:`Backpressure`;
  when a queue forms, pending writes skip their debounce (``hurry``; the host does the same for
  the writes it admits while anyone waits), because waiting out a debounce only lengthens the wait;
- a non-blocking call (``block=False``) raises :class:`Backpressure` at once, writing nothing.

The queue is strict FIFO (a small call never overtakes a large one), so the calls of one
conversation are admitted, and given their seqs, in the order they arrived. Admitted calls hold a
reservation until their messages are acknowledged (counted by ``pending``), so waking several
waiters never overshoots the bound.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from memray.errors import Backpressure, ClosedError

__all__ = ["Admission"]


class Admission:
    def __init__(
        self, host_id: int, bound: int, pending: Callable[[], int], hurry: Callable[[], None], timeout_s: float
    ) -> None:
        self.host_id = host_id
        self.bound = bound  # 0: no bound
        self._pending = pending
        self._hurry = hurry
        self.timeout_s = timeout_s
        self._reserved = 0
        self._queue: deque[tuple[int, asyncio.Future[None]]] = deque()
        self.closed = False  # the host closed: no call is admitted any more (ClosedError)
        self.waits = 0  # calls that had to wait
        self.refused = 0  # calls refused (block=False, or a wait that timed out)

    def _fits(self, n: int) -> bool:
        held = self._pending() + self._reserved
        return held == 0 or held + n <= self.bound

    @asynccontextmanager
    async def admit(self, n: int, block: bool) -> AsyncIterator[None]:
        """Hold a place for ``n`` messages while the body acknowledges them (see the module
        docstring); raises :class:`Backpressure` when there is no room (``block=False``) or none
        came within ``timeout_s``."""
        if self.closed:
            raise ClosedError("this memray host is closed; open memray again")
        if self.bound <= 0 or n == 0:
            yield
            return
        if not self._queue and self._fits(n):
            self._reserved += n
        elif not block:
            self.refused += 1
            raise Backpressure(self.host_id, self._pending(), self.bound)
        else:
            await self._wait(n)
            if self.closed:  # closed while this call waited: its messages would never be written
                self._reserved -= n
                self.released()
                raise ClosedError("this memray host closed while the call waited for room; open memray again")
        try:
            yield
        finally:
            self._reserved -= n
            self.released()

    async def _wait(self, n: int) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._queue:
            self._hurry()
        self._queue.append((n, fut))
        self.waits += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                await asyncio.shield(fut)
        except TimeoutError:
            if fut.done():  # admitted just as the time ran out: take it
                return
            self._queue.remove((n, fut))
            fut.cancel()
            self.refused += 1
            self.released()  # the next in line may fit now
            raise Backpressure(self.host_id, self._pending(), self.bound, self.timeout_s) from None
        except BaseException:
            if (n, fut) in self._queue:
                self._queue.remove((n, fut))
            elif fut.done() and not fut.cancelled():
                self._reserved -= n  # admitted, then cancelled before the body ran
            fut.cancel()
            self.released()
            raise

    def released(self) -> None:
        """Commits (or an admitted call) freed room: admit the waiters at the head that fit now."""
        while self._queue and self._fits(self._queue[0][0]):
            n, fut = self._queue.popleft()
            self._reserved += n
            fut.set_result(None)

    @property
    def waiting(self) -> int:
        return len(self._queue)
