"""Memories still open when the interpreter exits are closed then, so nothing acknowledged is lost
by a script that ends without ``close()``.

Each open :class:`~memray.facade.memory.Memory` is held here until it closes. At a normal exit
(the main script ends, ``sys.exit``, an uncaught exception) each is closed — flushed, then
stopped — within its ``write_timeout_s``; what could not be made durable is named on stderr
then. The hook runs among the threading module's exit hooks, before the one that makes every
thread pool refuse new work: memray's event loop still runs its stores, shards and embedding
through thread pools while it closes (a plain :mod:`atexit` hook would run after that one, and
the close would fail). A process killed by a signal runs no hook: what was acknowledged and not
yet durable is reported as lost (dead letters) the next time the data directory is opened.
"""

from __future__ import annotations

import sys
import threading
from typing import Protocol

from memray.config import MemoryConfig

__all__ = ["hold", "release", "ClosesAtExit"]


class ClosesAtExit(Protocol):
    """What is held here: a :class:`~memray.facade.memory.Memory` (typed by this protocol so that
    this module need not import the one that uses it)."""

    @property
    def config(self) -> MemoryConfig: ...

    def _close_at_exit(self) -> str | None: ...


_open: dict[int, ClosesAtExit] = {}
_lock = threading.Lock()
_hooked = False


def hold(memory: ClosesAtExit) -> None:
    """Close ``memory`` at exit unless it is closed (:func:`release`) before."""
    global _hooked
    with _lock:
        _open[id(memory)] = memory
        if not _hooked:
            import concurrent.futures.thread  # noqa: F401  (its exit hook is registered first, so runs after ours)

            threading._register_atexit(_close_all)  # type: ignore[attr-defined]  # (not in the stubs)
            _hooked = True


def release(memory: ClosesAtExit) -> None:
    with _lock:
        _open.pop(id(memory), None)


def _close_all() -> None:
    with _lock:
        memories = list(reversed(_open.values()))  # forks before the memories they came from
    for memory in memories:
        problem = memory._close_at_exit()
        if problem:
            print(f"memray: at exit, {memory.config.root}: {problem}", file=sys.stderr, flush=True)
