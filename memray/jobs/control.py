"""Stopping a job cleanly (Ctrl-C, ``--timeout``) and showing its progress.

:class:`Stop` turns the first Ctrl-C (SIGINT) or SIGTERM, and a passed deadline, into a request
the job polls at safe points: it finishes the batches in flight, saves its progress and returns
with ``status`` ``"interrupted"`` or ``"timed_out"``; the same command run again resumes. A
second Ctrl-C raises ``KeyboardInterrupt`` at once — except inside :meth:`Stop.critical`, a
section (the cutover) that must not be cut in half: there signals are only recorded.

:class:`Meter` prints ``rows, rows/s, ETA`` on stderr every few seconds.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from memray.jobs.common import log

__all__ = ["Stop", "Meter", "EXIT_CODES"]

#: The exit status of a job that stopped early (a rerun resumes it): 130 is what shells use
#: for Ctrl-C, 124 what ``timeout(1)`` uses.
EXIT_CODES = {"interrupted": 130, "timed_out": 124}


class Stop:
    """A job's stop request: from a signal, a deadline (``timeout_s`` after construction), or
    :meth:`request`. ``clock`` is injectable for tests."""

    def __init__(self, timeout_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self.clock = clock
        self.deadline = None if timeout_s is None else clock() + timeout_s
        self._reason: str | None = None
        self._critical = 0
        self._lock = threading.Lock()

    def request(self, reason: str) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason

    @property
    def reason(self) -> str | None:
        """``"interrupted"``, ``"timed_out"`` or None (go on)."""
        if self._reason is None and self.deadline is not None and self.clock() >= self.deadline:
            self.request("timed_out")
        return self._reason

    def message(self) -> str:
        what = "interrupted" if self.reason == "interrupted" else f"timed out after {self.timeout_s:g} s"
        return f"{what}: the work done so far is saved; run the same command again to resume"

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """Handle SIGINT and SIGTERM while the job runs (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in old:
            signal.signal(s, self._on_signal)
        try:
            yield
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._reason == "interrupted" and not self._critical:
            raise KeyboardInterrupt  # the second Ctrl-C: stop now (a rerun still resumes)
        self.request("interrupted")
        if self._critical:
            log("stop requested: finishing the cutover first (a few seconds)")
        else:
            log("stop requested: writing the vectors already embedded and saving progress (Ctrl-C again to quit now)")

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        """A section no signal cuts short: a request made in it is honoured after it."""
        self._critical += 1
        try:
            yield
        finally:
            self._critical -= 1


class Meter:
    """Rows done of ``total``: :meth:`tick` logs count, rate and ETA at most every ``every_s``."""

    def __init__(
        self, label: str, total: int, every_s: float = 5.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.label, self.total, self.every_s, self.clock = label, total, every_s, clock
        self.done = 0
        self.t0 = clock()
        self._last_t, self._last_done = self.t0, 0
        self._first: tuple[float, int] | None = None  # (when, rows) of the first rows done
        self._latest = self.t0

    def add(self, rows: int) -> None:
        self.done += rows
        self._latest = self.clock()
        if self._first is None:
            self._first = (self._latest, rows)

    def startup_s(self) -> float | None:
        """Seconds from the start to the first rows done (pool start-up, model loading)."""
        return None if self._first is None else self._first[0] - self.t0

    def steady_rate(self) -> float | None:
        """Rows/s from the first rows done to the last: the rate once the pipeline runs."""
        if self._first is None or self._latest <= self._first[0]:
            return None
        return (self.done - self._first[1]) / (self._latest - self._first[0])

    def line(self) -> str:
        now = self.clock()
        rate = (self.done - self._last_done) / max(now - self._last_t, 1e-9)
        mean = self.done / max(now - self.t0, 1e-9)
        left = self.total - self.done
        eta = f"ETA {_duration(left / mean)}" if mean > 0 else "ETA unknown (no rows yet)"
        share = f" ({100 * self.done / self.total:.1f}%)" if self.total else ""
        self._last_t, self._last_done = now, self.done
        return f"{self.label}: {self.done:,}/{self.total:,} rows{share}, {rate:,.0f} rows/s, {eta}"

    def tick(self, force: bool = False) -> None:
        if force or self.clock() - self._last_t >= self.every_s:
            log(self.line())


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
