"""`PriorityGate`: one call at a time into a core that must serve calls singly, most urgent first.

The store actor is threaded (calls arrive concurrently) but DuckDB takes one writer: each call
passes the gate at the :class:`~memray.rpc.client.Priority` its core method declares.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from memray.rpc.client import Priority

__all__ = ["PriorityGate"]


class PriorityGate:
    """One call at a time into the store, most urgent first: message commits (what durable lag
    waits for), then reads and other writes, then background work (vectors, scans, exports).
    Under load the background waits; nothing is reordered within a level."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._waiting = [0] * len(Priority)

    @contextlib.contextmanager
    def hold(self, level: Priority) -> Iterator[None]:
        with self._cond:
            self._waiting[level] += 1
            while self._busy or any(self._waiting[:level]):
                self._cond.wait()
            self._waiting[level] -= 1
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
