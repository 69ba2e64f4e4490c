"""`ContextRead` and `SearchRead`: one ``context()`` or ``search()`` of a conversation, its
arguments checked, as :class:`~memray.conversation.recall.Recall` takes them (one at a time or
a batch of them: :meth:`Recall.context_many`, :meth:`Recall.search_many`).

The facade builds them from what a caller passed (``memray.ContextCall``, ``memray.SearchCall``,
or the arguments of ``conv.context()`` / ``conv.search()``) once every argument is valid, so a
read never fails on its arguments once it is built.
"""

from __future__ import annotations

from typing import NamedTuple

from memray.conversation.working_memory_spec import WorkingMemorySpec
from memray.ids import ConversationKey
from memray.models import Merge, RetrievalMode, Scope
from memray.ranking import Stream
from memray.sim_time import Window

__all__ = ["ContextRead", "SearchRead", "DEFAULT_WM"]

#: The working-memory spec of a conversation handle made without one.
DEFAULT_WM = WorkingMemorySpec()


class SearchRead(NamedTuple):
    """``conv.search(query, limit, min_score, mode, scope, scoring=, after=...)``, checked."""

    key: ConversationKey
    query: str
    limit: int = 5
    min_score: float | None = None
    mode: RetrievalMode | None = None  # None: the configured default
    scope: Scope = "conversation"
    stream: Stream | None = None
    window: Window | None = None


class ContextRead(NamedTuple):
    """``conv.context(query, limit, semantic_limit, merge, scope, token_budget, mode, min_score,
    scoring=)``, checked; ``wm`` is the handle's working-memory spec (its scope and format)."""

    key: ConversationKey
    query: str | None = None
    limit: int = 10
    semantic_limit: int = 5
    merge: Merge = "append"
    scope: Scope = "conversation"
    token_budget: int | None = None
    mode: RetrievalMode | None = None
    min_score: float | None = None
    stream: Stream | None = None
    wm: WorkingMemorySpec = DEFAULT_WM

    @property
    def recalls(self) -> bool:
        """Whether this context searches at all (a query, and room for recalled messages)."""
        return bool(self.query) and self.semantic_limit > 0
