"""`MessageBatch`: the messages of an ``add_many`` as columns, for the trip to a host.

Ray pickles call arguments with cloudpickle, whose per-object hook runs in Python for every
model, part, dict and tuple: a batch of validated :class:`Message` objects cost ~40 µs per
message to pickle and unpickle (``benchmarks/write_path_micro.py``), more than the host spent on
it. As columns — one list per field, a message of one text part by its text (most messages: a
JSON round trip of each cost ~2 µs more), other parts and the metadata as JSON — the same batch
pickles in ~1 µs per message; encoding costs ~2 µs in the caller and decoding ~5-10 µs in the
host, which builds the messages without validating them again (they were validated once, at the
edge, by the facade).

A batch whose parts or metadata are not plain JSON (any value ``json.dumps`` refuses) travels as
the objects themselves, unchanged: encoding never alters a message.

One row of those columns is also how a process keeps a message for long without the objects
(:func:`pack_message`: read-your-writes keeps what it added that way).
"""

from __future__ import annotations

import json
from typing import Any

from memray.ids import ConversationKey, pack_namespaces, unpack_namespaces
from memray.models.messages import FIELDS, PART_TYPES, Message, Part, TextPart, construct

__all__ = [
    "MessageBatch",
    "MessageList",
    "RefList",
    "encode_messages",
    "decode_messages",
    "Packed",
    "pack_message",
    "unpack_message",
]

_ALL = FIELDS[Message]
_ALL_BUT_ID = _ALL - {"id"}  # memray chose the id: no store lookup needed (Conversation.needs_lookup)


def _parts_column(msg: Message) -> str | bytes:
    """A message's parts in its column: a lone text part as its text (most messages: no JSON
    either way), any other parts as JSON bytes (the type tells them apart)."""
    parts = msg.parts
    if len(parts) == 1 and type(parts[0]) is TextPart:
        return parts[0].text
    return json.dumps([p.model_dump() for p in parts], ensure_ascii=False).encode()


def _parts(column: str | bytes) -> list[Part]:
    if type(column) is str:
        return [construct(TextPart, {"type": "text", "text": column}, FIELDS[TextPart])]
    return [construct(PART_TYPES[p["type"]], p, FIELDS[PART_TYPES[p["type"]]]) for p in json.loads(column)]


def _metadata_column(msg: Message) -> str:
    return json.dumps(msg.metadata, ensure_ascii=False) if msg.metadata else ""


def encode_messages(msgs: list[Message]) -> tuple[list[Any], ...] | None:
    """``msgs`` as columns, or None if a part or metadata value is not plain JSON."""
    try:
        return (
            [m.id for m in msgs],
            [m.role for m in msgs],
            [_parts_column(m) for m in msgs],
            [m.created_at for m in msgs],
            [_metadata_column(m) for m in msgs],
            [m.seq for m in msgs],
            [m.sim_time for m in msgs],
            [m.importance for m in msgs],
            [m.agent_id for m in msgs],
            [m.sub_agent_id for m in msgs],
            ["id" in m.model_fields_set for m in msgs],
        )
    except (TypeError, ValueError):
        return None


def _from_row(
    mid: str,
    role: str,
    parts: str | bytes,
    created: float,
    meta: str,
    seq: int | None,
    sim: float | None,
    imp: float | None,
    agent: str | None,
    sub: str | None,
    named: bool,
) -> Message:
    """The message of one row of columns, built without revalidation."""
    return construct(
        Message,
        {
            "id": mid,
            "role": role,
            "parts": _parts(parts),
            "created_at": created,
            "metadata": json.loads(meta) if meta else {},
            "seq": seq,
            "sim_time": sim,
            "importance": imp,
            "agent_id": agent,
            "sub_agent_id": sub,
        },
        _ALL if named else _ALL_BUT_ID,
    )


def decode_messages(columns: tuple[list[Any], ...]) -> list[Message]:
    """The messages :func:`encode_messages` made columns of, built without revalidation."""
    return list(map(_from_row, *columns))


