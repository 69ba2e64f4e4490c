"""`PersistChain`: debounced, serial persistence of one conversation.

``schedule()`` (re)starts the debounce timer: the write happens ``debounce_s`` after the *last*
schedule. ``flush()`` cancels the timer and writes now. At most one write is in flight per
chain and writes complete in order. A failed write is retried with exponential backoff, forever,
in the background: the messages stay pending in the buffer, never dropped (rows the store
rejects as data never fail a write: they are dead-lettered, see ``memray.store.deadletter``;
what is left to retry is the store being down, and while it restarts it is polled every 0.25 s). ``flush()`` waits
for everything pending at its call to be durable, or raises after ``timeout_s`` (the retries go
on). ``last_durable_seq`` is the highest seq the store has committed.

The chain does not know what it writes: ``write()`` drains the buffer and persists it, returning
the highest seq it made durable (or raising, after re-marking what it drained as pending).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from memray.errors import StoreError, UnavailableError

__all__ = ["PersistChain"]

WriteFn = Callable[[], Awaitable[int]]

#: Longest wait between retries while the store is unavailable (restarting), not failing.
UNAVAILABLE_BACKOFF_MAX_S = 0.25


class PersistChain:
    __slots__ = (
        "_write",
        "_debounce_s",
        "_backoff_s",
        "_backoff_max_s",
        "_deadline",
        "_timer",
        "_task",
        "_requested",
        "_done",
        "_changed",
        "last_durable_seq",
        "failures",
        "last_error",
        "_stopped",
    )

    def __init__(
        self, write: WriteFn, debounce_s: float = 0.2, backoff_s: float = 0.05, backoff_max_s: float = 5.0
    ) -> None:
        self._write = write
        self._debounce_s = debounce_s
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._requested = 0  # generation of the newest schedule()
        self._done = 0  # newest generation known durable
        self._changed: asyncio.Event | None = None
        self.last_durable_seq = 0
        self.failures = 0
        self.last_error: BaseException | None = None
        self._stopped = False

    @property
    def idle(self) -> bool:
        """Nothing pending, nothing in flight."""
        return self._done >= self._requested and self._task is None

    def schedule(self) -> None:
        """Note new pending work; write it ``debounce_s`` after the last call."""
        self._requested += 1
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self._debounce_s
        if self._timer is None and self._task is None and not self._stopped:
            self._timer = loop.call_at(self._deadline, self._on_timer)

    def now(self) -> None:
        """Write what is pending now instead of after the debounce (backpressure: callers wait)."""
        if self._done < self._requested and not self._stopped:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._start()

    def _on_timer(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        if loop.time() < self._deadline:  # rescheduled since: sleep the rest (cheaper than re-arming)
            self._timer = loop.call_at(self._deadline, self._on_timer)
        else:
            self._start()

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        delay = self._backoff_s
        try:
            while self._done < self._requested:
                target = self._requested
                try:
                    seq = await self._write()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # retried: the messages stay pending in the buffer
                    self.failures += 1
                    self.last_error = exc
                    await asyncio.sleep(delay)
                    # an actor restarting answers at once that it is down: poll it often, so a
                    # store back after 3 s is written to at once, not after a 5 s backoff
                    cap = (
                        min(self._backoff_max_s, UNAVAILABLE_BACKOFF_MAX_S)
                        if isinstance(exc, UnavailableError)
                        else self._backoff_max_s
                    )
                    delay = min(delay * 2, cap)
                    continue
                delay = self._backoff_s
                self.last_error = None
                self.last_durable_seq = max(self.last_durable_seq, seq)
                self._done = target
                self._notify()
        finally:
            self._task = None
            self._notify()
            if self._done < self._requested and self._timer is None and not self._stopped:  # scheduled while finishing
                self._timer = asyncio.get_running_loop().call_at(self._deadline, self._on_timer)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def flush(self, timeout_s: float | None = None) -> int:
        """Write now; return once everything scheduled before this call is durable."""
        target = self._requested
        if self._done >= target:
            return self.last_durable_seq
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._start()
        try:
            async with asyncio.timeout(timeout_s):
                while self._done < target:
                    if self._changed is None:
                        self._changed = asyncio.Event()
                    await self._changed.wait()
                    if self._task is None and self._done < target:
                        self._start()
        except TimeoutError:
            raise StoreError(
                f"flush timed out after {timeout_s}s ({self.failures} failed writes, last: {self.last_error!r}); "
                "the messages stay pending and are retried in the background"
            ) from self.last_error
        return self.last_durable_seq

    async def close(self, timeout_s: float | None = None) -> None:
        """Flush, then stop the timer."""
        await self.flush(timeout_s)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def stop(self) -> None:
        """Give up: cancel the timer and any write or retry in progress, and schedule nothing
        more (a host that closes with the store unreachable; what is pending stays unwritten
        and is reported by the close)."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
