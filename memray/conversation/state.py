"""`Conversation`: one virtual conversation actor's state and its synchronous logic.

A host keeps thousands of these; an idle one costs a few hundred bytes beyond the messages in
its buffer. Everything here is synchronous, so under the host's single event loop each call
runs whole without interleaving: seq assignment and buffer merges are atomic per conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from memray.conversation.buffer import MessageBuffer
from memray.conversation.persist import PersistChain
from memray.conversation.read_your_writes import Tail
from memray.embedding.pipeline import PendingItem
from memray.ids import ConversationKey
from memray.models import Message
from memray.models.wire import MessageList
from memray.store.base import ConversationSnapshot
from memray.store.deadletter import DeadLetter
from memray.store.rows import row_to_message

__all__ = ["Conversation", "overlay"]


class Conversation:
    """One conversation's state. Its persist chain is made on its first write (``make_chain``,
    shared by every conversation of a host): a record on the host's persist wheel, which holds
    the one timer and runs the writes (:mod:`memray.conversation.persist`)."""

    __slots__ = (
        "key",
        "buffer",
        "_chain",
        "_make_chain",
        "last_seq",
        "whole",
        "deleted",
        "unsummarized_tokens",
        "summarizing",
        "outside",
        "last_queued_add",
        "failed",
        "lost",
        "corrected",
        "unindexed",
        "indexed_stamp",
    )

    def __init__(
        self,
        key: ConversationKey,
        buffer: MessageBuffer,
        make_chain: Callable[[Conversation], PersistChain[Conversation]],
        last_seq: int,
        whole: bool,
    ) -> None:
        self.key = key
        self.buffer = buffer
        self._chain: PersistChain[Conversation] | None = None
        self._make_chain = make_chain
        self.last_seq = last_seq
        self.whole = whole  # the buffer was loaded with the whole conversation (fewer rows than its window)
        self.deleted = False
        self.unsummarized_tokens = -1  # unknown until the summary keeper has looked
        self.summarizing = False
        # ids re-added with the seq they already had (stored, or lost in a restart): they sit in
        # the buffer out of tail order until their write commits
        self.outside: set[str] | None = None
        # the last add queued for its turn to assign seqs (adds that need a store lookup queue up)
        self.last_queued_add: asyncio.Future[None] | None = None
        self.failed: list[DeadLetter] | None = None  # dead letters not yet reported to a flush
        self.lost: dict[str, int] | None = None  # id -> seq acknowledged before a restart, not stored
        self.corrected = 0  # ids the store kept under another seq than the one given here (see WritePath)
        # the read-your-writes tail (memray.conversation.read_your_writes): acknowledged, not seen indexed
        self.unindexed: dict[str, Message] | None = None
        self.indexed_stamp = 0

    @classmethod
    def loaded(
        cls,
        key: ConversationKey,
        snap: ConversationSnapshot,
        window: int,
        make_chain: Callable[[Conversation], PersistChain[Conversation]],
    ) -> Conversation:
        """The conversation as the store has it: its newest ``window`` messages buffered."""
        buffer = MessageBuffer(window)
        for row in snap.recent:
            buffer.put_durable(row_to_message(row))
        conv = cls(key, buffer, make_chain, snap.last_seq, whole=len(snap.recent) < window)
        if snap.last_seq == 0:
            conv.unsummarized_tokens = 0  # a new conversation: count as it grows, no store read
        return conv

    @property
    def chain(self) -> PersistChain[Conversation]:
        if self._chain is None:
            self._chain = self._make_chain(self)
            self._chain.last_durable_seq = self.last_seq  # everything before the first write is durable
        return self._chain

    @property
    def durable_seq(self) -> int:
        return self._chain.last_durable_seq if self._chain is not None else self.last_seq

    async def flush(self, timeout_s: float | None = None) -> None:
        if self._chain is not None:
            await self._chain.flush(timeout_s)

    async def close(self) -> None:
        if self._chain is not None:
            await self._chain.close()

    def hurry(self) -> None:
        """Write what is pending now, not after the debounce (:meth:`PersistChain.now`)."""
        if self._chain is not None:
            self._chain.now()

    def stop(self) -> None:
        """Stop persisting (see :meth:`PersistChain.stop`)."""
        if self._chain is not None:
            self._chain.stop()

    def add(self, messages: list[Message], known: dict[str, int] | None = None) -> list[int]:
        """Merge ``messages`` into the buffer, assigning seqs to new ids; schedule persistence.
        ``known``: ids the buffer does not hold that already have a seq (stored, or acknowledged
        before a restart) keep it, so a re-added or retried message is never given a second seq.

        Seqs are settled per message: an id the buffer holds when the call starts keeps its seq
        even if the call's earlier messages push it out of the window before its turn."""
        chain = self.chain
        held = {m.id: stored.seq or 0 for m in messages if (stored := self.buffer.get(m.id)) is not None}
        if held:
            known = {**held, **known} if known else held
        seqs = []
        for msg in messages:
            seq = None
            if self.buffer.target_of(msg) is None:
                seq = known.get(msg.id) if known else None
                if seq is None:
                    self.last_seq += 1
                else:
                    if self.outside is None:
                        self.outside = set()
                    self.outside.add(msg.id)
            stored = self.buffer.add(msg, self.last_seq if seq is None else seq)
            seqs.append(stored.seq or 0)
            if stored.text:  # the read-your-writes tail (memray.conversation.read_your_writes): until indexed
                if self.unindexed is None:
                    self.unindexed = {}
                self.unindexed[stored.id] = stored
        chain.schedule()
        return seqs

    def needs_lookup(self, messages: list[Message], retried: bool) -> list[str]:
        """Ids of ``messages`` that may already have a seq in the store: not held in the buffer,
        and either sent again by a retried call, or named by the caller (a re-add) in a
        conversation the buffer does not hold whole. Memray's own new ids need no lookup. A
        retry always asks: what its first attempt wrote may have reached the store after this
        host loaded the conversation (the store has it, or a ``lost`` dead letter with its seq)."""
        if not retried and self.whole and not self.buffer.evicted:
            return []
        return [
            m.id
            for m in messages
            if self.buffer.target_of(m) is None
            and not (self.lost and m.id in self.lost)
            and (retried or "id" in m.model_fields_set)
        ]

    def report(self, letters: list[DeadLetter]) -> None:
        """Keep dead letters for the next flush to raise."""
        if letters:
            self.failed = [*(self.failed or []), *letters]

    def take_failed(self) -> list[DeadLetter]:
        failed, self.failed = self.failed or [], None
        return failed

    # -- read-your-writes (memray.conversation.read_your_writes) ------------------------------
    def unindexed_tail(self, everything: bool = False) -> Tail:
        """The messages acknowledged here that the shard has not confirmed indexed (each with
        text, as the buffer holds it after a merge: :meth:`add` keeps them), in seq order, and
        the newest indexing stamp confirmed. ``everything``: every message held with text too
        (none of them is known to be indexed)."""
        tail: Iterable[Message] = self.unindexed.values() if self.unindexed else ()
        if everything:
            tail = {**{m.id: m for m in self.buffer.recent() if m.text}, **(self.unindexed or {})}.values()
        msgs = sorted(tail, key=lambda m: m.seq or 0)
        return Tail(MessageList(msgs), self.indexed_stamp)  # pickles as columns (memray.models.wire)

    def not_indexed(self, ids: Iterable[str]) -> None:
        """Messages held here that the shard may lack, though this incarnation did not add them
        (an earlier one committed them and stopped before they were indexed): into the tail.
        Ids the buffer does not hold (past its window) are found once indexed."""
        for message_id in ids:
            stored = self.buffer.get(message_id)
            if stored is not None and stored.text:
                if self.unindexed is None:
                    self.unindexed = {}
                self.unindexed[message_id] = stored

    def indexed(self, items: Iterable[PendingItem], stamp: int) -> None:
        """The shard confirmed ``items`` (upserted with ``stamp``): those whose text is the
        latest acknowledged leave the tail (a newer version stays until it is indexed too)."""
        self.indexed_stamp = max(self.indexed_stamp, stamp)
        tail = self.unindexed
        if not tail:
            return
        for item in items:
            msg = tail.get(item.doc_id)
            if msg is not None and msg.text == item.text:
                del tail[item.doc_id]
        if not tail:
            self.unindexed = None

    def covers(self, before_seq: int | None, limit: int | None) -> bool:
        """Whether the buffer alone holds the most recent ``limit`` messages before ``before_seq``
        (the buffer is a contiguous tail of the conversation)."""
        if self.outside:
            return False
        if self.whole and not self.buffer.evicted:
            return True
        if limit is None:
            return False
        if before_seq is None:
            return len(self.buffer) >= limit
        return sum(1 for m in self.buffer.recent() if (m.seq or 0) < before_seq) >= limit


def overlay(
    durable: list[Message], unsettled: list[Message], limit: int | None, keep: Callable[[Message], bool]
) -> list[Message]:
    """Durable messages from the store with the buffer's not-yet-durable ones laid over them."""
    by_id = {m.id: m for m in durable}
    for m in unsettled:
        if keep(m):
            by_id[m.id] = m
    out = sorted(by_id.values(), key=lambda m: m.seq or 0)
    return out[-limit:] if limit else out if limit is None else []
