"""Runtime metrics: counters and histograms, exported through Ray when running inside Ray.

Recorded from the hot paths (host writes, the embedding pipeline, recall), so recording is cheap:
a call updates in-memory totals (about a microsecond) and queues the value; at most once per
``EXPORT_INTERVAL_S`` the queue is pushed to ``ray.util.metrics`` (a Ray ``observe``/``inc``
costs ~10 µs, too much per message at 20k messages/s). Histograms push at most
``MAX_SAMPLES_PER_EXPORT`` evenly spaced observations per export, so under load a histogram's
Prometheus *count* is a sample; its quantiles are what to read. Counters push exact totals.

Without Ray (``inprocess`` mode, or ray not importable) the same objects keep in-memory totals
only; :func:`snapshot` returns them in both modes. This module never imports ray at module
level: it looks for an initialised ray in ``sys.modules`` when it exports (cores import it).

Prometheus names (Ray adds the ``ray_`` prefix): ``ray_memray_messages_committed_total``,
``ray_memray_flush_lag_seconds``, ``ray_memray_search_latency_seconds``,
``ray_memray_embedding_failures_total``, ``ray_memray_degraded_recalls_total``,
``ray_memray_dead_letters_total``, ``ray_memray_messages_lost_total``.

:class:`LagRecorder` measures durable lag exactly (acknowledged → committed, per message) inside
a conversation host; the host reports it through ``durable_lag()``.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = [
    "Counter",
    "Histogram",
    "LagRecorder",
    "snapshot",
    "export",
    "ray_active",
    "MESSAGES_COMMITTED",
    "FLUSH_LAG",
    "SEARCH_LATENCY",
    "EMBEDDING_FAILURES",
    "DEGRADED_RECALLS",
    "DEAD_LETTERS",
    "MESSAGES_LOST",
    "LAG_BOUNDARIES_S",
    "LATENCY_BOUNDARIES_S",
    "percentiles",
    "rss_bytes",
]

EXPORT_INTERVAL_S = 1.0
MAX_SAMPLES_PER_EXPORT = 256
LAG_BOUNDARIES_S = [0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0]
LATENCY_BOUNDARIES_S = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]

Tags = tuple[tuple[str, str], ...]
_REGISTRY: dict[str, _Metric] = {}
_scheduled = False


#: Makes the Ray metric behind a series: ``(kind, name, description, tag_keys, boundaries)`` ->
#: a ``ray.util.metrics`` object. Set by :mod:`memray.runtime.actors`, the one module that imports
#: ray; without it (in-process mode, no Ray) the metrics stay in memory.
_backend: Callable[[str, str, str, tuple[str, ...], list[float] | None], Any] | None = None


def set_backend(make: Callable[[str, str, str, tuple[str, ...], list[float] | None], Any] | None) -> None:
    global _backend
    _backend = make


def ray_active() -> bool:
    """True when this process runs inside an initialised Ray (driver or worker) that can export."""
    ray = sys.modules.get("ray")
    if _backend is None:
        return False
    try:
        return ray is not None and bool(ray.is_initialized())
    except Exception:  # a half-imported or blocked ray: no export
        return False


def _tags(tags: dict[str, str] | None) -> Tags:
    return tuple(sorted(tags.items())) if tags else ()


class _Metric:
    def __init__(self, name: str, description: str, tag_keys: Sequence[str] = ()) -> None:
        self.name = name
        self.description = description
        self.tag_keys = tuple(tag_keys)
        self._ray: Any = None  # the ray.util.metrics object, made on the first export in this process
        _REGISTRY[name] = self

    _pending: Any  # what is waiting for the next push to Ray (each subclass keeps its own shape)

    def _push(self) -> None:
        raise NotImplementedError

    def _values(self) -> dict[str, Any]:
        raise NotImplementedError


class Counter(_Metric):
    """A monotonically increasing total (per tag set)."""

    def __init__(self, name: str, description: str, tag_keys: Sequence[str] = ()) -> None:
        super().__init__(name, description, tag_keys)
        self.totals: dict[Tags, float] = {}
        self._pending: dict[Tags, float] = {}

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        if value <= 0:
            return
        key = _tags(tags)
        self.totals[key] = self.totals.get(key, 0.0) + value
        self._pending[key] = self._pending.get(key, 0.0) + value
        _schedule()

    def _push(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        if self._ray is None:
            assert _backend is not None
            self._ray = _backend("counter", self.name, self.description, self.tag_keys, None)
        for key, value in pending.items():
            self._ray.inc(value, tags=dict(key) or None)

    def _values(self) -> dict[str, Any]:
        return {"total": sum(self.totals.values()), "by_tags": {_label(k): v for k, v in self.totals.items()}}


class Histogram(_Metric):
    """Observations counted into buckets with the given upper ``boundaries`` (seconds)."""

    def __init__(self, name: str, description: str, boundaries: Sequence[float], tag_keys: Sequence[str] = ()) -> None:
        super().__init__(name, description, tag_keys)
        self.boundaries = list(boundaries)
        self.buckets: dict[Tags, list[int]] = {}
        self.sums: dict[Tags, float] = {}
        self._pending: dict[Tags, list[float]] = {}

    def observe(self, value: float, tags: dict[str, str] | None = None) -> None:
        self.observe_many([value], tags)

    def observe_many(self, values: Iterable[float], tags: dict[str, str] | None = None) -> None:
        key = _tags(tags)
        buckets = self.buckets.get(key)
        if buckets is None:
            buckets = self.buckets[key] = [0] * (len(self.boundaries) + 1)
        pending = self._pending.setdefault(key, [])
        total = 0.0
        for v in values:
            buckets[bisect.bisect_left(self.boundaries, v)] += 1
            total += v
            pending.append(v)
        self.sums[key] = self.sums.get(key, 0.0) + total
        if len(pending) > 4 * MAX_SAMPLES_PER_EXPORT:  # keep the queue bounded between exports
            del pending[::2]
        _schedule()

    def _push(self) -> None:
        pending, self._pending = self._pending, {}
        if not any(pending.values()):
            return
        if self._ray is None:
            assert _backend is not None
            self._ray = _backend("histogram", self.name, self.description, self.tag_keys, self.boundaries)
        for key, values in pending.items():
            stride = max(1, -(-len(values) // MAX_SAMPLES_PER_EXPORT))
            for v in values[::stride]:
                self._ray.observe(v, tags=dict(key) or None)

    def _values(self) -> dict[str, Any]:
        count = sum(sum(b) for b in self.buckets.values())
        return {
            "count": count,
            "sum": sum(self.sums.values()),
            "boundaries": self.boundaries,
            "by_tags": {_label(k): list(b) for k, b in self.buckets.items()},
        }


def _label(key: Tags) -> str:
    return ",".join(f"{k}={v}" for k, v in key)


def _schedule() -> None:
    """Export within ``EXPORT_INTERVAL_S``: on the running loop if any, else right now."""
    global _scheduled
    if _scheduled:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        export()
        return
    _scheduled = True
    loop.call_later(EXPORT_INTERVAL_S, export)


def export() -> bool:
    """Push what was recorded since the last export to Ray; False (and nothing pushed, the
    pending values dropped) when this process is not in Ray. In-memory totals are kept either way."""
    global _scheduled
    _scheduled = False
    active = ray_active()
    for metric in _REGISTRY.values():
        if active:
            try:
                metric._push()
            except Exception:  # metrics never break the data path
                metric._pending = {}
        else:
            metric._pending = {}
    return active


def snapshot() -> dict[str, dict[str, Any]]:
    """Every metric's in-memory totals in this process (both modes)."""
    return {name: metric._values() for name, metric in _REGISTRY.items()}


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    """Nearest-rank percentiles of ``values`` (seconds in, seconds out); zeros when empty."""
    if not values:
        return {f"p{q:g}": 0.0 for q in qs}
    ordered = sorted(values)
    n = len(ordered)
    return {f"p{q:g}": ordered[min(n - 1, max(0, math.ceil(q / 100.0 * n) - 1))] for q in qs}


