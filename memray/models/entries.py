"""Long-term service records: entries, search requests and results, deletion receipts and proofs."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from memray.ids import validate_id
from memray.models.messages import Part, ReasoningPart, RetrievalMode, TextPart, _dump, _now, _Record, new_id
from memray.ranking import Scoring, check_importance, coerce_scoring
from memray.sim_time import to_seconds
from memray.validation import check_finite, check_text, json_text

__all__ = [
    "check_entry",
    "MemoryEntry",
    "SearchRequest",
    "MemoryResult",
    "SearchMemoryResponse",
    "DeletionReceipt",
    "DeletionProof",
]


class MemoryEntry(_Record):
    """A long-term memory: a fact, preference or past exchange worth recalling later.
    ``sim_time`` and ``importance`` as on :class:`Message` (:mod:`memray.sim_time`,
    :mod:`memray.ranking`)."""

    id: str = Field(default_factory=new_id)
    content: str | list[Part]
    author: str = "user"
    timestamp: float = Field(default_factory=_now)
    metadata: dict[str, Any] = Field(default_factory=dict)
    sim_time: float | None = None
    importance: float | None = None

    @field_validator("id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        return validate_id("entry.id", v)

    @field_validator("timestamp")
    @classmethod
    def _finite_time(cls, v: float) -> float:
        return check_finite("entry.timestamp", v)

    @field_validator("sim_time", mode="before")
    @classmethod
    def _sim_time(cls, v: Any) -> float | None:
        return to_seconds("entry.sim_time", v)

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, v: Any) -> float | None:
        return check_importance("entry.importance", v)

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, (TextPart, ReasoningPart)))


def check_entry(entry: MemoryEntry, field: str = "entry") -> MemoryEntry:
    """``entry`` if the store can hold it (see :func:`check_message`); else a ValidationError
    naming ``field`` and the member at fault."""
    validate_id(f"{field}.id", entry.id)
    check_finite(f"{field}.timestamp", entry.timestamp)
    check_text(f"{field}.author", entry.author)
    if isinstance(entry.content, str):
        check_text(f"{field}.content", entry.content)
    else:
        for i, part in enumerate(entry.content):
            json_text(f"{field}.content[{i}]", _dump(f"{field}.content[{i}]", part))
    if entry.metadata:
        json_text(f"{field}.metadata", entry.metadata)
    return entry


class SearchRequest(_Record):
    """``project_id=None`` searches global entries only; ``project_id=P`` global plus P's.
    ``scoring`` ranks (default: relevance); ``after``/``before`` keep entries whose simulation
    time is in ``[after, before)``, ``created_after``/``created_before`` the same on ``timestamp``
    (:mod:`memray.ranking`, :mod:`memray.sim_time`)."""

    query: str
    user_id: str
    app_name: str = "default"
    limit: int | None = None
    min_score: float | None = None
    project_id: str | None = None
    mode: RetrievalMode | None = None
    scoring: Scoring | None = None
    after: float | None = None
    before: float | None = None
    created_after: float | None = None
    created_before: float | None = None

    @field_validator("scoring", mode="before")
    @classmethod
    def _scoring(cls, v: Any) -> Scoring | None:
        return coerce_scoring(v)

    @field_validator("after", "before", "created_after", "created_before", mode="before")
    @classmethod
    def _time(cls, v: Any, info: Any) -> float | None:
        return to_seconds(info.field_name, v)


class MemoryResult(_Record):
    entry: MemoryEntry
    score: float
    session_id: str | None = None
    project_id: str | None = None


class SearchMemoryResponse(_Record):
    """Ranked memories. ``degraded`` (with a ``reason``) when part of the search failed — a shard
    down, or the query could not be embedded and lexical matching was used alone."""

    memories: list[MemoryResult]
    degraded: bool = False
    reason: str | None = None


class DeletionReceipt(_Record):
    """What a delete removed, counted per store (e.g. ``{"messages": 120, "vectors": 118}``)."""

    app: str
    user_id: str
    counts: dict[str, int]


class DeletionProof(_Record):
    """The result of scanning every store for a user: ``clean`` iff ``remaining`` is all zero."""

    app: str
    user_id: str
    remaining: dict[str, int]
    scanned: list[str]

    @property
    def clean(self) -> bool:
        return not any(self.remaining.values())
