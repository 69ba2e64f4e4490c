"""`MessageBuffer`: a conversation's recent messages and the ids waiting to be persisted.

Merging rules:

- A new id gets the ``seq`` it is given and is appended.
- An existing id is an idempotent update: ``seq`` and ``created_at`` stay. For an assistant
  message the incoming parts are merged into the stored ones (streamed steps accumulate; a tool
  part replaces the part with the same ``tool_call_id``; a part already present is not repeated);
  for other roles the parts are replaced. Metadata is merged.
- A ``tool`` message whose parts are all tool results for calls the buffer knows is merged into
  the calling message (state → ``output``/``error``), found in O(1) by ``tool_call_id``.

Past ``window`` the oldest messages are evicted, but never one that is pending or in flight
(drained, its write not yet committed): until the store holds a message, the buffer does, so
reads that overlay the buffer on the store never miss an acknowledged message.
"""

from __future__ import annotations

from dataclasses import dataclass

from memray.models import Message, Part, ToolPart

__all__ = ["MessageBuffer", "BufferCheckpoint"]


@dataclass(frozen=True, slots=True)
class BufferCheckpoint:
    messages: tuple[Message, ...]
    pending: frozenset[str]


class MessageBuffer:
    __slots__ = ("_window", "_messages", "_pending", "_inflight", "_calls", "evicted", "_ordered", "_last_seq")

    def __init__(self, window: int = 32) -> None:
        self._window = window
        self._messages: dict[str, Message] = {}  # id -> message, in insertion order
        # Whether insertion order is seq order (each new id came with a higher seq than the last):
        # then the recent messages are the last ones inserted, with no sort. Messages are added in
        # seq order in practice; one that is not (a durable one placed late) makes reads sort.
        self._ordered = True
        self._last_seq = 0
        # Dicts used as ordered sets: an empty dict costs 64 bytes, an empty set 216, and an idle
        # conversation holds two of them.
        self._pending: dict[str, None] = {}
        self._inflight: dict[str, None] = {}
        self._calls: dict[str, str] = {}  # tool_call_id -> id of the message holding the call
        self.evicted = False  # whether any message has left the buffer (it no longer holds all)

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    @property
    def writing_count(self) -> int:
        """Messages drained into a write whose commit has not answered yet."""
        return len(self._inflight)

    @property
    def settled(self) -> bool:
        """Nothing pending or in flight: every message held is durable."""
        return not self._pending and not self._inflight

    def get(self, message_id: str) -> Message | None:
        return self._messages.get(message_id)

    def target_of(self, msg: Message) -> str | None:
        """The id an incoming message merges into, or None if it is new to the buffer."""
        if msg.id in self._messages:
            return msg.id
        if (
            msg.role == "tool"
            and msg.parts
            and all(isinstance(p, ToolPart) and p.tool_call_id in self._calls for p in msg.parts)
        ):
            return self._calls[msg.parts[0].tool_call_id]  # type: ignore[union-attr]
        return None

    def add(self, msg: Message, new_seq: int) -> Message:
        """Add or merge ``msg``; ``new_seq`` is used only if it is new. Returns the stored message."""
        target = self.target_of(msg)
        if target is None:
            stored = msg.model_copy(update={"seq": new_seq})
        elif target == msg.id:
            stored = _merge_same_id(self._messages[target], msg)
        else:
            stored = _merge_tool_results(self._messages[target], msg)
        self._put(stored)
        return stored

    def put_durable(self, msg: Message) -> None:
        """Place an already-durable message (loaded from the store): not pending."""
        self._place(msg)
        self._index_calls(msg)
        self._evict()

    def _put(self, stored: Message) -> None:
        self._place(stored)
        self._pending[stored.id] = None
        self._index_calls(stored)
        self._evict()

    def _place(self, msg: Message) -> None:
        seq = msg.seq or 0
        old = self._messages.get(msg.id)
        if old is None:
            if seq < self._last_seq:
                self._ordered = False
            self._last_seq = max(self._last_seq, seq)
        elif (old.seq or 0) != seq:  # (an update keeps its seq: this is a durable one placed again)
            self._ordered = False
        self._messages[msg.id] = msg

    def _index_calls(self, msg: Message) -> None:
        for call_id in msg.tool_call_ids:
            self._calls[call_id] = msg.id

    def drain(self) -> list[Message]:
        """The pending messages, in seq order, once: they move from pending to in flight."""
        out = [self._messages[i] for i in self._pending]
        self._inflight.update(self._pending)
        self._pending = {}
        out.sort(key=lambda m: m.seq or 0)
        return out

    def settle(self, ids: list[str]) -> None:
        """The write of ``ids`` committed: they are durable and may be evicted."""
        for i in ids:
            self._inflight.pop(i, None)
        self._evict()

    def mark_pending(self, ids: list[str]) -> None:
        """The write of ``ids`` failed: pending again (ids no longer held are ignored)."""
        for i in ids:
            self._inflight.pop(i, None)
            if i in self._messages:
                self._pending[i] = None

    def unsettled(self) -> list[Message]:
        """Messages the store may not hold yet (pending or in flight), in seq order."""
        ids = {**self._pending, **self._inflight}
        return sorted((self._messages[i] for i in ids), key=lambda m: m.seq or 0)

    def discard(self, message_id: str) -> None:
        """Forget a message entirely (it is durable elsewhere and out of the tail)."""
        self._pending.pop(message_id, None)
        self._inflight.pop(message_id, None)
        msg = self._messages.pop(message_id, None)
        if msg is not None:
            self._unindex_calls(msg)
            self.evicted = True

    def recent(self, limit: int | None = None) -> list[Message]:
        """The messages held, in seq order; the last ``limit`` of them when it is given."""
        if limit == 0:
            return []
        held = self._messages.values()
        msgs = list(held) if self._ordered else sorted(held, key=lambda m: m.seq or 0)
        return msgs if limit is None else msgs[-limit:]

    def checkpoint(self) -> BufferCheckpoint:
        """A snapshot; in-flight messages count as pending (their write may not land)."""
        return BufferCheckpoint(tuple(self._messages.values()), frozenset({**self._pending, **self._inflight}))

    def restore(self, cp: BufferCheckpoint) -> None:
        self._messages = {m.id: m for m in cp.messages}
        seqs = [m.seq or 0 for m in cp.messages]
        self._ordered = all(a < b for a, b in zip(seqs, seqs[1:]))
        self._last_seq = max(seqs, default=0)
        self._pending = dict.fromkeys(cp.pending)
        self._inflight = {}
        self._calls = {}
        for m in cp.messages:
            self._index_calls(m)

    def _evict(self) -> None:
        """Drop the oldest durable messages past the window. The oldest held is durable but for a
        write in trouble, so the walk stops after a message or two: a full buffer (every
        conversation past ``window`` messages) pays per add what an empty one does, where listing
        every held message not pending made each add and settle cost the window."""
        excess = len(self._messages) - self._window
        if excess <= 0:
            return
        pending, inflight = self._pending, self._inflight
        gone: list[str] = []
        for mid in self._messages:
            if mid not in pending and mid not in inflight:
                gone.append(mid)
                if len(gone) == excess:
                    break
        for mid in gone:
            self._unindex_calls(self._messages.pop(mid))
            self.evicted = True

    def _unindex_calls(self, msg: Message) -> None:
        for call_id in msg.tool_call_ids:
            if self._calls.get(call_id) == msg.id:
                del self._calls[call_id]


