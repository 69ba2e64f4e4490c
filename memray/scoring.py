"""Simulation time, importance and how a search ranks: the options a caller sets.

**Simulation time** (``sim_time`` on messages and entries) is the caller's clock, not the wall
clock: tick 4,000 may be "day 12, 08:00". It is stored as a float of *simulated seconds*: a
number is taken as it is (any epoch: ``tick * 60`` is fine), a timezone-aware ``datetime`` as its
POSIX timestamp (``dt.timestamp()``), so both kinds compare and subtract alike. A naive
datetime is refused: its meaning depends on the machine's time zone. Values come back as floats.

**Importance** is a number in [0, 1] the agent or an LLM assigns (a 1–10 rating divided by 10).

**Scoring** says how a search ranks relevant items (the formula: :mod:`memray.index.scorer`):
``Scoring()`` ranks by relevance (the default), ``Scoring.stream(now=..., ...)`` by the
generative-agents memory stream (recency, importance, relevance, with the experiment's weights).

**Window** (``after``/``before`` on simulation time, ``created_after``/``created_before`` on the
wall clock) keeps items in ``[after, before)``; an item without a simulation time is outside
every simulation-time window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple

from memray.errors import ValidationError

__all__ = [
    "SimTime",
    "Scoring",
    "Stream",
    "Window",
    "to_seconds",
    "check_importance",
    "window",
    "coerce_scoring",
    "stream_of",
    "SECONDS_PER_HOUR",
]

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


def check_importance(field: str, value: object) -> float | None:
    """``value`` as an importance: None, or a number in [0, 1]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise ValidationError(
            field,
            value,
            "must be a number in [0, 1] or None",
            "scale your rating into [0, 1] (a 1-10 rating: divide by 10)",
        )
    return float(value)


class Stream(NamedTuple):
    """Stream scoring as it travels to a shard (see :class:`Scoring`)."""

    now: float  # the query's simulation time, seconds
    decay_per_hour: float  # recency = decay_per_hour ** hours elapsed
    recency: float  # weights
    importance: float
    relevance: float


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


@dataclass(frozen=True)
class Scoring:
    """How a search ranks the items that are relevant (formula: :mod:`memray.index.scorer`).

    ``Scoring()`` (``kind="relevance"``): by relevance, as always. ``Scoring.stream(...)``: by
    ``(w_rec * recency + w_imp * importance + w_rel * relevance) / (w_rec + w_imp + w_rel)``,
    where ``recency = decay_per_hour ** hours`` since the item's simulation time, seen from
    ``now``. Only items that pass the relevance floor are ranked (``min_score``, or above 0).
    ``now`` is seconds or a timezone-aware datetime (stored as seconds)."""

    kind: Literal["relevance", "stream"] = "relevance"
    now: float | None = None  # the simulation's current time (seconds)
    decay_per_hour: float = 0.995  # Park et al. 2023: 0.995 per game hour
    recency: float = 1.0
    importance: float = 1.0
    relevance: float = 1.0

    @classmethod
    def stream(
        cls,
        now: SimTime | None,
        recency: float = 1.0,
        importance: float = 1.0,
        relevance: float = 1.0,
        decay_per_hour: float = 0.995,
    ) -> Scoring:
        """Memory-stream scoring seen from simulation time ``now`` (see the class docstring)."""
        return cls("stream", now, decay_per_hour, recency, importance, relevance)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.kind not in ("relevance", "stream"):
            raise ValidationError("scoring.kind", self.kind, "must be 'relevance' or 'stream'")
        object.__setattr__(self, "now", to_seconds("scoring.now", self.now))
        for name in ("recency", "importance", "relevance"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValidationError(f"scoring.{name}", v, "must be a finite weight >= 0")
            object.__setattr__(self, name, float(v))
        d = self.decay_per_hour
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 < float(d) <= 1.0:
            raise ValidationError(
                "scoring.decay_per_hour",
                d,
                "must be in (0, 1]",
                "recency = decay_per_hour ** hours; 0.995 is the paper's value, 1 disables decay",
            )
        object.__setattr__(self, "decay_per_hour", float(d))
        if self.kind == "stream":
            if self.recency + self.importance + self.relevance <= 0.0:
                raise ValidationError(
                    "scoring", self.kind, "has no weight above 0", "give recency, importance or relevance a weight"
                )
            if self.now is None and self.recency > 0.0:
                raise ValidationError(
                    "scoring.now",
                    None,
                    "is needed to measure recency",
                    "pass the simulation's current time, or recency=0",
                )

    def to_stream(self) -> Stream | None:
        """What a shard needs (None for relevance scoring)."""
        if self.kind != "stream":
            return None
        return Stream(
            self.now if self.now is not None else 0.0,
            self.decay_per_hour,
            self.recency,
            self.importance,
            self.relevance,
        )


def coerce_scoring(value: object) -> Scoring | None:
    """``scoring=`` as callers pass it: None, a :class:`Scoring`, ``"relevance"``, or a dict."""
    if value is None or isinstance(value, Scoring):
        return value
    if value == "relevance":
        return Scoring()
    if isinstance(value, dict):
        return Scoring(**value)
    raise ValidationError(
        "scoring",
        value,
        "must be a memray.Scoring, 'relevance' or None",
        "use memray.Scoring.stream(now=...) for memory-stream ranking",
    )


def stream_of(value: object) -> Stream | None:
    """The :class:`Stream` a shard scores with for ``scoring=`` (None: by relevance)."""
    parsed = coerce_scoring(value)
    return None if parsed is None else parsed.to_stream()
