"""`ExtrasCache`: the store's answers to ``context_extras`` kept between calls.

``context()`` asks for a conversation's summary and working memory on every call, and they change
rarely (a summariser pass, an agent's note). Answering from DuckDB costs a statement per table per
batch: ~1.4-3.3 ms in-process for one request, most of it DuckDB's per-statement cost
(``benchmarks/read_path_micro.py``, ``context_extras_uncached``). The store keeps each answer,
absent ones included, per user, and every write that changes a user's summaries or working
memory drops that user's answers (:class:`~memray.store.history.HistoryStore` calls
:meth:`ExtrasCache.drop` after the write commits). Working memory of scope ``user`` is shared
by the user's conversations, hence per user.

An answer read while a write to the same store was committing is not kept: :meth:`lookup` hands
out a generation that :meth:`drop` advances, and :meth:`keep` keeps answers only of the current
one. So a write is seen by the next ``context_extras`` call once it returned, in every mode.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from memray.ids import ConversationKey
from memray.store.base import WMScope

__all__ = ["ExtrasCache", "Extras"]

#: (summary text, working-memory content, the seq the summary covers through: 0 without one)
Extras = tuple[str | None, str | None, int]
_User = tuple[str, str]
_Slot = tuple[str, WMScope]


class ExtrasCache:
    """Answers per (app, user_id), then per (conversation_id, scope); at most ``max_answers`` of
    them (whole users are dropped, the first filled first: summaries can be kilobytes each)."""

    def __init__(self, max_answers: int = 50_000) -> None:
        self.max_answers = max_answers
        self._users: dict[_User, dict[_Slot, Extras]] = {}
        self._count = 0
        self._generation = 0
        self._lock = threading.Lock()

    def lookup(self, requests: list[tuple[ConversationKey, WMScope]]) -> tuple[list[Extras | None], int]:
        """The kept answer of each request (None where there is none), and the generation to
        hand to :meth:`keep` with what the store reads for the rest."""
        with self._lock:
            users = self._users
            found: list[Extras | None] = []
            for key, scope in requests:
                slots = users.get((key.app, key.user_id))
                found.append(None if slots is None else slots.get((key.conversation_id, scope)))
            return found, self._generation

    def keep(self, generation: int, requests: list[tuple[ConversationKey, WMScope]], answers: list[Extras]) -> None:
        """Keep ``answers`` (read from the store after :meth:`lookup` gave ``generation``) unless a
        write dropped anything since."""
        with self._lock:
            if generation != self._generation:
                return
            for (key, scope), answer in zip(requests, answers):
                user = (key.app, key.user_id)
                slots = self._users.get(user)
                if slots is None:
                    slots = self._users[user] = {}
                slot = (key.conversation_id, scope)
                self._count += slot not in slots
                slots[slot] = answer
            while self._count > self.max_answers and len(self._users) > 1:
                self._count -= len(self._users.pop(next(iter(self._users))))

    def drop(self, app: str, user_id: str) -> None:
        """Forget the user's answers: call after a write to their summaries or working memory
        committed (or failed: dropping is always safe)."""
        with self._lock:
            self._generation += 1
            self._count -= len(self._users.pop((app, user_id), {}))

    @contextmanager
    def dropping(self, app: str, user_id: str) -> Iterator[None]:
        """Around a write to the user's summaries or working memory: :meth:`drop` once it is done."""
        try:
            yield
        finally:
            self.drop(app, user_id)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._users.clear()
            self._count = 0

    def __len__(self) -> int:
        """The answers kept."""
        return self._count
