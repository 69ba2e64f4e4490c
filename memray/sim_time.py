"""Simulation time: the caller's clock on messages and entries, and the windows that select by it.

**Simulation time** (``sim_time`` on messages and entries) is the caller's clock, not the wall
clock: tick 4,000 may be "day 12, 08:00". It is stored as a float of *simulated seconds*: a
number is taken as it is (any epoch: ``tick * 60`` is fine), a timezone-aware ``datetime`` as its
POSIX timestamp (``dt.timestamp()``), so both kinds compare and subtract alike. A naive
datetime is refused: its meaning depends on the machine's time zone. Values come back as floats.

**Window** (``after``/``before`` on simulation time, ``created_after``/``created_before`` on the
wall clock) keeps items in ``[after, before)``; an item without a simulation time is outside
every simulation-time window. How a search ranks by simulation time (memory-stream recency) is
:mod:`memray.ranking`.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import NamedTuple

from memray.errors import ValidationError

__all__ = ["SimTime", "SECONDS_PER_HOUR", "to_seconds", "Window", "window"]

#: A simulation time as a caller gives it: simulated seconds, or a timezone-aware datetime.
SimTime = float | int | datetime
SECONDS_PER_HOUR = 3600.0


def to_seconds(field: str, value: object) -> float | None:
    """``value`` (None, a finite number, or a timezone-aware datetime) as seconds (module doc)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValidationError(
                field,
                value,
                "is a naive datetime (no time zone)",
                "pass a timezone-aware datetime, e.g. datetime(..., tzinfo=timezone.utc), or seconds",
            )
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(
            field, value, f"must be a number of seconds or a timezone-aware datetime, got {type(value).__name__}"
        )
    seconds = float(value)
    if not math.isfinite(seconds):
        raise ValidationError(field, value, "must be finite", "pass a finite number of seconds")
    return seconds


class Window(NamedTuple):
    """Which items a search or read keeps: ``[after, before)`` in simulation time and
    ``[created_after, created_before)`` on the wall clock (None: unbounded)."""

    after: float | None = None
    before: float | None = None
    created_after: float | None = None
    created_before: float | None = None


def window(
    after: object = None, before: object = None, created_after: object = None, created_before: object = None
) -> Window | None:
    """A validated :class:`Window`, or None when every bound is None."""
    w = Window(
        to_seconds("after", after),
        to_seconds("before", before),
        to_seconds("created_after", created_after),
        to_seconds("created_before", created_before),
    )
    for lo, hi, names in (
        (w.after, w.before, ("after", "before")),
        (w.created_after, w.created_before, ("created_after", "created_before")),
    ):
        if lo is not None and hi is not None and lo > hi:
            raise ValidationError(
                names[0],
                lo,
                f"is later than {names[1]}={hi}",
                f"the window is [{names[0]}, {names[1]}): pass {names[0]} <= {names[1]}",
            )
    return None if w == Window() else w
