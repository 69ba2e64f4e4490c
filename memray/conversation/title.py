"""Conversation titles from the chat summariser (``SummarizerConfig(titles=True)``).

The store titles a new conversation with its first user message (80 characters). With
``titles=True`` and a summariser that can title (the OpenAI-compatible chat summariser), the host
asks it for a short title once the first exchange is committed, and replaces the automatic title
with it, but only if the title is still the automatic one (compare-and-set in the store: a title
the caller set meanwhile is kept). A failure leaves the automatic title; it is retried on the next
commits of the first :data:`TITLE_WINDOW` messages.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from memray.ids import ConversationKey
from memray.store.partitions import StorePartitions
from memray.store.rows import MessageRow

__all__ = ["Titler", "TitleSource", "TITLE_WINDOW", "TITLE_CHARS"]

log = logging.getLogger(__name__)

#: Commits of messages up to this seq may title a conversation (the opening exchange).
TITLE_WINDOW = 6
#: The automatic title's length (the store's rule) and the cap on a generated one.
TITLE_CHARS = 80


class TitleSource(Protocol):
    def title(self, lines: list[str]) -> str:
        """A short title for a conversation that opens with ``lines`` (``role: text``)."""
        ...


class Titler:
    def __init__(self, store: StorePartitions, source: TitleSource) -> None:
        self._store = store
        self._source = source
        self._busy: set[ConversationKey] = set()

    def consider(self, key: ConversationKey, rows: list[MessageRow]) -> None:
        """After a commit: title the conversation in the background if ``rows`` are part of its
        opening exchange and hold a user message."""
        opening = [r for r in rows if r.seq <= TITLE_WINDOW and r.text]
        if key in self._busy or not any(r.role == "user" for r in opening):
            return
        self._busy.add(key)
        asyncio.get_running_loop().create_task(self._title(key, opening))

    async def _title(self, key: ConversationKey, rows: list[MessageRow]) -> None:
        try:
            info = await self._store.get_conversation(key)
            first_user = min((r for r in rows if r.role == "user"), key=lambda r: r.seq)
            automatic = first_user.text[:TITLE_CHARS]
            if info is None or info["title"] != automatic:
                return  # set by the caller, or titled already
            lines = [f"{r.role}: {r.text}" for r in sorted(rows, key=lambda r: r.seq)]
            title = " ".join((await asyncio.to_thread(self._source.title, lines)).split())[:TITLE_CHARS]
            if title:
                await self._store.retitle(key, automatic, title)
        except Exception as exc:  # the automatic title stays; a later commit of the opening retries
            log.warning("titling %s failed: %r", key, exc)
        finally:
            self._busy.discard(key)
