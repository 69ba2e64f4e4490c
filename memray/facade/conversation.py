"""`ConversationHandle`: one conversation as the facade offers it (``mem.conversation(...)``).

Every call is written once, as the ``a``-prefixed coroutine; its sync twin is derived by
:func:`~memray.facade.runner.blocking` and runs it on memray's loop.

`ContextCall` and `SearchCall` are the arguments of one ``conv.context()`` / ``conv.search()``
as a record, for ``mem.context_many([...])`` / ``mem.search_many([...])``: each field means what
the same argument of the single call means, with the same default; ``conversation`` is a
conversation handle (its working-memory spec is used) or a :class:`~memray.ids.ConversationKey`.
The ``*_read`` functions check a call's arguments by the rules of :mod:`memray.arguments` — the
single calls use them too, so both fail alike — and turn it into the
:class:`~memray.conversation.reads.ContextRead` / :class:`~memray.conversation.reads.SearchRead`
that recall runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from memray.arguments import (
    CONTEXT_LIMIT,
    CONTEXT_SEMANTIC_LIMIT,
    SEARCH_LIMIT,
    check_count,
    check_limit,
    check_merge,
    check_min_score,
    check_mode,
    check_query,
    check_roles,
    check_scope,
    check_seq,
)
from memray.conversation.reads import DEFAULT_WM, ContextRead, SearchRead
from memray.conversation.recall import SearchResults
from memray.conversation.working_memory_spec import WorkingMemorySpec
from memray.errors import ValidationError
from memray.facade.runner import Internals, blocking
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
    coerce_message,
)
from memray.ranking import Scoring, stream_of
from memray.service.erasure import verify_messages_deleted
from memray.sim_time import SimTime, window

__all__ = [
    "ConversationHandle",
    "coerce_messages",
    "ContextCall",
    "SearchCall",
    "context_read",
    "search_read",
    "reads_of",
]


class ConversationHandle:
    """One conversation: ``(app, user_id, conversation_id)``. Every call has an async twin."""

    def __init__(self, internals: Internals, key: ConversationKey, wm_spec: WorkingMemorySpec | None = None) -> None:
        self._runner = internals
        self.key = key
        self.working_memory = WorkingMemoryHandle(internals, key, wm_spec or WorkingMemorySpec())

    def __repr__(self) -> str:
        return f"ConversationHandle({self.key.app!r}, {self.key.user_id!r}, {self.key.conversation_id!r})"

    # writes
    async def aadd(
        self, messages: Iterable[MessageInput] | MessageInput, durable: bool = False, block: bool = True
    ) -> list[int]:
        """Add messages; returns their seqs. ``durable=True`` returns after the store commit.
        When the host already holds ``max_unpersisted`` messages not yet durable (backpressure),
        it waits for room, or with ``block=False`` raises :class:`~memray.errors.Backpressure`
        at once (nothing written). Concurrent ``aadd`` calls of one event loop (``durable=False``,
        ``block=True``) go to the hosts as one ``add_many`` (docs/batching.md)."""
        session = self._runner.session
        msgs = coerce_messages(messages, session.config.max_message_chars)
        if not durable and block:
            return await self._runner.batches.add(self.key, msgs)
        return await self._runner.arun(session.add(self.key, msgs, durable, block))

    add = blocking(aadd)

    async def aflush(self) -> None:
        """Make everything acknowledged in this conversation durable."""
        await self._runner.arun(self._runner.session.host_for(self.key).flush(self.key))

    flush = blocking(aflush)

    # reads
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
        """Messages by seq: ``limit`` = the most recent N that match (None: all), returned oldest
        → newest. ``after``/``before``: simulation time in ``[after, before)`` (messages without
        one are left out); ``created_after``/``created_before``: the same on ``created_at``;
        ``agent_id``, ``sub_agent_id``: that agent's messages (:mod:`memray.sim_time`)."""
        bounds = window(after, before, created_after, created_before)
        where = MessageFilter(limit, before_seq, after_seq, roles, metadata, bounds, agent_id, sub_agent_id)
        checked = where._replace(
            limit=check_limit(where.limit, None),
            before_seq=check_seq(where.before_seq, "before_seq"),
            after_seq=check_seq(where.after_seq, "after_seq"),
            roles=check_roles(where.roles),
            agent_id=None if where.agent_id is None else validate_id("agent_id", where.agent_id),
            sub_agent_id=None if where.sub_agent_id is None else validate_id("sub_agent_id", where.sub_agent_id),
        )
        host = self._runner.session.host_for(self.key)
        return await self._runner.arun(host.messages(self.key, checked))

    messages = blocking(amessages)

    async def asearch(
        self,
        query: str,
        limit: int = SEARCH_LIMIT,
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
        """Indexed messages most relevant to ``query``; ``score`` in [0, 1] (docs/scoring.md).
        ``scoring=Scoring.stream(now=...)`` ranks the relevant ones by recency, importance and
        relevance (docs/simulations.md); ``after``/``before`` keep simulation times in
        ``[after, before)``, ``created_after``/``created_before`` creation times. Concurrent
        ``asearch`` calls of one event loop are answered as one batch (docs/batching.md)."""
        call = SearchCall(
            self, query, limit, min_score, mode, scope, scoring, after, before, created_after, created_before
        )
        return await self._runner.batches.search(search_read(call))

    search = blocking(asearch)

    async def acontext(
        self,
        query: str | None = None,
        limit: int = CONTEXT_LIMIT,
        semantic_limit: int = CONTEXT_SEMANTIC_LIMIT,
        merge: Merge = "append",
        scope: Scope = "conversation",
        token_budget: int | None = None,
        mode: RetrievalMode | None = None,
        min_score: float | None = None,
        *,
        scoring: Scoring | None = None,
    ) -> Context:
        """Recent messages + recalled ones + summary + working memory, for the next prompt.
        Recalled messages are relevant ones only (``min_score=None``: score above 0;
        docs/scoring.md); a query about nothing in the history recalls nothing. ``scoring`` ranks the
        recalled ones (as in :meth:`search`). Recent messages the summary already covers are
        left out (the summary stands for them), the newest ``keep_messages`` always stay.
        Concurrent ``acontext`` calls of one event loop are answered as one batch
        (docs/batching.md)."""
        call = ContextCall(self, query, limit, semantic_limit, merge, scope, token_budget, mode, min_score, scoring)
        return await self._runner.batches.context(context_read(call))

    context = blocking(acontext)

    # deletes
    async def adelete_messages(self, ids: Iterable[str]) -> dict[str, int]:
        """Delete these messages (ids the conversation does not hold are ignored): from the
        buffer, the store, the vectors and the Parquet exports. Seqs are never reused; a summary
        that already folded them in keeps them until it is rebuilt. Returns counts per store."""
        wanted = _message_ids(ids)
        return await self._runner.arun(self._runner.session.delete_messages(self.key, wanted))

    delete_messages = blocking(adelete_messages)

    async def aclear(self) -> dict[str, int]:
        """Delete every message acknowledged so far, with their vectors, exported rows and the
        summary; keep the conversation, its working memory and its seqs (new messages continue
        after the last one). Returns counts per store; :meth:`verify_deleted` proves it."""
        return await self._runner.arun(self._runner.session.clear(self.key))

    clear = blocking(aclear)

    async def averify_deleted(self, ids: Iterable[str] | None = None) -> DeletionProof:
        """Scan every store for these messages (``None``: any message of the conversation, the
        check after :meth:`clear` when nothing was added since): the store, the vectors, the
        shard's snapshot files, the host's buffer and queue, the exports. ``.clean`` when none
        remains."""
        wanted = None if ids is None else _message_ids(ids)
        session = self._runner.session
        dep = session.deployment
        proof = verify_messages_deleted(dep.stores, dep.shards, dep.hosts, session.config, self.key, wanted)
        return await self._runner.arun(proof)

    verify_deleted = blocking(averify_deleted)

    # summary and metadata
    async def asummary(self) -> str | None:
        """The current summary of the older history, or None."""
        state = await self._runner.arun(self._runner.session.deployment.stores.get_summary(self.key))
        return state.text if state is not None else None

    summary = blocking(asummary)

    async def acreate(self, title: str | None = None, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        """Get-or-create the conversation record (a first add creates it too)."""
        stores = self._runner.session.deployment.stores
        row = await self._runner.arun(stores.create_conversation(self.key, title, metadata or {}))
        return ConversationInfo.model_validate(row)

    create = blocking(acreate)

    async def ainfo(self) -> ConversationInfo | None:
        """The conversation record, or None before its first write or ``create``."""
        row = await self._runner.arun(self._runner.session.deployment.stores.get_conversation(self.key))
        return None if row is None else ConversationInfo.model_validate(row)

    info = blocking(ainfo)

    async def aupdate(self, title: str | None = None, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        """Set the title and merge ``metadata`` into the stored metadata (other keys kept)."""
        stores = self._runner.session.deployment.stores
        row = await self._runner.arun(stores.update_conversation(self.key, title, metadata))
        return ConversationInfo.model_validate(row)

    update = blocking(aupdate)

    async def adurable_seq(self) -> int:
        """The highest seq known durable (committed to the store): everything up to it survives
        a crash. Asks the conversation's host."""
        _, durable = await self._runner.arun(self._runner.session.host_for(self.key).last_seq(self.key))
        return int(durable)

    durable_seq = blocking(adurable_seq)

    async def adelete(self) -> dict[str, int]:
        """Delete the conversation: messages, vectors, its working memory and summary."""
        return await self._runner.arun(self._runner.session.delete_conversation(self.key))

    delete = blocking(adelete)


def coerce_messages(messages: Iterable[MessageInput] | MessageInput, max_chars: int) -> list[Message]:
    """``messages`` (one or a list; dicts or :class:`Message`) as messages, each checked."""
    if isinstance(messages, (Message, dict)):
        messages = [messages]
    elif isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise ValidationError(
            "messages",
            messages,
            f"must be a message or a list of messages, got {type(messages).__name__}",
            "pass {'role': 'user', 'content': '...'} (or a list of them) or a memray.Message",
        )
    return [coerce_message(m, max_chars) for m in messages]


def _message_ids(ids: Iterable[str]) -> list[str]:
    if isinstance(ids, str):
        raise ValidationError("ids", ids, "must be a list of message ids, not one string", "pass [message_id]")
    return [validate_id("message.id", i) for i in dict.fromkeys(ids)]


C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ContextCall:
    """``conversation.context(query, limit, ...)`` as a record (see ``ConversationHandle.context``)."""

    conversation: ConversationHandle | ConversationKey
    query: str | None = None
    limit: int = CONTEXT_LIMIT
    semantic_limit: int = CONTEXT_SEMANTIC_LIMIT
    merge: Merge = "append"
    scope: Scope = "conversation"
    token_budget: int | None = None
    mode: RetrievalMode | None = None
    min_score: float | None = None
    scoring: Scoring | None = None


@dataclass(frozen=True, slots=True)
class SearchCall:
    """``conversation.search(query, limit, ...)`` as a record (see ``ConversationHandle.search``)."""

    conversation: ConversationHandle | ConversationKey
    query: str
    limit: int = SEARCH_LIMIT
    min_score: float | None = None
    mode: RetrievalMode | None = None
    scope: Scope = "conversation"
    scoring: Scoring | None = None
    after: SimTime | None = None
    before: SimTime | None = None
    created_after: SimTime | None = None
    created_before: SimTime | None = None


def context_read(call: ContextCall) -> ContextRead:
    """``call`` checked (raises :class:`ValidationError` naming the first bad argument)."""
    key, wm = _target(call.conversation)
    if call.query is not None:
        check_query(call.query)
    if call.token_budget is not None:
        check_limit(call.token_budget, None, "token_budget", none_means="no budget")
    return ContextRead(
        key,
        call.query,
        check_limit(call.limit, CONTEXT_LIMIT),
        check_count(call.semantic_limit, "semantic_limit"),
        check_merge(call.merge),
        check_scope(call.scope),
        call.token_budget,
        check_mode(call.mode),
        check_min_score(call.min_score),
        stream_of(call.scoring),
        wm,
    )


def search_read(call: SearchCall) -> SearchRead:
    """``call`` checked (raises :class:`ValidationError` naming the first bad argument)."""
    key, _ = _target(call.conversation)
    return SearchRead(
        key,
        check_query(call.query),
        check_limit(call.limit, SEARCH_LIMIT),
        check_min_score(call.min_score),
        check_mode(call.mode),
        check_scope(call.scope),
        stream_of(call.scoring),
        window(call.after, call.before, call.created_after, call.created_before),
    )


def reads_of(calls: Iterable[C], kind: type[C], read: Callable[[C], R]) -> list[R]:
    """Every call of a batch checked before any runs; the first bad one raises, its field named
    with its place in the batch (``calls[3].limit``)."""
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Iterable):
        raise ValidationError(
            "calls", calls, f"must be a list of {kind.__name__}", f"pass [memray.{kind.__name__}(...)]"
        )
    out = []
    for i, call in enumerate(calls):
        if not isinstance(call, kind):
            raise ValidationError(
                f"calls[{i}]", call, f"must be a {kind.__name__}", f"build it as memray.{kind.__name__}(conv, ...)"
            )
        try:
            out.append(read(call))
        except ValidationError as exc:
            raise type(exc)(f"calls[{i}].{exc.field}", exc.value, exc.problem, exc.hint) from exc
    return out


def _target(conversation: object) -> tuple[ConversationKey, WorkingMemorySpec]:
    """The conversation's key and working-memory spec (a key alone: the default spec)."""
    if isinstance(conversation, ConversationKey):
        return conversation, DEFAULT_WM
    if isinstance(conversation, ConversationHandle):
        return conversation.key, conversation.working_memory.spec
    raise ValidationError(
        "conversation", conversation, "must be a conversation handle or a ConversationKey", "pass mem.conversation(...)"
    )
