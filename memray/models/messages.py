"""Conversation records: messages and their parts, hits, contexts, conversation infos.

Records are pydantic v2 models. Input is parsed here, at the boundary; past it, code works with
these types and never with untyped dicts.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from typing import Annotated, Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memray.errors import MISSING, ValidationError
from memray.ids import validate_id
from memray.ranking import check_importance
from memray.sim_time import to_seconds
from memray.validation import check_finite, check_text, json_text

__all__ = [
    "Role",
    "TextPart",
    "ReasoningPart",
    "ToolPart",
    "DataPart",
    "Part",
    "Message",
    "MessageInput",
    "coerce_message",
    "check_message",
    "Hit",
    "Context",
    "ConversationInfo",
    "RetrievalMode",
    "MAX_CONTENT_CHARS",
    "ConversationOrder",
    "Scope",
    "Merge",
    "ToolState",
    "new_id",
    "construct",
    "PART_TYPES",
    "FIELDS",
]

Role = Literal["system", "user", "assistant", "tool"]
RetrievalMode = Literal["vector", "lexical", "hybrid"]
ConversationOrder = Literal["updated_desc", "updated_asc", "created_desc", "created_asc", "title_asc", "title_desc"]
Scope = Literal["conversation", "user"]  # of a search: one conversation, or all of the user's
Merge = Literal["append", "prepend", "interleave"]  # where context() puts recalled messages
ToolState = Literal["pending", "output", "error"]

#: Default cap on the characters of one message's parts; MemoryConfig.max_message_chars sets it.
MAX_CONTENT_CHARS = 1_000_000


M = TypeVar("M", bound=BaseModel)
_new = object.__new__
_set = object.__setattr__


def construct(cls: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """A pydantic record from values already valid, as unpickling builds one (what
    ``model_construct`` does, without its per-field default handling: ``values`` has every field)."""
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", fields_set)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj


class _Record(BaseModel):
    # NaN/inf stay themselves in JSON mode (pydantic would silently write null): validation
    # rejects them instead (memray.validation), so what is acknowledged is what is stored.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")


class TextPart(_Record):
    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_Record):
    type: Literal["reasoning"] = "reasoning"
    text: str


class ToolPart(_Record):
    """A tool call and, once it arrives, its result (merged by ``tool_call_id``)."""

    type: Literal["tool"] = "tool"
    tool_call_id: str
    tool_name: str
    input: Any = None
    state: ToolState = "pending"
    output: Any = None
    error: str | None = None


class DataPart(_Record):
    type: Literal["data"] = "data"
    name: str | None = None
    data: Any = None


Part = Annotated[TextPart | ReasoningPart | ToolPart | DataPart, Field(discriminator="type")]


def _now() -> float:
    return time.time()


_ID_PREFIX = os.urandom(8).hex()
_ID_COUNTER = itertools.count()


def _reseed_ids() -> None:  # a forked child must not repeat its parent's ids
    global _ID_PREFIX, _ID_COUNTER
    _ID_PREFIX, _ID_COUNTER = os.urandom(8).hex(), itertools.count()


os.register_at_fork(after_in_child=_reseed_ids)


def new_id() -> str:
    """A unique id: 64 random bits per process, then a counter (a uuid4 costs a syscall each)."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):08x}"


