"""`ConversationHandle`: one conversation as the facade offers it (``mem.conversation(...)``).

Every call in a sync form and an ``a``-prefixed asyncio twin, run on the memory's event loop.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any

from memray.arguments import check_limit, check_roles, check_seq
from memray.conversation.client import HostClient
from memray.conversation.note import WorkingMemorySpec
from memray.conversation.recall import SearchResults
from memray.errors import ValidationError
from memray.facade.calls import ContextCall, SearchCall, context_read, search_read
from memray.facade.working_memory import WorkingMemoryHandle
from memray.ids import ConversationKey, validate_id
from memray.models import (
    Context,
    ConversationInfo,
    DeletionProof,
    Merge,
    Message,
    MessageFilter,
    MessageInput,
    RetrievalMode,
    Scope,
)
from memray.scoring import Scoring, SimTime, window

if TYPE_CHECKING:
    from memray.facade.memory import Memory

__all__ = ["ConversationHandle"]


class ConversationHandle:
    """One conversation: ``(app, user_id, conversation_id)``. Every call has an async twin."""

    def __init__(self, memory: Memory, key: ConversationKey, wm_spec: WorkingMemorySpec | None = None) -> None:
        self._mem = memory
        self.key = key
        self.working_memory = WorkingMemoryHandle(memory, key, wm_spec or WorkingMemorySpec())

    def __repr__(self) -> str:
        return f"ConversationHandle({self.key.app!r}, {self.key.user_id!r}, {self.key.conversation_id!r})"

    @property
    def _host(self) -> HostClient:
        return self._mem._host_for(self.key)

    # writes
    def add(
        self, messages: Iterable[MessageInput] | MessageInput, durable: bool = False, block: bool = True
    ) -> list[int]:
        """Add messages; returns their seqs. ``durable=True`` returns after the store commit.
        When the host already holds ``max_unpersisted`` messages not yet durable (backpressure),
        it waits for room, or with ``block=False`` raises :class:`~memray.errors.Backpressure`
        at once (nothing written)."""
        return self._mem._run(self._mem._add(self.key, self._mem._coerce(messages), durable, block))

    async def aadd(
        self, messages: Iterable[MessageInput] | MessageInput, durable: bool = False, block: bool = True
    ) -> list[int]:
        """:meth:`add`'s twin. Concurrent ``aadd`` calls of one event loop (``durable=False``,
        ``block=True``) go to the hosts as one ``add_many`` (docs/batching.md)."""
        msgs = self._mem._coerce(messages)
        if not durable and block:
            return await self._mem._calls.add(self.key, msgs)
        return await self._mem._arun(self._mem._add(self.key, msgs, durable, block))

    def flush(self) -> None:
        self._mem._run(self._host.flush(self.key))

    async def aflush(self) -> None:
        await self._mem._arun(self._host.flush(self.key))

    # reads
    def messages(
        self,
        limit: int | None = None,
        before_seq: int | None = None,
        after_seq: int | None = None,
        roles: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        after: SimTime | None = None,
        before: SimTime | None = None,
        created_after: SimTime | None = None,
        created_before: SimTime | None = None,
        agent_id: str | None = None,
        sub_agent_id: str | None = None,
    ) -> list[Message]:
        """Messages by seq: ``limit`` = the most recent N that match (None: all), returned oldest
        → newest. ``after``/``before``: simulation time in ``[after, before)`` (messages without
        one are left out); ``created_after``/``created_before``: the same on ``created_at``;
        ``agent_id``, ``sub_agent_id``: that agent's messages (:mod:`memray.scoring`)."""
        bounds = window(after, before, created_after, created_before)
        where = MessageFilter(limit, before_seq, after_seq, roles, metadata, bounds, agent_id, sub_agent_id)
        return self._mem._run(self._messages(where))

    async def amessages(
        self,
        limit: int | None = None,
        before_seq: int | None = None,
        after_seq: int | None = None,
        roles: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        *,
        after: SimTime | None = None,
        before: SimTime | None = None,
        created_after: SimTime | None = None,
        created_before: SimTime | None = None,
        agent_id: str | None = None,
        sub_agent_id: str | None = None,
    ) -> list[Message]:
        bounds = window(after, before, created_after, created_before)
        where = MessageFilter(limit, before_seq, after_seq, roles, metadata, bounds, agent_id, sub_agent_id)
        return await self._mem._arun(self._messages(where))

    def _messages(self, where: MessageFilter) -> Coroutine[Any, Any, list[Message]]:
        """The host's read of ``where``, its arguments checked."""
        checked = where._replace(
            limit=check_limit(where.limit, None),
            before_seq=check_seq(where.before_seq, "before_seq"),
            after_seq=check_seq(where.after_seq, "after_seq"),
            roles=check_roles(where.roles),
            agent_id=None if where.agent_id is None else validate_id("agent_id", where.agent_id),
            sub_agent_id=None if where.sub_agent_id is None else validate_id("sub_agent_id", where.sub_agent_id),
        )
        return self._host.messages(self.key, checked)

    def search(
        self,
        query: str,
        limit: int = 5,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        scope: Scope = "conversation",
        *,
        scoring: Scoring | None = None,
        after: SimTime | None = None,
        before: SimTime | None = None,
        created_after: SimTime | None = None,
        created_before: SimTime | None = None,
    ) -> SearchResults:
        """Indexed messages most relevant to ``query``; ``score`` in [0, 1] (README "Scores").
        ``scoring=Scoring.stream(now=...)`` ranks the relevant ones by recency, importance and
        relevance (README "Simulations"); ``after``/``before`` keep simulation times in
        ``[after, before)``, ``created_after``/``created_before`` creation times."""
        call = SearchCall(
            self, query, limit, min_score, mode, scope, scoring, after, before, created_after, created_before
        )
        return self._mem._run(self._mem._recall.search(search_read(call)))

    async def asearch(
        self,
        query: str,
        limit: int = 5,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        scope: Scope = "conversation",
        *,
        scoring: Scoring | None = None,
        after: SimTime | None = None,
        before: SimTime | None = None,
        created_after: SimTime | None = None,
        created_before: SimTime | None = None,
    ) -> SearchResults:
        """:meth:`search`'s twin. Concurrent ``asearch`` calls of one event loop are answered
        as one batch (docs/batching.md)."""
        call = SearchCall(
            self, query, limit, min_score, mode, scope, scoring, after, before, created_after, created_before
        )
        return await self._mem._calls.search(search_read(call))

    def context(
        self,
        query: str | None = None,
        limit: int = 10,
        semantic_limit: int = 5,
        merge: Merge = "append",
        scope: Scope = "conversation",
        token_budget: int | None = None,
        mode: RetrievalMode | None = None,
        min_score: float | None = None,
        *,
        scoring: Scoring | None = None,
    ) -> Context:
        """Recent messages + recalled ones + summary + working memory, for the next prompt.
        Recalled messages are relevant ones only (``min_score=None``: score above 0; README
        "Scores"); a query about nothing in the history recalls nothing. ``scoring`` ranks the
        recalled ones (as in :meth:`search`). Recent messages the summary already covers are
        left out (the summary stands for them), the newest ``keep_messages`` always stay."""
        call = ContextCall(self, query, limit, semantic_limit, merge, scope, token_budget, mode, min_score, scoring)
        return self._mem._run(self._mem._recall.context(context_read(call)))

    async def acontext(
        self,
        query: str | None = None,
        limit: int = 10,
        semantic_limit: int = 5,
        merge: Merge = "append",
        scope: Scope = "conversation",
        token_budget: int | None = None,
        mode: RetrievalMode | None = None,
        min_score: float | None = None,
        *,
        scoring: Scoring | None = None,
    ) -> Context:
        """:meth:`context`'s twin. Concurrent ``acontext`` calls of one event loop are answered
        as one batch (docs/batching.md)."""
        call = ContextCall(self, query, limit, semantic_limit, merge, scope, token_budget, mode, min_score, scoring)
        return await self._mem._calls.context(context_read(call))

    # deletes
    def delete_messages(self, ids: Iterable[str]) -> dict[str, int]:
        """Delete these messages (ids the conversation does not hold are ignored): from the
        buffer, the store, the vectors and the Parquet exports. Seqs are never reused; a summary
        that already folded them in keeps them until it is rebuilt. Returns counts per store."""
        return self._mem._run(self._mem._check_open().delete_messages(self.key, _message_ids(ids)))

    async def adelete_messages(self, ids: Iterable[str]) -> dict[str, int]:
        return await self._mem._arun(self._mem._check_open().delete_messages(self.key, _message_ids(ids)))

    def clear(self) -> dict[str, int]:
        """Delete every message acknowledged so far, with their vectors, exported rows and the
        summary; keep the conversation, its working memory and its seqs (new messages continue
        after the last one). Returns counts per store; :meth:`verify_deleted` proves it."""
        return self._mem._run(self._mem._check_open().clear(self.key))

    async def aclear(self) -> dict[str, int]:
        return await self._mem._arun(self._mem._check_open().clear(self.key))

    def verify_deleted(self, ids: Iterable[str] | None = None) -> DeletionProof:
        """Scan every store for these messages (``None``: any message of the conversation, the
        check after :meth:`clear` when nothing was added since): the store, the vectors, the
        shard's snapshot files, the host's buffer and queue, the exports. ``.clean`` when none
        remains."""
        return self._mem._run(self._verify_deleted(ids))

    async def averify_deleted(self, ids: Iterable[str] | None = None) -> DeletionProof:
        return await self._mem._arun(self._verify_deleted(ids))

    def _verify_deleted(self, ids: Iterable[str] | None) -> Coroutine[Any, Any, DeletionProof]:
        from memray.service.erasure import verify_messages_deleted

        wanted = None if ids is None else _message_ids(ids)
        dep = self._mem._deployment
        return verify_messages_deleted(dep.stores, dep.shards, dep.hosts, self._mem.config, self.key, wanted)

    # summary and metadata
    def summary(self) -> str | None:
        """The current summary of the older history, or None."""
        return self._mem._run(self._summary())

    async def asummary(self) -> str | None:
        return await self._mem._arun(self._summary())

    async def _summary(self) -> str | None:
        state = await self._mem._deployment.stores.get_summary(self.key)
        return state.text if state is not None else None

    def create(self, title: str | None = None, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        """Get-or-create the conversation record (a first add creates it too)."""
        return self._mem._run(self._create(title, metadata))

    async def acreate(self, title: str | None = None, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        return await self._mem._arun(self._create(title, metadata))

    async def _create(self, title: str | None, metadata: dict[str, Any] | None) -> ConversationInfo:
        row = await self._mem._deployment.stores.create_conversation(self.key, title, metadata or {})
        return ConversationInfo.model_validate(row)

    def info(self) -> ConversationInfo | None:
        """The conversation record, or None before its first write or ``create``."""
        return self._mem._run(self._info())

    async def ainfo(self) -> ConversationInfo | None:
        return await self._mem._arun(self._info())

    async def _info(self) -> ConversationInfo | None:
        row = await self._mem._deployment.stores.get_conversation(self.key)
        return None if row is None else ConversationInfo.model_validate(row)

    def update(self, title: str | None = None, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        """Set the title and merge ``metadata`` into the stored metadata (other keys kept)."""
        return self._mem._run(self._update(title, metadata))

    async def aupdate(self, title: str | None = None, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        return await self._mem._arun(self._update(title, metadata))

    async def _update(self, title: str | None, metadata: dict[str, Any] | None) -> ConversationInfo:
        row = await self._mem._deployment.stores.update_conversation(self.key, title, metadata)
        return ConversationInfo.model_validate(row)

    def durable_seq(self) -> int:
        """The highest seq known durable (committed to the store): everything up to it survives
        a crash. Asks the conversation's host."""
        return self._mem._run(self._durable_seq())

    async def adurable_seq(self) -> int:
        return await self._mem._arun(self._durable_seq())

    async def _durable_seq(self) -> int:
        _, durable = await self._host.last_seq(self.key)
        return int(durable)

    def delete(self) -> dict[str, int]:
        """Delete the conversation: messages, vectors, its working memory and summary."""
        return self._mem._run(self._mem._check_open().delete_conversation(self.key))

    async def adelete(self) -> dict[str, int]:
        return await self._mem._arun(self._mem._check_open().delete_conversation(self.key))


def _message_ids(ids: Iterable[str]) -> list[str]:
    if isinstance(ids, str):
        raise ValidationError("ids", ids, "must be a list of message ids, not one string", "pass [message_id]")
    return [validate_id("message.id", i) for i in dict.fromkeys(ids)]
