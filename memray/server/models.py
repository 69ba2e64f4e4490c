"""The REST API's response bodies and the records its requests carry (pydantic; they make the
OpenAPI schema). The request bodies themselves are made from the operation table
(:mod:`memray.server.operations`), with these records as the types of their arguments.

Responses reuse memray's own records where they fit (:class:`~memray.models.Message`,
:class:`~memray.models.Context`, :class:`~memray.models.Hit`, :class:`~memray.models.MemoryResult`,
:class:`~memray.models.DeletionReceipt`, :class:`~memray.models.ConversationInfo`). Requests are
described here for the schema and passed on to the facade, which validates them as it validates a
library caller's arguments (so a bad field gets the same memray error, and the same 422, either way).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memray.models import ConversationInfo, Hit, MemoryResult, Message, Role
from memray.server.limits import MAX_ID_CHARS, MAX_PARTS, MAX_TEXT_CHARS
from memray.service.keys import KeyRecord

__all__ = [
    "Ack",
    "Id",
    "Content",
    "MessageIn",
    "MessagesAdded",
    "MessageList",
    "SearchOut",
    "SummaryOut",
    "Counts",
    "ConversationsOut",
    "EntryIn",
    "EntriesAdded",
    "EntrySearchOut",
    "EntryList",
    "BatchAdded",
    "BatchSearchOut",
    "KeyOut",
]

#: ``buffered``: answered once the host holds the messages with their seqs (durable within the
#: debounce, ~0.2 s, plus one group commit); ``durable``: answered after the store committed them.
Ack = Literal["buffered", "durable"]

#: An id (memray's rule: 1-256 characters; control characters are refused by the facade).
Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
#: A message's or entry's content: a text, or a list of parts (text, reasoning, tool, data).
Content = (
    Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | Annotated[list[dict[str, Any]], Field(max_length=MAX_PARTS)]
)


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageIn(_In):
    """A message to add: ``content`` is a string or a list of parts (text, reasoning, tool, data)."""

    role: Role
    content: Content
    id: Id | None = Field(None, description="re-adding an id updates that message (its seq stays)")
    metadata: dict[str, Any] | None = None
    created_at: float | None = None
    sim_time: float | None = None
    importance: float | None = Field(None, ge=0.0, le=1.0)
    agent_id: Id | None = None
    sub_agent_id: Id | None = None


class MessagesAdded(BaseModel):
    """What an add guarantees, said per write (docs/architecture.md, "Read-your-writes")."""

    seqs: list[int] = Field(description="the messages' seqs, in the order given")
    durable: bool = Field(description="committed to the store before this answer (ack=durable)")
    in_context: bool = Field(
        True, description="context() of this conversation finds them now, through any replica (always true)"
    )
    searchable: bool = Field(
        description="a search through this server finds them now (lexically at once): true when the "
        "server runs one replica; with several, a search on another replica finds them once indexed (~0.2-1 s)"
    )


class MessageList(BaseModel):
    messages: list[Message]


class SearchOut(BaseModel):
    hits: list[Hit]
    degraded: bool = False
    reason: str | None = None


class SummaryOut(BaseModel):
    summary: str | None


class Counts(BaseModel):
    """What a delete removed, per store (``messages``, ``embeddings``, ``vectors``, ``export_rows``...)."""

    counts: dict[str, int]


class ConversationsOut(BaseModel):
    conversations: list[ConversationInfo]
    total: int


class EntryIn(_In):
    content: Content
    id: Id | None = None
    author: Id = "user"
    timestamp: float | None = None
    metadata: dict[str, Any] | None = None
    sim_time: float | None = None
    importance: float | None = Field(None, ge=0.0, le=1.0)


class EntriesAdded(BaseModel):
    ids: list[str]
    durable: bool = Field(True, description="entries are committed before the answer (always true)")
    searchable: bool = Field(
        True, description="indexed before the answer (lexically at once if the embedder failed): always true"
    )


class EntrySearchOut(BaseModel):
    memories: list[MemoryResult]
    degraded: bool = False
    reason: str | None = None


class EntryList(BaseModel):
    memories: list[MemoryResult]


class BatchAdded(BaseModel):
    results: list[MessagesAdded]


class BatchSearchOut(BaseModel):
    results: list[SearchOut]


class KeyOut(BaseModel):
    key_id: str
    app: str
    user_id: str | None
    read_only: bool
    label: str | None
    created_at: float
    revoked_at: float | None

    @classmethod
    def of(cls, record: KeyRecord) -> KeyOut:
        return cls(**{k: v for k, v in record._asdict().items() if k != "digest"})