class Message(_Record):
    """One message of a conversation.

    ``seq`` is assigned by memray when the message is first added: strictly increasing per
    conversation, and the only order memray uses. ``created_at`` is Unix seconds (informational).
    Accepts ``content`` (a string or a list of parts) as an alias of ``parts``.

    For simulations (:mod:`memray.sim_time`, :mod:`memray.ranking`): ``sim_time`` is the simulation's clock (seconds, or
    a timezone-aware datetime, stored as seconds), ``importance`` a number in [0, 1];
    ``agent_id`` / ``sub_agent_id`` say which agent (and which of its sub-agents) wrote it.
    """

    id: str = Field(default_factory=new_id)
    role: Role
    parts: list[Part]
    created_at: float = Field(default_factory=_now)
    metadata: dict[str, Any] = Field(default_factory=dict)
    seq: int | None = None
    sim_time: float | None = None
    importance: float | None = None
    agent_id: str | None = None
    sub_agent_id: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _content_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "content" in data:
            data = dict(data)
            content = data.pop("content")
            if "parts" in data:
                raise ValidationError("content", content, "given together with parts", "pass one of them")
            data["parts"] = content
        if isinstance(data, dict) and isinstance(data.get("parts"), str):
            data = {**data, "parts": [{"type": "text", "text": data["parts"]}]}
        return data

    @field_validator("id")
    @classmethod
    def _valid_id(cls, v: str) -> str:
        return validate_id("message.id", v)

    @field_validator("created_at")
    @classmethod
    def _finite_time(cls, v: float) -> float:
        return check_finite("message.created_at", v)

    @field_validator("sim_time", mode="before")
    @classmethod
    def _sim_time(cls, v: Any) -> float | None:
        return to_seconds("message.sim_time", v)

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, v: Any) -> float | None:
        return check_importance("message.importance", v)

    @field_validator("agent_id", "sub_agent_id")
    @classmethod
    def _agent(cls, v: str | None, info: Any) -> str | None:
        return None if v is None else validate_id(f"message.{info.field_name}", v)

    @property
    def text(self) -> str:
        """The text that is embedded and indexed: text parts, tool names and tool outputs."""
        parts = self.parts
        if len(parts) == 1 and type(parts[0]) is TextPart:  # most messages: read for every tail scored
            return parts[0].text
        chunks: list[str] = []
        for part in self.parts:
            if isinstance(part, TextPart):
                chunks.append(part.text)
            elif isinstance(part, ToolPart):
                chunks.append(part.tool_name)
                if part.output is not None:
                    chunks.append(part.output if isinstance(part.output, str) else json.dumps(part.output, default=str))
        return "\n".join(c for c in chunks if c)

    @property
    def tool_call_ids(self) -> list[str]:
        return [p.tool_call_id for p in self.parts if isinstance(p, ToolPart)]


MessageInput = Message | dict[str, Any]

#: Each part class by its ``type``.
PART_TYPES: dict[str, type[Part]] = {"text": TextPart, "reasoning": ReasoningPart, "tool": ToolPart, "data": DataPart}
#: Each record class's field names: one set shared by every record :func:`construct` builds with
#: every field set (from a stored row, a wire column, a plain dict). Pydantic copies it before
#: changing it (model_copy), and memray never assigns to a record's attribute, so sharing it is
#: safe; it saves two 216-byte sets per message, a quarter of what an idle conversation's
#: buffered messages cost.
FIELDS: dict[type[BaseModel], set[str]] = {cls: set(cls.model_fields) for cls in (Message, *PART_TYPES.values())}


def coerce_message(value: MessageInput, max_chars: int = MAX_CONTENT_CHARS) -> Message:
    """Parse one message given as a :class:`Message` or a dict; raise ValidationError if bad."""
    if isinstance(value, Message):
        msg = value
    elif isinstance(value, dict):
        plain = _plain_message(value, max_chars)
        if plain is not None:
            return plain
        try:
            msg = Message.model_validate(value)
        except ValidationError:
            raise
        except Exception as exc:  # pydantic's error: translate, naming the field
            raise _translate(exc, value) from exc
    else:
        raise ValidationError(
            "message",
            value,
            f"must be a Message or a dict, got {type(value).__name__}",
            "e.g. {'role': 'user', 'content': 'hello'}",
        )
    return check_message(msg, max_chars)


_ROLES = frozenset(get_args(Role))
_PLAIN_KEYS = (frozenset(("role", "content")), frozenset(("id", "role", "content")))
_NO_ID = object()
_GIVEN = {False: {"role", "parts"}, True: {"id", "role", "parts"}}  # fields set, by whether id is given


