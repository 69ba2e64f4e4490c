"""Rows as the store takes and returns them: flat tuples that pickle small and turn into Arrow
columns without per-row dicts. Converters to and from the public records live here too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np

from memray.ids import ConversationKey, Namespace, pack_namespaces, unpack_namespaces
from memray.models import MemoryEntry, Message, Part, Role, TextPart
from memray.models.messages import FIELDS, PART_TYPES, construct

__all__ = [
    "MessageRow",
    "EntryRow",
    "EmbeddingRow",
    "RowList",
    "message_to_row",
    "row_to_message",
    "message_payload",
    "payload_extras",
    "payload_message",
    "entry_to_row",
    "row_to_entry",
]


class MessageRow(NamedTuple):
    app: str
    user_id: str
    conversation_id: str
    id: str
    seq: int
    role: str
    parts_json: str
    metadata_json: str
    created_at: float
    text: str
    sim_time: float | None = None  # simulated seconds (memray.sim_time)
    importance: float | None = None  # in [0, 1]
    agent_id: str | None = None
    sub_agent_id: str | None = None


class EntryRow(NamedTuple):
    app: str
    user_id: str
    id: str
    session_id: str | None
    project_id: str | None
    author: str
    content_json: str  # JSON of the entry's content (a string or a list of parts)
    metadata_json: str
    timestamp: float
    text: str
    sim_time: float | None = None
    importance: float | None = None


class EmbeddingRow(NamedTuple):
    """One stored vector. ``namespace`` + ``doc_id`` identify the item (message or entry id)."""

    namespace: Namespace
    doc_id: str
    model_id: str
    vector: (
        Any  # float32[dim], L2-normalised; None: a recomputable model's (the item is marked embedded, no vector kept)
    )


R = TypeVar("R", bound=tuple[Any, ...])


class RowList(list[R]):
    """Rows of one named-tuple class (:class:`MessageRow`, :class:`EmbeddingRow`) that pickle as
    columns, on their way to the store. Pickled as they are, every row, and every ``Namespace``
    in one, goes through the pickler's per-object hook in Python, and every vector is a buffer
    of its own. Through cloudpickle and back, per row (``benchmarks/write_path_micro.py``,
    ``store_rows_us``): a message row 5.2 -> 2.0 µs, an embedding row 7.4 -> 2.3 µs, one with
    its 384 floats 21 -> 4.3 µs (each namespace once, the vectors one matrix). Rows of mixed
    classes, or vectors that do not stack, pickle as they are. Unpickled, it is a ``RowList`` of
    the same rows."""

    def __reduce__(self) -> tuple[Any, ...]:
        cls = type(self[0]) if self else None
        if cls is None or not hasattr(cls, "_make") or any(type(r) is not cls for r in self):
            return (RowList, (list(self),))
        return (_row_list, (cls, [_pack(column) for column in zip(*self)]))


def _pack(column: tuple[Any, ...]) -> tuple[str, Any]:
    """One column of rows: namespaces each once, vectors of one shape as one matrix, else as is."""
    first = column[0]
    if type(first) is Namespace and all(type(v) is Namespace for v in column):
        return "namespaces", pack_namespaces(column)
    if type(first) is np.ndarray and all(
        type(v) is np.ndarray and v.shape == first.shape and v.dtype == first.dtype for v in column
    ):
        return "matrix", np.stack(column)
    return "values", column


def _unpack(kind: str, packed: Any) -> Any:
    if kind == "namespaces":
        return unpack_namespaces(*packed)
    return list(packed) if kind == "matrix" else packed  # (a matrix's rows: views of it)


def _row_list(cls: Any, columns: list[tuple[str, Any]]) -> RowList[Any]:
    return RowList(map(cls._make, zip(*(_unpack(kind, packed) for kind, packed in columns))))


_json_string = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(x, ensure_ascii=False), without its set-up


def _parts_json(parts: list[Part]) -> str:
    """A message's parts as the store keeps them: a JSON array of the parts' JSON dumps. One text
    part (most messages) is written as ``json.dumps`` writes it, without a pydantic dump (10 -> 3
    µs a row)."""
    if len(parts) == 1 and type(parts[0]) is TextPart:
        return '[{"type": "text", "text": ' + _json_string(parts[0].text) + "}]"
    return json.dumps([p.model_dump(mode="json") for p in parts], ensure_ascii=False)


def message_to_row(key: ConversationKey, msg: Message) -> MessageRow:
    assert msg.seq is not None, "seq is assigned before a message is persisted"
    return MessageRow(
        key.app,
        key.user_id,
        key.conversation_id,
        msg.id,
        msg.seq,
        msg.role,
        _parts_json(msg.parts),
        json.dumps(msg.metadata, ensure_ascii=False, default=str) if msg.metadata else "{}",
        msg.created_at,
        msg.text,
        msg.sim_time,
        msg.importance,
        msg.agent_id,
        msg.sub_agent_id,
    )


def message_payload(row: MessageRow) -> str:
    """The message as JSON (what ``Message.model_validate_json`` reads), assembled from the row's
    already-serialised parts and metadata instead of serialising the message a second time."""
    head = (
        f'{{"id":{_json_string(row.id)},"role":"{row.role}","parts":{row.parts_json},'
        f'"created_at":{row.created_at!r},"metadata":{row.metadata_json},"seq":{row.seq}'
    )
    if row.sim_time is None and row.importance is None and row.agent_id is None and row.sub_agent_id is None:
        return head + "}"  # most messages (3.2 -> 1.4 us a payload: benchmarks/write_path_micro.py)
    return head + "".join(f',"{name}":{_json_string(value)}' for name, value in payload_extras(row)) + "}"


def payload_extras(row: MessageRow) -> Iterator[tuple[str, Any]]:
    """The optional fields a payload holds: those of ``row`` that are set, in their order."""
    for name, value in (
        ("sim_time", row.sim_time),
        ("importance", row.importance),
        ("agent_id", row.agent_id),
        ("sub_agent_id", row.sub_agent_id),
    ):
        if value is not None:
            yield name, value


def payload_message(payload: str) -> Message:
    """The message a payload (:func:`message_payload`, a shard hit's JSON) holds, constructed
    without validating it again: it was validated on its way into memray. A payload of another
    shape (an old snapshot's) is validated as usual."""
    data = json.loads(payload)
    try:
        parts = []
        for p in data["parts"]:
            cls = PART_TYPES[p["type"]]
            if p.keys() != FIELDS[cls]:
                raise KeyError(p["type"])
            parts.append(construct(cls, p, FIELDS[cls]))
        get = data.get
        values = {
            "id": data["id"],
            "role": data["role"],
            "parts": parts,
            "created_at": data["created_at"],
            "metadata": get("metadata") or {},
            "seq": get("seq"),
            "sim_time": get("sim_time"),
            "importance": get("importance"),
            "agent_id": get("agent_id"),
            "sub_agent_id": get("sub_agent_id"),
        }
    except (KeyError, TypeError):
        return Message.model_validate(data)
    return construct(Message, values, FIELDS[Message])


def row_to_message(row: MessageRow) -> Message:
    """The message a stored row holds. Rows were validated on their way into the store, so the
    records are constructed without validating again."""
    parts = [
        PART_TYPES[p["type"]].model_construct(FIELDS[PART_TYPES[p["type"]]], **p) for p in json.loads(row.parts_json)
    ]
    return Message.model_construct(
        FIELDS[Message],
        id=row.id,
        role=cast(Role, row.role),
        parts=parts,
        created_at=row.created_at,
        metadata=json.loads(row.metadata_json),
        seq=row.seq,
        sim_time=row.sim_time,
        importance=row.importance,
        agent_id=row.agent_id,
        sub_agent_id=row.sub_agent_id,
    )


def entry_to_row(
    app: str, user_id: str, entry: MemoryEntry, session_id: str | None, project_id: str | None
) -> EntryRow:
    content: Any = (
        entry.content if isinstance(entry.content, str) else [p.model_dump(mode="json") for p in entry.content]
    )
    return EntryRow(
        app,
        user_id,
        entry.id,
        session_id,
        project_id,
        entry.author,
        json.dumps(content, ensure_ascii=False),
        json.dumps(entry.metadata, ensure_ascii=False, default=str),
        entry.timestamp,
        entry.text,
        entry.sim_time,
        entry.importance,
    )


def row_to_entry(row: EntryRow) -> MemoryEntry:
    return MemoryEntry.model_validate(
        {
            "id": row.id,
            "content": json.loads(row.content_json),
            "author": row.author,
            "timestamp": row.timestamp,
            "metadata": json.loads(row.metadata_json),
            "sim_time": row.sim_time,
            "importance": row.importance,
        }
    )