MESSAGES_COMMITTED = Counter("memray_messages_committed", "Messages committed to the history store", ("host",))
FLUSH_LAG = Histogram(
    "memray_flush_lag_seconds",
    "Acknowledged to committed, per message (sampled under load)",
    LAG_BOUNDARIES_S,
    ("host",),
)
SEARCH_LATENCY = Histogram(
    "memray_search_latency_seconds", "Search latency seen by the caller", LATENCY_BOUNDARIES_S, ("scope",)
)
EMBEDDING_FAILURES = Counter("memray_embedding_failures", "Items whose embedding failed (retried later)")
DEGRADED_RECALLS = Counter("memray_degraded_recalls", "Searches or contexts answered degraded", ("scope",))
DEAD_LETTERS = Counter(
    "memray_dead_letters", "Acknowledged messages the store rejected (recorded as dead letters)", ("host",)
)
MESSAGES_LOST = Counter(
    "memray_messages_lost", "Acknowledged (durable=False) messages lost when their host was killed", ("host",)
)


class LagRecorder:
    """Exact durable lag inside one host: when each message was acknowledged, and how long until
    the store committed it. Memory: one float per message not yet durable, plus the kept lags
    (at most ``keep``; the oldest half is dropped when full)."""

    def __init__(self, host: str = "0", keep: int = 200_000) -> None:
        self._host = {"host": host}
        self._keep = keep
        self._acked: dict[Any, dict[str, float]] = {}
        self.lags: list[float] = []
        self.count = 0
        self.pending = 0  # messages acknowledged and not committed yet (backpressure reads it)

    def acked(self, key: Any, ids: Iterable[str], now: float | None = None) -> None:
        ids = list(ids)
        if not ids:
            return  # nothing acknowledged: no entry (an idle conversation must cost nothing here)
        t = time.monotonic() if now is None else now
        pending = self._acked.get(key)
        if pending is None:
            pending = self._acked[key] = {}
        before = len(pending)
        for mid in ids:
            pending.setdefault(mid, t)  # a re-add before the commit keeps the first ack
        self.pending += len(pending) - before

    def committed(self, done: Iterable[tuple[Any, Sequence[str]]], now: float | None = None) -> None:
        """The store committed these messages: ``(key, ids)`` of every conversation of one write,
        recorded at once (one counter add and one histogram update per write, not per
        conversation: a tick's write holds thousands)."""
        t = time.monotonic() if now is None else now
        lags: list[float] = []
        count = 0
        acked = self._acked
        for key, ids in done:
            count += len(ids)
            pending = acked.get(key)
            if pending is None:
                continue
            lags.extend(t - a for a in (pending.pop(mid, None) for mid in ids) if a is not None)
            if not pending:
                del acked[key]
        MESSAGES_COMMITTED.inc(count, self._host)
        if not lags:
            return
        self.pending -= len(lags)
        self.count += len(lags)
        self.lags.extend(lags)
        if len(self.lags) > self._keep:
            del self.lags[: len(self.lags) // 2]
        FLUSH_LAG.observe_many(lags, self._host)

    def forget(self, key: Any) -> None:
        self.pending -= len(self._acked.pop(key, {}))

    def summary(self, reset: bool = False, samples: bool = False) -> dict[str, Any]:
        """Count, p50/p95/p99/max of the kept lags (seconds); ``samples`` adds them all."""
        lags = self.lags
        out: dict[str, Any] = {"count": len(lags), "pending": self.pending}
        out.update(percentiles(lags))
        out["max"] = max(lags) if lags else 0.0
        if samples:
            out["samples"] = list(lags)
        if reset:
            self.lags = []
        return out


def rss_bytes() -> int:
    """This process's resident memory in bytes (0 where /proc is not there to say)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