#: A message as one tuple of plain values (:func:`pack_message`).
Packed = tuple[str, str, str | bytes, float, str, float | None, float | None, str | None, str | None, bool]


def pack_message(msg: Message) -> Packed | None:
    """``msg`` (its seq aside) as a tuple of strings, numbers and None: what a process keeps of
    a message for long costs one object, which the cyclic collector stops tracking at its first
    pass, instead of the message, its parts and their dicts, which it traverses in every
    collection of their generation. None if a part or metadata value is not plain JSON."""
    try:
        return (
            msg.id,
            msg.role,
            _parts_column(msg),
            msg.created_at,
            _metadata_column(msg),
            msg.sim_time,
            msg.importance,
            msg.agent_id,
            msg.sub_agent_id,
            "id" in msg.model_fields_set,
        )
    except (TypeError, ValueError):
        return None


def unpack_message(packed: Packed, seq: int | None) -> Message:
    """The message :func:`pack_message` packed, with ``seq``."""
    mid, role, parts, created, meta, sim, imp, agent, sub, named = packed
    return _from_row(mid, role, parts, created, meta, seq, sim, imp, agent, sub, named)


class MessageList(list[Message]):
    """A list of messages that pickles as columns (a host's answers: recent messages, tails)."""

    def __reduce__(self) -> tuple[Any, ...]:
        columns = encode_messages(self)
        if columns is None:
            return (MessageList, (list(self),))
        return (_message_list, (columns,))


def _message_list(columns: tuple[list[Any], ...]) -> MessageList:
    return MessageList(decode_messages(columns))


class MessageBatch:
    """``[(key, [message, ...]), ...]`` as columns (see the module docstring)."""

    __slots__ = ("keys", "counts", "columns", "objects")

    def __init__(
        self,
        keys: list[tuple[str, str, str]],
        counts: list[int],
        columns: tuple[list[Any], ...] | None,
        objects: list[tuple[ConversationKey, list[Message]]] | None = None,
    ) -> None:
        self.keys = keys
        self.counts = counts
        self.columns = columns
        self.objects = objects

    @classmethod
    def encode(cls, items: list[tuple[ConversationKey, list[Message]]]) -> MessageBatch:
        keys = [(k.app, k.user_id, k.conversation_id) for k, _ in items]
        counts = [len(msgs) for _, msgs in items]
        columns = encode_messages([m for _, msgs in items for m in msgs])
        return cls(keys, counts, columns, None if columns is not None else items)

    def decode(self) -> list[tuple[ConversationKey, list[Message]]]:
        if self.columns is None:
            return self.objects or []
        flat = decode_messages(self.columns)
        out: list[tuple[ConversationKey, list[Message]]] = []
        i = 0
        for key, count in zip(self.keys, self.counts):
            out.append((ConversationKey(*key), flat[i : i + count]))
            i += count
        return out

    def __len__(self) -> int:
        return sum(self.counts)


class RefList(list[Any]):
    """Refs ``(namespace, doc_id, ...)`` — every item of a shard, say, which leveling a shard with
    the store compares — that pickle as columns with each namespace once (a conversation's
    namespace leads all its messages' refs): as the tuples, every ``Namespace`` went through the
    pickler's per-object hook in Python. 80,000 refs of 10,000 namespaces through cloudpickle and
    back: 265 -> 48 ms (``benchmarks/refs_wire_micro.py``). Every item has the same length; the
    namespaces come back as ``Namespace``."""

    def __reduce__(self) -> tuple[Any, ...]:
        unique, at = pack_namespaces(ref[0] for ref in self)
        rest = list(zip(*self))[1:]
        return (_ref_list, (unique, at, rest))


def _ref_list(namespaces: list[tuple[str, ...]], at: list[int], rest: list[tuple[Any, ...]]) -> RefList:
    return RefList(zip(unpack_namespaces(namespaces, at), *rest))
