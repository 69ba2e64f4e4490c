"""How a search ranks what is relevant: :class:`Scoring`, the option a caller sets, and
:class:`Stream`, what a shard scores with; and the importance items carry for it.

**Scoring** (the formula: :mod:`memray.index.scorer`): ``Scoring()`` ranks by relevance (the
default), ``Scoring.stream(now=..., ...)`` by the generative-agents memory stream (recency,
importance, relevance, with the experiment's weights). Recency is measured in simulation time
(:mod:`memray.sim_time`).

**Importance** is a number in [0, 1] the agent or an LLM assigns (a 1–10 rating divided by 10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

from memray.errors import ValidationError
from memray.sim_time import SimTime, to_seconds

__all__ = ["Scoring", "Stream", "check_importance", "coerce_scoring", "stream_of"]


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