def _plain_message(value: dict[str, Any], max_chars: int) -> Message | None:
    """The message of the dict most callers pass, ``{"role": ..., "content": "...", "id": ...}``
    (``id`` optional), built without pydantic: exactly what :func:`coerce_message`'s pydantic path
    builds, values, defaults and fields set alike, in ~3 µs instead of ~15 µs (20,000 of them in
    a tick of 10,000 agents). None for any other shape or any invalid value: that path
    validates it and names what is wrong."""
    if value.keys() not in _PLAIN_KEYS:  # (a keys view compares to a set by its members)
        return None
    role, content, mid = value["role"], value["content"], value.get("id", _NO_ID)
    if type(role) is not str or role not in _ROLES or type(content) is not str or len(content) > max_chars:
        return None
    named = mid is not _NO_ID
    try:  # the rules pydantic's path applies (its validator and check_message)
        if named:
            validate_id("message.id", mid)
        check_text("message.parts[0].text", content)
    except ValidationError:
        return None
    part = construct(TextPart, {"type": "text", "text": content}, FIELDS[TextPart])
    return construct(
        Message,
        {
            "id": mid if named else new_id(),
            "role": role,
            "parts": [part],
            "created_at": time.time(),
            "metadata": {},
            "seq": None,
            "sim_time": None,
            "importance": None,
            "agent_id": None,
            "sub_agent_id": None,
        },
        set(_GIVEN[named]),
    )


def check_message(msg: Message, max_chars: int = MAX_CONTENT_CHARS) -> Message:
    """``msg`` if the store can hold it as it is: a valid id, a finite ``created_at``, text that
    encodes as UTF-8, parts and metadata that are strict JSON, and at most ``max_chars``
    characters of parts and metadata together. Else a ValidationError naming the field.
    (A Message built with ``model_construct`` or changed after construction is checked too.)"""
    validate_id("message.id", msg.id)
    check_finite("message.created_at", msg.created_at)
    size = 0
    for i, part in enumerate(msg.parts):
        if isinstance(part, (TextPart, ReasoningPart)):
            check_text(f"message.parts[{i}].text", part.text)
            size += len(part.text)
        else:
            size += len(json_text(f"message.parts[{i}]", _dump(f"message.parts[{i}]", part)))
    if msg.metadata:
        if not isinstance(msg.metadata, dict):
            raise ValidationError("message.metadata", msg.metadata, "must be a dict")
        size += len(json_text("message.metadata", msg.metadata))
    if size > max_chars:
        raise ValidationError(
            "message.parts",
            f"<{size} characters>",
            f"exceeds the cap of {max_chars} characters (parts and metadata)",
            "split the content or raise MemoryConfig.max_message_chars",
        )
    return msg


def _dump(field: str, part: BaseModel) -> Any:
    try:
        return part.model_dump(mode="json")
    except Exception as exc:  # pydantic cannot serialise a value in it (an arbitrary object)
        raise ValidationError(
            field,
            part,
            f"is not JSON-serialisable: {exc}",
            "pass plain JSON values: str, int, float, bool, None, list, dict",
        ) from None


def _translate(exc: Exception, value: Any) -> ValidationError:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        original = first.get("ctx", {}).get("error")
        if isinstance(original, ValidationError):  # ours, raised inside a validator: keep it
            return original
        loc = ".".join(str(p) for p in first.get("loc", ())) or "message"
        field = "content" if loc == "parts" and "parts" not in value else loc  # parts arrive as content
        kind = first.get("type")
        if kind == "missing":  # pydantic's input is then the whole message, not the field's value
            return ValidationError(f"message.{field}", MISSING, "is required", _MESSAGE_HINTS.get(field, ""))
        if kind == "extra_forbidden":
            return ValidationError(
                f"message.{field}",
                first.get("input"),
                "unknown message field",
                "a message has id, role, content (or parts), created_at and metadata; put the rest in metadata",
            )
        problem = str(first.get("msg", exc)).replace("Input should be", "must be", 1)
        return ValidationError(f"message.{field}", first.get("input", value), problem)
    return ValidationError("message", value, str(exc))


_MESSAGE_HINTS = {
    "role": "give role: 'system', 'user', 'assistant' or 'tool'",
    "content": "give content: a string, or a list of parts such as {'type': 'text', 'text': '...'}",
}


class Hit(_Record):
    """One search result. ``score`` is in [0, 1]; see docs/scoring.md for its exact meaning."""

    message: Message
    score: float
    conversation_id: str


class Context(_Record):
    """What an agent prompt needs, assembled by ``conversation.context()``."""

    messages: list[Message]
    summary: str | None = None
    working_memory: str | None = None
    recalled_ids: list[str] = Field(default_factory=list)
    degraded: bool = False
    reason: str | None = None


class ConversationInfo(_Record):
    app: str
    user_id: str
    conversation_id: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: float
    updated_at: float
    last_seq: int = 0
