"""`ContextCall` and `SearchCall`: the arguments of one ``conv.context()`` / ``conv.search()``,
as a record, for ``mem.context_many([...])`` / ``mem.search_many([...])``.

Each field means what the same argument of the single call means, with the same default;
``conversation`` is a conversation handle (its working-memory spec is used) or a
:class:`~memray.ids.ConversationKey`. The ``*_read`` functions check a call's arguments by the
rules of :mod:`memray.arguments` — the single calls use them too, so both fail alike — and
turn it into the :class:`~memray.conversation.reads.ContextRead` /
:class:`~memray.conversation.reads.SearchRead` that recall runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, TypeVar

from memray.arguments import (
    check_count,
    check_limit,
    check_merge,
    check_min_score,
    check_mode,
    check_query,
    check_scope,
)
from memray.conversation.reads import DEFAULT_WM, ContextRead, SearchRead
from memray.conversation.working_memory_spec import WorkingMemorySpec
from memray.errors import ValidationError
from memray.ids import ConversationKey
from memray.models import Merge, RetrievalMode, Scope
from memray.ranking import Scoring, stream_of
from memray.sim_time import SimTime, window

if TYPE_CHECKING:
    from memray.facade.conversation import ConversationHandle

__all__ = ["ContextCall", "SearchCall", "context_read", "search_read", "reads_of"]

C = TypeVar("C")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ContextCall:
    """``conversation.context(query, limit, ...)`` as a record (see ``ConversationHandle.context``)."""

    conversation: ConversationHandle | ConversationKey
    query: str | None = None
    limit: int = 10
    semantic_limit: int = 5
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
    limit: int = 5
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
        check_limit(call.limit, 10),
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
        check_limit(call.limit, 5),
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
    if isinstance(conversation, _handle()):
        return conversation.key, conversation.working_memory.spec
    raise ValidationError(
        "conversation", conversation, "must be a conversation handle or a ConversationKey", "pass mem.conversation(...)"
    )


@cache
def _handle() -> type[ConversationHandle]:
    """The handle class (imported on first use: its module imports this one)."""
    from memray.facade.conversation import ConversationHandle

    return ConversationHandle