def _merge_same_id(old: Message, new: Message) -> Message:
    parts = _merge_parts(old.parts, new.parts) if old.role == "assistant" else list(new.parts)
    return old.model_copy(update={"parts": parts, "metadata": {**old.metadata, **new.metadata}})


def _merge_tool_results(call_msg: Message, result_msg: Message) -> Message:
    return call_msg.model_copy(update={"parts": _merge_parts(call_msg.parts, result_msg.parts)})


def _merge_parts(old: list[Part], new: list[Part]) -> list[Part]:
    parts = list(old)
    tool_at = {p.tool_call_id: i for i, p in enumerate(parts) if isinstance(p, ToolPart)}
    for part in new:
        if isinstance(part, ToolPart) and part.tool_call_id in tool_at:
            parts[tool_at[part.tool_call_id]] = _merge_tool(parts[tool_at[part.tool_call_id]], part)  # type: ignore[arg-type]
        elif part not in parts:
            if isinstance(part, ToolPart):
                tool_at[part.tool_call_id] = len(parts)
            parts.append(part)
    return parts


def _merge_tool(call: ToolPart, update: ToolPart) -> ToolPart:
    return call.model_copy(
        update={
            "state": update.state if update.state != "pending" else call.state,
            "input": update.input if update.input is not None else call.input,
            "output": update.output if update.output is not None else call.output,
            "error": update.error if update.error is not None else call.error,
        }
    )
