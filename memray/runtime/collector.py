"""The cyclic garbage collector's first threshold in the processes that run memray.

CPython starts a collection of the youngest generation every 700 allocations (net of frees), and
an older one every tenth of those; a full one, over every tracked object, once the objects that
survived since the last one reach a quarter of the heap. A memray process allocates a few dozen
objects per message (the message, its parts, rows, index entries) and keeps many of them (a
conversation's buffer, a shard's namespaces): at 700 the collector runs thousands of times a
tick, and its full passes cross a heap that grows with the history. With the first threshold at
:data:`FIRST_THRESHOLD` the same work was, on the 2-core machine (``examples/tick.py`` timed by
``benchmarks/user_tick.py``, all memray's processes at the new threshold):

- 10,000 agents in ray mode: a tick 5.5-6.6 s -> 3.5-4.3 s; the driver's CPU 3.5-4.4 s -> 2.2-2.4 s
  a tick, and no longer growing with the history;
- 1,000 agents in-process: 640 -> 500-540 ms of CPU a tick (10,000, 50,000 and 100,000 measured
  within noise of each other: the smallest was taken, the one that holds garbage cycles least).

memray raises it in its own actor processes, and in the process that opens it unless
``MemoryConfig.gc_threshold`` is None (it is the user's process: the previous threshold comes back
when the last memray opened there closes). It never lowers a threshold that is set higher.
"""

from __future__ import annotations

import gc
import threading

from memray.config import MemoryConfig

__all__ = ["FIRST_THRESHOLD", "raise_first_threshold", "hold", "release"]

#: The first-generation threshold memray runs its processes with (CPython's default: 700):
#: ``MemoryConfig.gc_threshold``'s default.
FIRST_THRESHOLD: int = MemoryConfig.model_fields["gc_threshold"].default

_lock = threading.Lock()
_open = 0  # memrays open in this process that raised the threshold
_found = _set = 0  # the threshold the first of them found, and the one they set last


def raise_first_threshold(first: int = FIRST_THRESHOLD) -> int:
    """Raise this process's first-generation threshold to ``first`` (never lower it); returns the
    one it had."""
    before, *older = gc.get_threshold()
    if before < first:
        gc.set_threshold(first, *older)
    return before


def hold(first: int | None) -> None:
    """A memray opened in this process: raise the threshold to ``first`` (None: leave it)."""
    global _open, _found, _set
    if first is None:
        return
    with _lock:
        before = raise_first_threshold(first)
        if not _open:
            _found = before
        _open += 1
        _set = gc.get_threshold()[0]


def release(first: int | None) -> None:
    """A memray that :func:`hold` raised the threshold for closed: when none is open here any
    more, the threshold the first one found comes back (unless something else set another)."""
    global _open
    if first is None:
        return
    with _lock:
        if not _open:
            return
        _open -= 1
        current, *older = gc.get_threshold()
        if not _open and current == _set:
            gc.set_threshold(_found, *older)
