"""Incremental summaries of a conversation's whole history, tracked by ``seq``.

The stored summary (its own table: :class:`~memray.store.base.SummaryState`) covers the messages
up to ``summarized_through_seq``. When the estimated tokens of the messages after it exceed
``trigger_tokens``, :class:`SummaryKeeper` folds all but the last ``keep_messages`` of them into
the summary (old summary + new messages -> new summary) and compare-and-sets it. Because the
cursor is a ``seq``, not a position in a window, the summary keeps advancing however long the
history grows.

A summary reaches a prompt as one system message wrapped in ``<agent_summary>...</agent_summary>``
and marked in its metadata; such a message, or any ``<agent_summary>`` block, is never fed back
into the next summary.

The summarisers that implement :class:`Summarizer` are in :mod:`memray.conversation.summarizer`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

from memray.config import SummarizerConfig
from memray.errors import ConflictError, MemrayError, SummaryError
from memray.ids import ConversationKey
from memray.models import DataPart, Message, MessageFilter, ReasoningPart, TextPart, ToolPart
from memray.store.base import SummaryState
from memray.store.partitions import StorePartitions
from memray.store.rows import MessageRow, row_to_message
from memray.text import estimate_tokens as default_estimate_tokens

__all__ = [
    "SUMMARY_MARKER",
    "SUMMARY_MESSAGE_ID",
    "Summarizer",
    "SummaryKeeper",
    "summary_message",
    "is_summary_message",
    "strip_summary_blocks",
    "render_message",
    "message_tokens",
    "EstimateTokens",
    "TAGS",
]

#: Metadata key that marks a summary message (value ``True``).
SUMMARY_MARKER = "memray_summary"
#: The id of the summary message in an assembled context.
SUMMARY_MESSAGE_ID = "memray-agent-summary"
_BLOCK = re.compile(r"<agent_summary>.*?(?:</agent_summary>|\Z)", re.DOTALL)
TAGS = re.compile(r"</?agent_summary>")  # a summary's own tags, stripped from what is fed back
EstimateTokens = Callable[[str], int]


# -- summary messages ------------------------------------------------------------------------
def summary_message(text: str) -> Message:
    """The system message that carries a summary into a prompt."""
    body = TAGS.sub("", text).strip()
    return Message(
        id=SUMMARY_MESSAGE_ID,
        role="system",
        parts=[TextPart(text=f"<agent_summary>\n{body}\n</agent_summary>")],
        metadata={SUMMARY_MARKER: True},
    )


def is_summary_message(msg: Message) -> bool:
    """True for a summary message: marked in its metadata, or a system message with the tag."""
    if msg.metadata.get(SUMMARY_MARKER) is True:
        return True
    return msg.role == "system" and any(isinstance(p, TextPart) and "<agent_summary>" in p.text for p in msg.parts)


def strip_summary_blocks(text: str) -> str:
    """``text`` without any ``<agent_summary>...</agent_summary>`` block (an unclosed one runs
    to the end)."""
    return _BLOCK.sub("", text)


def render_message(msg: Message, include_reasoning: bool = False) -> str:
    """One message as transcript text: its text, tool calls with input and result, data parts."""
    chunks: list[str] = []
    for part in msg.parts:
        if isinstance(part, TextPart):
            chunks.append(part.text)
        elif isinstance(part, ReasoningPart) and include_reasoning:
            chunks.append(part.text)
        elif isinstance(part, ToolPart):
            call = f"[tool {part.tool_name}({_json(part.input)})"
            if part.state == "output":
                call += f" -> {_json(part.output)}"
            elif part.state == "error":
                call += f" -> error: {part.error}"
            chunks.append(call + "]")
        elif isinstance(part, DataPart):
            chunks.append(f"[data {part.name or ''}: {_json(part.data)}]")
    return "\n".join(c for c in chunks if c)


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def message_tokens(msg: Message, estimate: EstimateTokens = default_estimate_tokens) -> int:
    """Estimated prompt tokens of one message: its full rendering plus 4 for the role framing."""
    return estimate(render_message(msg, include_reasoning=True)) + 4


# -- the protocol ----------------------------------------------------------------------------
class Summarizer(Protocol):
    def summarize(self, previous: str | None, messages: list[Message], max_tokens: int) -> str:
        """The new summary of ``previous`` (the old summary, or None) plus ``messages`` (oldest
        first, no summary messages among them), in at most about ``max_tokens`` tokens."""
        ...


# -- the keeper ------------------------------------------------------------------------------
class SummaryKeeper:
    """Keeps each conversation's summary up to date, incrementally by ``seq``.

    It remembers, per conversation, how many tokens the unsummarised messages cost up to the last
    ``seq`` it counted, so a call per turn reads only the messages added since. One update per
    conversation runs at a time; a lost compare-and-set (another keeper won) returns None.
    """

    def __init__(
        self,
        store: StorePartitions,
        summarizer: Summarizer,
        config: SummarizerConfig,
        estimate_tokens: EstimateTokens = default_estimate_tokens,
    ) -> None:
        self.store = store
        self.summarizer = summarizer
        self.config = config
        self.estimate_tokens = estimate_tokens
        self._counted: dict[ConversationKey, tuple[int, int, int]] = {}  # through, counted_seq, tokens
        self._locks: dict[ConversationKey, _KeyLock] = {}

    async def current(self, key: ConversationKey) -> str | None:
        """The stored summary text, or None."""
        state: SummaryState | None = await self.store.get_summary(key)
        return state.text if state else None

    def pending_tokens(self, key: ConversationKey) -> int | None:
        """Tokens of the unsummarised messages as last counted, or None if never counted."""
        cached = self._counted.get(key)
        return cached[2] if cached else None

    def forget(self, key: ConversationKey) -> None:
        """Drop what is cached about ``key`` (call it when the conversation is deleted)."""
        self._counted.pop(key, None)

    async def maybe_update(self, key: ConversationKey, last_seq: int, force: bool = False) -> SummaryState | None:
        """Fold older messages into the summary if the unsummarised history (messages with
        ``summarized_through_seq < seq <= last_seq``) is over ``trigger_tokens`` (or ``force``).

        Returns the new state, or None when nothing was folded. Raises SummaryError if the
        summariser fails; the history and the stored summary are then untouched."""
        async with self._lock(key):
            state: SummaryState | None = await self.store.get_summary(key)
            through = state.summarized_through_seq if state else 0
            if last_seq <= through:
                return None
            tokens = await self._pending_tokens(key, through, last_seq)
            if tokens <= self.config.trigger_tokens and not force:
                return None
            return await self._fold(key, state, last_seq)

    async def _pending_tokens(self, key: ConversationKey, through: int, last_seq: int) -> int:
        cached = self._counted.get(key)
        counted_seq, tokens = (cached[1], cached[2]) if cached and cached[0] == through else (through, 0)
        if last_seq > counted_seq:
            for msg in await self._messages(key, counted_seq, last_seq):
                tokens += self._tokens(msg)
            counted_seq = last_seq
        self._counted[key] = (through, counted_seq, tokens)
        return tokens

    async def _fold(self, key: ConversationKey, state: SummaryState | None, last_seq: int) -> SummaryState | None:
        through = state.summarized_through_seq if state else 0
        messages = await self._messages(key, through, last_seq)
        keep = self.config.keep_messages
        fold = messages[: max(0, len(messages) - keep)]
        if not fold:
            return None
        new_through = fold[-1].seq or through
        inputs = [m for m in fold if not is_summary_message(m)]
        previous = state.text if state else None
        text = await self._summarize(previous, inputs) if inputs else (previous or "")
        try:
            version: int = await self.store.put_summary(key, text, new_through, state.version if state else 0)
        except ConflictError:
            self._counted.pop(key, None)
            return None
        kept = messages[len(fold) :]
        self._counted[key] = (new_through, last_seq, sum(self._tokens(m) for m in kept))
        return SummaryState(text, new_through, version)

    async def _summarize(self, previous: str | None, messages: list[Message]) -> str:
        try:
            return await asyncio.to_thread(
                self.summarizer.summarize, previous, messages, self.config.max_summary_tokens
            )
        except MemrayError:
            raise
        except Exception as exc:
            raise SummaryError(f"the summariser failed: {type(exc).__name__}: {exc}") from exc

    async def _messages(self, key: ConversationKey, after_seq: int, last_seq: int) -> list[Message]:
        rows: list[MessageRow] = await self.store.get_messages(key, MessageFilter(after_seq=after_seq))
        return [row_to_message(r) for r in rows if r.seq <= last_seq]

    def _tokens(self, msg: Message) -> int:
        return 0 if is_summary_message(msg) else message_tokens(msg, self.estimate_tokens)

    @asynccontextmanager
    async def _lock(self, key: ConversationKey) -> AsyncIterator[None]:
        """Serialise updates of one conversation; the lock is dropped once nobody holds or waits."""
        entry = self._locks.get(key)
        if entry is None:
            entry = self._locks[key] = _KeyLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]


class _KeyLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0
