"""The cyclic garbage collector's thresholds in the processes that run memray.

CPython starts a collection of the youngest generation every 700 allocations (net of frees), and
one of the next every tenth of those; a full one, over every tracked object, once the objects that
survived since the last one reach a quarter of the heap. A memray process allocates a few dozen
objects per message (the message, its parts, rows, index entries) and keeps many of them (a
conversation's buffer, a shard's namespaces): at 700 the collector runs thousands of times a
tick, and its full passes cross a heap that grows with the history. At :data:`FIRST_THRESHOLD`
and :data:`OLDER_THRESHOLDS`, on the 2-core machine (``examples/tick.py`` timed by
``benchmarks/user_tick.py``, all memray's processes raised):

- 10,000 agents in ray mode: a tick 5.5-6.6 s -> 3.5-4.3 s with the first threshold alone, and
  3.2-4.0 s with the older ones at 100 too (the middle one later 1,000: :data:`OLDER_THRESHOLDS`);
  the driver's CPU 3.5-4.4 s -> 2.2-2.4 s -> 1.5-2.0 s a tick, no longer growing with the history;
- 1,000 agents in-process: 640 -> 500-540 ms of CPU a tick (a first threshold of 10,000, 50,000
  and 100,000 measured within noise of each other: the smallest was taken, the one that holds
  garbage cycles least).

memray raises them in its own actor processes, and in the process that opens it unless
``MemoryConfig.gc_threshold`` is None (it is the user's process: the previous thresholds come
back when the last memray opened there closes). It never lowers a threshold that is set higher.
"""

from __future__ import annotations

import gc
import threading

from memray.config import MemoryConfig

__all__ = ["FIRST_THRESHOLD", "OLDER_THRESHOLDS", "raise_thresholds", "hold", "release"]

#: The first-generation threshold memray runs its processes with (CPython's default: 700):
#: ``MemoryConfig.gc_threshold``'s default.
FIRST_THRESHOLD: int = MemoryConfig.model_fields["gc_threshold"].default
#: The older generations' (CPython's: 10 and 10): how many collections of the generation below
#: start one of theirs. At 10 the driver of a 10,000-agent tick still spent ~0.3 s of CPU a tick
#: more than at 100. At 100 the middle generation was still collected about once a tick there,
#: over the 300,000-450,000 objects a tick keeps alive while it runs (its contexts, their
#: messages): at 1,000 (three alternated pairs of 9 ticks, ``examples/tick.py``'s batches, all
#: memray's processes raised) the driver's collections took 290-386 ms a tick instead of
#: 494-662, and every memray process's 11.4-12.6% of its CPU instead of 14.4-15.8%; the tick's
#: median 4.1-4.6 s instead of 4.6-6.2 s. Cyclic garbage waits longer for its collection (about
#: eight such ticks at most); what is not cyclic is freed at once whatever the thresholds.
OLDER_THRESHOLDS = (1000, 100)

_lock = threading.Lock()
_open = 0  # memrays open in this process that raised the thresholds
_found: tuple[int, ...] = ()  # the thresholds the first of them found
_set: tuple[int, ...] = ()  # the ones they set last


def raise_thresholds(first: int = FIRST_THRESHOLD) -> tuple[int, ...]:
    """Raise this process's collector thresholds to ``first`` and :data:`OLDER_THRESHOLDS` (never
    lower one); returns the ones it had."""
    before = gc.get_threshold()
    wanted = tuple(max(have, want) for have, want in zip(before, (first, *OLDER_THRESHOLDS)))
    if wanted != before:
        gc.set_threshold(*wanted)
    return before


def hold(first: int | None) -> None:
    """A memray opened in this process: raise the thresholds, the first to ``first`` (None:
    leave them)."""
    global _open, _found, _set
    if first is None:
        return
    with _lock:
        before = raise_thresholds(first)
        if not _open:
            _found = before
        _open += 1
        _set = gc.get_threshold()


def release(first: int | None) -> None:
    """A memray that :func:`hold` raised the thresholds for closed: when none is open here any
    more, those the first one found come back (unless something else set others)."""
    global _open
    if first is None:
        return
    with _lock:
        if not _open:
            return
        _open -= 1
        if not _open and gc.get_threshold() == _set:
            gc.set_threshold(*_found)
