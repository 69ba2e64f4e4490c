"""`PersistWheel` and `PersistChain`: debounced, serial persistence of many conversations, on
one timer per host.

Each conversation has a :class:`PersistChain`, a thin record of its persistence state; the
chains of a host share one :class:`PersistWheel`. The wheel keeps the chains that wait in
buckets by deadline slot (``slot_s``, 20 ms by default) and arms ONE ``loop.call_at`` timer, for
the earliest bucket. When a slot comes due, every chain due in it is written as one batch by ONE
task: ``write_many(owners)`` (the host's drains every due conversation and makes one group
commit per store partition, see :meth:`memray.conversation.write_path.WritePath.write_many`), and
each chain's state — durable seq, failure and retry — is resolved from its own result. Before
the wheel, each conversation's write armed its own timer and ran its own task and coalescer
future: 1,000 agents cost 1,000 of each per tick (docs/design.md, "One persist wheel per host").

What each chain guarantees (as before the wheel):

- ``schedule()`` notes new work and writes it ``debounce_s`` after the *last* schedule,
  rounded up to the wheel's slot: the write starts between ``debounce_s`` and
  ``debounce_s + slot_s`` after the last schedule (a chain rescheduled before its slot moves
  to the slot of its new deadline when the old one comes: a schedule costs no timer work) —
  but never later than ``max_wait_s`` after the first schedule not yet being written. Without
  that bound a conversation added to more often than every ``debounce_s`` (an agent in a
  simulation ticking faster than that) was never written until it paused: its read-your-writes
  tail grew every tick, every context scored it, and then it was all written at once.
- At most one write in flight per chain and writes complete in order: a chain whose write is
  in flight joins no other batch; what is scheduled meanwhile is written after it returns, at
  its own deadline (at once if a flush or ``now()`` asked for it meanwhile).
- A failed write is retried with exponential backoff, forever, in the background: the messages
  stay pending in the buffer, never dropped (rows the store rejects as data never fail a write:
  they are dead-lettered, see ``memray.store.deadletter``; what is left to retry is the store
  being down, and while it restarts (:class:`UnavailableError`) it is polled every 0.25 s).
- ``flush()`` waits for everything pending at its call to be durable, or raises
  :class:`StoreError` after ``timeout_s`` (the retries go on); ``now()`` starts what is pending
  at once (backpressure); ``stop()`` gives up; ``last_durable_seq`` is the highest seq committed.

``write_many`` must return one result per owner, in order: the highest seq made durable, or
the exception that failed that owner's write (after re-marking what it drained as pending). A
chain alone (tests, one conversation) is :meth:`PersistChain.solo`: a wheel of its own whose
``write_many`` awaits the chain's own ``write()``.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from memray.errors import StoreError, UnavailableError

__all__ = ["PersistChain", "PersistWheel", "WriteFn"]

T = TypeVar("T")
WriteFn = Callable[[], Awaitable[int]]

#: Longest wait between retries while the store is unavailable (restarting), not failing.
UNAVAILABLE_BACKOFF_MAX_S = 0.25
#: The wheel's granularity: a debounced write starts up to this much after its deadline.
SLOT_S = 0.02
#: By default a chain's write starts at most this many debounces after its first pending schedule.
MAX_WAIT_DEBOUNCES = 2.0

_IDLE = 0  # chain._slot: not queued
_SOON = -1  # chain._slot: queued to start in the next turn of the loop (> 0: the slot it waits in)


class _Batch(Generic[T]):
    """The chains one task is writing (each with the generation it writes up to), and how
    many of them are not stopped."""

    __slots__ = ("chains", "live", "task")

    def __init__(self, chains: list[tuple[PersistChain[T], int]]) -> None:
        self.chains = chains
        self.live = len(chains)
        self.task: asyncio.Task[None] | None = None


class PersistChain(Generic[T]):
    """One conversation's persistence state (see the module docstring)."""

    __slots__ = (
        "owner",
        "_wheel",
        "_deadline",
        "_first",
        "_retry_at",
        "_delay",
        "_slot",
        "_batch",
        "_urgent",
        "_requested",
        "_done",
        "_changed",
        "last_durable_seq",
        "failures",
        "last_error",
        "_stopped",
    )

    def __init__(self, wheel: PersistWheel[T], owner: T) -> None:
        self.owner = owner
        self._wheel = wheel
        self._deadline = 0.0  # debounce: write at this loop time
        self._first = 0.0  # loop time of the first schedule not yet being written (0: none)
        self._retry_at = 0.0  # backing off after a failure: retry at this loop time (0: not)
        self._delay = 0.0  # the next backoff (0: the first)
        self._slot = _IDLE
        self._batch: _Batch[T] | None = None  # the write in flight
        self._urgent = False  # now() or flush() asked while a write was in flight
        self._requested = 0  # generation of the newest schedule()
        self._done = 0  # newest generation known durable
        self._changed: asyncio.Event | None = None
        self.last_durable_seq = 0
        self.failures = 0
        self.last_error: BaseException | None = None
        self._stopped = False

    @staticmethod
    def solo(
        write: WriteFn,
        debounce_s: float = 0.2,
        backoff_s: float = 0.05,
        backoff_max_s: float = 5.0,
        slot_s: float = SLOT_S,
        max_wait_s: float | None = None,
    ) -> PersistChain[WriteFn]:
        """A chain on a wheel of its own, writing through ``write()``."""
        return PersistWheel(_each, debounce_s, backoff_s, backoff_max_s, slot_s, max_wait_s).chain(write)

    @property
    def idle(self) -> bool:
        """Nothing pending, nothing in flight."""
        return self._done >= self._requested and self._batch is None

    def schedule(self) -> None:
        """Note new pending work; write it ``debounce_s`` after the last call (to the slot), and
        at most ``max_wait_s`` after the first one not yet being written."""
        self._requested += 1
        wheel = self._wheel
        now = asyncio.get_running_loop().time()
        if not self._first:
            self._first = now
        self._deadline = min(now + wheel.debounce_s, self._first + wheel.max_wait_s)
        if self._slot == _IDLE and self._batch is None and not self._stopped:
            wheel.enqueue(self, self._deadline)

    def now(self) -> None:
        """Write what is pending now instead of after the debounce (backpressure: callers wait).
        A write in flight is followed at once by the next; a retry keeps its backoff."""
        if self._done < self._requested and not self._stopped:
            if self._batch is not None:
                self._urgent = True
            elif not self._retry_at:
                self._wheel.soon(self)

    async def flush(self, timeout_s: float | None = None) -> int:
        """Write now; return once everything scheduled before this call is durable."""
        target = self._requested
        if self._done >= target:
            return self.last_durable_seq
        try:
            async with asyncio.timeout(timeout_s):
                while self._done < target:
                    if self._batch is not None:
                        self._urgent = True
                    elif not self._retry_at:  # a stopped chain is still written when flushed
                        self._wheel.soon(self)
                    if self._changed is None:
                        self._changed = asyncio.Event()
                    await self._changed.wait()
        except TimeoutError:
            raise StoreError(
                f"flush timed out after {timeout_s}s ({self.failures} failed writes, last: {self.last_error!r}); "
                "the messages stay pending, retried in the background while memray stays open"
            ) from self.last_error
        return self.last_durable_seq

    async def close(self, timeout_s: float | None = None) -> None:
        """Flush (nothing is left armed for an idle chain: the wheel's timer is shared)."""
        await self.flush(timeout_s)

    def stop(self) -> None:
        """Give up: leave the wheel, cancel a write or retry in progress (the batch's task once
        every chain in it has stopped), and schedule nothing more (a host that closes with the
        store unreachable; what is pending stays unwritten and is reported by the close)."""
        stopped, self._stopped = self._stopped, True
        self._retry_at = 0.0
        self._slot = _IDLE  # its bucket entry is skipped
        batch = self._batch
        if batch is not None and not stopped:
            batch.live -= 1
            if batch.live == 0 and batch.task is not None:
                batch.task.cancel()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


