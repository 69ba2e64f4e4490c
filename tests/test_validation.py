"""Input the store cannot hold is rejected at the door: one ValidationError naming the field,
nothing acknowledged, nothing written. Both modes run the same table of poison inputs."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import memray
from memray.errors import InvalidIdError, ValidationError
from memray.ids import MAX_ID_CHARS, validate_id
from memray.models import Message, check_message, coerce_message
from memray.service.entries import coerce_entries
from memray.validation import check_finite, check_text, json_text

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
LONE = "a\ud800b"


def _circular() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["self"] = d
    return d


# (what, message, field the error must name)
POISON_MESSAGES: list[tuple[str, dict[str, Any], str]] = [
    ("created_at inf", {"role": "user", "content": "x", "created_at": float("inf")}, "created_at"),
    ("created_at -inf", {"role": "user", "content": "x", "created_at": float("-inf")}, "created_at"),
    ("created_at nan", {"role": "user", "content": "x", "created_at": float("nan")}, "created_at"),
    ("created_at text", {"role": "user", "content": "x", "created_at": "yesterday"}, "created_at"),
    ("surrogate in content", {"role": "user", "content": LONE}, "parts[0].text"),
    ("surrogate in a text part", {"role": "user", "content": [{"type": "text", "text": "\udfff"}]}, "parts[0].text"),
    (
        "surrogate in reasoning",
        {"role": "assistant", "content": [{"type": "reasoning", "text": LONE}]},
        "parts[0].text",
    ),
    ("surrogate in id", {"id": LONE, "role": "user", "content": "x"}, "message.id"),
    ("control char in id", {"id": "a\x00", "role": "user", "content": "x"}, "message.id"),
    ("empty id", {"id": "", "role": "user", "content": "x"}, "message.id"),
    ("long id", {"id": "m" * (MAX_ID_CHARS + 1), "role": "user", "content": "x"}, "message.id"),
    ("surrogate in metadata value", {"role": "user", "content": "x", "metadata": {"k": LONE}}, "metadata['k']"),
    ("surrogate in metadata key", {"role": "user", "content": "x", "metadata": {LONE: 1}}, "metadata"),
    (
        "surrogate nested in metadata",
        {"role": "user", "content": "x", "metadata": {"a": [1, {"b": LONE}]}},
        "metadata['a'][1]['b']",
    ),
    ("nan in metadata", {"role": "user", "content": "x", "metadata": {"score": float("nan")}}, "metadata['score']"),
    ("inf in metadata", {"role": "user", "content": "x", "metadata": {"score": float("inf")}}, "metadata['score']"),
    ("object in metadata", {"role": "user", "content": "x", "metadata": {"o": object()}}, "metadata['o']"),
    ("set in metadata", {"role": "user", "content": "x", "metadata": {"s": {1, 2}}}, "metadata['s']"),
    (
        "datetime in metadata",
        {"role": "user", "content": "x", "metadata": {"t": datetime.datetime(2024, 1, 1)}},
        "metadata['t']",
    ),
    ("bytes in metadata", {"role": "user", "content": "x", "metadata": {"b": b"raw"}}, "metadata['b']"),
    ("circular metadata", {"role": "user", "content": "x", "metadata": _circular()}, "metadata"),
    ("metadata not a dict", {"role": "user", "content": "x", "metadata": ["a"]}, "metadata"),
    (
        "nan in tool input",
        {
            "role": "assistant",
            "content": [{"type": "tool", "tool_call_id": "t1", "tool_name": "f", "input": {"x": float("nan")}}],
        },
        "parts[0]['input']['x']",
    ),
    (
        "surrogate in tool output",
        {
            "role": "assistant",
            "content": [{"type": "tool", "tool_call_id": "t1", "tool_name": "f", "state": "output", "output": LONE}],
        },
        "parts[0]['output']",
    ),
    (
        "surrogate in tool name",
        {"role": "assistant", "content": [{"type": "tool", "tool_call_id": "t1", "tool_name": LONE}]},
        "parts[0]['tool_name']",
    ),
    (
        "surrogate in tool call id",
        {"role": "assistant", "content": [{"type": "tool", "tool_call_id": LONE, "tool_name": "f"}]},
        "parts[0]['tool_call_id']",
    ),
    ("object in a data part", {"role": "user", "content": [{"type": "data", "data": object()}]}, "parts[0]"),
    (
        "inf in a data part",
        {"role": "user", "content": [{"type": "data", "data": [1.0, float("inf")]}]},
        "parts[0]['data'][1]",
    ),
    ("unknown role", {"role": "robot", "content": "x"}, "role"),
    ("unknown part type", {"role": "user", "content": [{"type": "video", "url": "x"}]}, "parts"),
    ("content and parts", {"role": "user", "content": "x", "parts": []}, "content"),
    ("content not text", {"role": "user", "content": 5}, "content"),
    ("unknown field", {"role": "user", "content": "x", "colour": "red"}, "colour"),
]

BAD_IDS = [
    LONE,
    "\udfff",
    "x\ud83d",
    "",
    "a\x00",
    "a\n",
    "\x7f",
    "i" * (MAX_ID_CHARS + 1),
    "日" * (MAX_ID_CHARS + 1),
    5,
    None,
]


@pytest.mark.parametrize("what,value,field", POISON_MESSAGES, ids=[p[0] for p in POISON_MESSAGES])
def test_a_message_the_store_cannot_hold_is_rejected_naming_its_field(
    what: str, value: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as err:
        coerce_message(value)
    assert field in err.value.field, (what, err.value.field, str(err.value))
    assert str(err.value).startswith(f"invalid {err.value.field}=")


@pytest.mark.parametrize("bad", BAD_IDS, ids=repr)
@pytest.mark.parametrize("field", ["app", "user_id", "conversation_id", "project_id", "session_id", "message.id"])
def test_bad_ids_are_rejected_cleanly_in_every_position(field: str, bad: object) -> None:
    with pytest.raises(InvalidIdError) as err:
        validate_id(field, bad)
    assert err.value.field == field
    assert "Error" not in type(err.value.__cause__).__name__ if err.value.__cause__ else True


def test_the_longest_valid_ids_are_valid_in_any_script() -> None:
    for value in ("a" * MAX_ID_CHARS, "日" * MAX_ID_CHARS, "😀" * MAX_ID_CHARS, "é" * MAX_ID_CHARS):
        assert validate_id("app", value) == value


def test_a_message_changed_after_construction_is_checked_again() -> None:
    msg = Message(role="user", parts=[{"type": "text", "text": "fine"}])  # type: ignore[list-item]
    msg.created_at = float("inf")  # no validate_assignment: check_message catches it
    with pytest.raises(ValidationError, match="created_at"):
        check_message(msg)
    built = Message.model_construct(id=LONE, role="user", parts=[], created_at=1.0, metadata={})
    with pytest.raises(InvalidIdError):
        coerce_message(built)


def test_metadata_counts_against_the_size_cap() -> None:
    msg = {"role": "user", "content": "x" * 50, "metadata": {"blob": "y" * 80}}
    assert coerce_message(msg, max_chars=200)
    with pytest.raises(ValidationError, match="cap of 100"):
        coerce_message(msg, max_chars=100)


def test_plain_json_and_unicode_pass() -> None:
    msg = coerce_message(
        {
            "role": "user",
            "content": "日本語 😀 é",
            "created_at": 0,
            "metadata": {"n": 1, "f": 0.5, "b": True, "none": None, "l": [1, "二"], "d": {"k": "v"}},
        }
    )
    assert msg.text == "日本語 😀 é"
    assert check_text("t", "😀") == "😀" and check_finite("t", 3) == 3.0
    assert json_text("m", {"a": [1, 2.5]}) == '{"a": [1, 2.5]}'


@pytest.mark.parametrize(
    "entry,field",
    [
        ({"content": LONE}, "entries[0].content"),
        ({"content": "x", "author": LONE}, "entries[0].author"),
        ({"content": "x", "timestamp": float("nan")}, "timestamp"),
        ({"content": "x", "metadata": {"k": float("inf")}}, "entries[0].metadata['k']"),
        ({"content": "x", "metadata": {"k": object()}}, "entries[0].metadata['k']"),
        ({"content": [{"type": "text", "text": LONE}]}, "entries[0].content[0]"),
        ({"id": LONE, "content": "x"}, "entry.id"),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_entries_the_store_cannot_hold_are_rejected(entry: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as err:
        coerce_entries([entry])
    assert field in err.value.field, err.value.field


# -- end to end, both modes: nothing acknowledged, nothing written, the conversation goes on -------


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    m = memray.open(
        config=memray.MemoryConfig(
            path=str(tmp_path_factory.mktemp(f"val-{request.param}")),
            mode=request.param,
            hosts=1,
            shards=1,
            debounce_ms=10,
        )
    )
    yield m
    m.close(terminate=True)


def test_poison_is_rejected_before_anything_is_acknowledged(mem: memray.Memory) -> None:
    conv = mem.conversation(user_id="u", conversation_id=uuid.uuid4().hex, app="val")
    assert conv.add({"role": "user", "content": "before"}, durable=True) == [1]
    for _what, value, _field in POISON_MESSAGES:
        with pytest.raises(ValidationError):
            conv.add([{"role": "user", "content": "good, but in a batch with poison"}, value])
        with pytest.raises(ValidationError):
            conv.add(value, durable=True)
    conv.flush()  # returns: nothing wedged
    assert conv.add({"role": "user", "content": "after"}, durable=True) == [2]  # no seq was consumed
    rows = mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))
    assert [(r.seq, r.text) for r in rows] == [(1, "before"), (2, "after")]


def test_poison_ids_and_conversation_fields_are_rejected_in_both_modes(mem: memray.Memory) -> None:
    for kwargs in (
        dict(user_id=LONE, conversation_id="c"),
        dict(user_id="u", conversation_id=LONE),
        dict(user_id="u", conversation_id="c", app=LONE),
    ):
        with pytest.raises(InvalidIdError):
            mem.conversation(**kwargs)  # type: ignore[arg-type]
    conv = mem.conversation(user_id="u", conversation_id=uuid.uuid4().hex, app="val")
    with pytest.raises(ValidationError, match="title"):
        conv.create(title=LONE)
    with pytest.raises(ValidationError, match="metadata"):
        conv.create(metadata={"k": float("nan")})
    conv.create(title="ok")
    with pytest.raises(ValidationError, match="metadata_patch"):
        conv.update(metadata={"k": LONE})
    with pytest.raises(ValidationError, match="content"):
        conv.working_memory.update(LONE, mode="replace")
    svc = mem.memory_service
    with pytest.raises(ValidationError):
        svc.add_entry("val", "u", {"content": LONE})
    with pytest.raises(InvalidIdError):
        svc.add_entries("val", "u", ["x"], session_id=LONE, replace_session=True)
    with pytest.raises(InvalidIdError):
        svc.for_project(LONE).add_entry("val", "u", "x")
    assert conv.info() is not None and conv.info().title == "ok"  # type: ignore[union-attr]