WriteMany = Callable[[list[T]], Awaitable[Sequence[int | Exception]]]


class PersistWheel(Generic[T]):
    """One timer and one task per due slot for all the chains of a host (module docstring)."""

    def __init__(
        self,
        write_many: WriteMany[T],
        debounce_s: float = 0.2,
        backoff_s: float = 0.05,
        backoff_max_s: float = 5.0,
        slot_s: float = SLOT_S,
        max_wait_s: float | None = None,
    ) -> None:
        self._write_many = write_many
        self.debounce_s = debounce_s
        self.max_wait_s = max(debounce_s, MAX_WAIT_DEBOUNCES * debounce_s if max_wait_s is None else max_wait_s)
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.slot_s = min(slot_s, debounce_s)  # 0: no debounce, every write starts at once
        self._buckets: dict[int, list[PersistChain[T]]] = {}
        self._slots: list[int] = []  # heap of the buckets' slots
        self._timer: asyncio.TimerHandle | None = None
        self._timer_slot = 0
        self._soon: list[PersistChain[T]] = []
        self._soon_armed = False
        self.batches = 0  # batches written (one task each)
        self.writes = 0  # chain writes in them

    def chain(self, owner: T) -> PersistChain[T]:
        return PersistChain(self, owner)

    def enqueue(self, chain: PersistChain[T], at: float) -> None:
        """Put ``chain`` in the bucket of the slot that contains loop time ``at``."""
        if self.slot_s <= 0:
            self.soon(chain)
            return
        slot = math.ceil(at / self.slot_s)
        chain._slot = slot
        bucket = self._buckets.get(slot)
        if bucket is not None:
            bucket.append(chain)
            return
        self._buckets[slot] = [chain]
        heapq.heappush(self._slots, slot)
        if self._timer is None or slot < self._timer_slot:
            self._arm(slot)

    def soon(self, chain: PersistChain[T]) -> None:
        """Start ``chain``'s write in the next turn of the loop (with every other started so)."""
        if chain._slot == _SOON:
            return
        chain._slot = _SOON  # an entry in a bucket is now stale
        self._soon.append(chain)
        if not self._soon_armed:
            self._soon_armed = True
            asyncio.get_running_loop().call_soon(self._on_soon)

    def _arm(self, slot: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_slot = slot
        self._timer = asyncio.get_running_loop().call_at(slot * self.slot_s, self._on_timer)

    def _on_soon(self) -> None:
        self._soon_armed = False
        due, self._soon = self._soon, []
        self._start([c for c in due if c._slot == _SOON])

    def _on_timer(self) -> None:
        self._timer = None
        now = asyncio.get_running_loop().time()
        due: list[PersistChain[T]] = []
        while self._slots and self._slots[0] * self.slot_s <= now + 1e-6:
            slot = heapq.heappop(self._slots)
            limit = max(now, slot * self.slot_s)
            for c in self._buckets.pop(slot):
                if c._slot != slot:  # moved since: started by now()/flush(), or stopped
                    continue
                wake = c._retry_at or c._deadline
                if wake > limit:  # rescheduled since it was bucketed (a later slot, never this one)
                    self.enqueue(c, max(wake, limit + self.slot_s / 2))
                else:
                    due.append(c)
        if self._slots and self._timer is None:
            self._arm(self._slots[0])
        self._start(due)

    def _start(self, due: list[PersistChain[T]]) -> None:
        """One task writes every chain of ``due`` that has work and no write in flight (a
        chain listed twice, e.g. by a stale bucket entry, is taken once)."""
        batch: _Batch[T] = _Batch([])
        for c in due:
            c._slot = _IDLE
            if c._batch is None and c._done < c._requested:
                c._batch = batch
                c._first = 0.0  # what is scheduled from now on waits for a write of its own
                c._urgent = False
                c._retry_at = 0.0
                batch.chains.append((c, c._requested))
        if batch.chains:
            batch.live = sum(1 for c, _ in batch.chains if not c._stopped)  # a stopped one may be flushed
            batch.task = asyncio.get_running_loop().create_task(self._run(batch))

    async def _run(self, batch: _Batch[T]) -> None:
        chains: list[tuple[PersistChain[T], int]] = batch.chains
        self.batches += 1
        self.writes += len(chains)
        try:
            results: Sequence[int | Exception] = await self._write_many([c.owner for c, _ in chains])
        except asyncio.CancelledError:  # every chain of the batch stopped
            for c, _ in chains:
                c._batch = None
                c._notify()
            raise
        except Exception as exc:  # write_many itself broke: every write of the batch failed
            results = [exc] * len(chains)
        now = asyncio.get_running_loop().time()
        for (c, target), result in zip(chains, results):
            c._batch = None
            if isinstance(result, Exception):
                self._failed(c, result, now)
                continue
            c._delay = 0.0
            c.last_error = None
            c.last_durable_seq = max(c.last_durable_seq, result)
            c._done = max(c._done, target)
            c._notify()
            if c._done < c._requested and not c._stopped:  # scheduled while in flight
                if c._urgent:
                    self.soon(c)
                else:
                    self.enqueue(c, max(c._deadline, now))

    def _failed(self, c: PersistChain[T], exc: Exception, now: float) -> None:
        """Retry after the chain's backoff; an actor restarting answers at once that it is
        down: poll it often, so a store back after 3 s is written to at once, not after 5 s."""
        c.failures += 1
        c.last_error = exc
        delay = c._delay or self.backoff_s
        cap = (
            min(self.backoff_max_s, UNAVAILABLE_BACKOFF_MAX_S)
            if isinstance(exc, UnavailableError)
            else self.backoff_max_s
        )
        c._delay = min(delay * 2, cap)
        if not c._stopped:
            c._retry_at = now + delay
            self.enqueue(c, c._retry_at)


async def _each(writes: list[WriteFn]) -> list[int | Exception]:
    """``write_many`` of a solo chain: its own write (one per batch)."""
    out: list[int | Exception] = []
    for write in writes:
        try:
            out.append(await write())
        except Exception as exc:
            out.append(exc)
    return out
