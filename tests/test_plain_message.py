"""The edge's fast path for the plain message dict (``{"role", "content", "id"}``) builds exactly
what the pydantic path builds, and leaves every other input, valid or not, to that path."""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memray.errors import ValidationError
from memray.models import Message, coerce_message
from memray.models import messages as records

_texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", "hello", "日本語", "a\ud800b", "x" * 60, "tab\there", "\x00"]),
)
_values = st.one_of(
    _texts, st.none(), st.integers(), st.floats(allow_nan=True), st.lists(st.text(max_size=3), max_size=2)
)
_roles = st.one_of(st.sampled_from(["user", "assistant", "system", "tool", "User", "bot", ""]), _values)
_ids = st.one_of(
    st.sampled_from(["m-1", "", "x" * 256, "x" * 257, "a b", "a\nb", "日本", "\u200b", "a\udc80"]), _values
)


@st.composite
def _dicts(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.integers(0, 9)):  # now and then without a role
        out["role"] = draw(_roles)
    if draw(st.integers(0, 9)):
        out["content"] = draw(st.one_of(_texts, _values))
    if draw(st.booleans()):
        out["id"] = draw(_ids)
    if not draw(st.integers(0, 5)):  # now and then a field the fast path leaves to pydantic
        key = draw(st.sampled_from(["parts", "metadata", "created_at", "seq", "colour"]))
        out[key] = draw(_values)
    return out


def _outcome(value: dict[str, Any], max_chars: int) -> tuple[str, Any]:
    try:
        msg = coerce_message(value, max_chars)
    except ValidationError as exc:
        return "error", (type(exc), str(exc))
    dumped = msg.model_dump()
    if "id" not in value:
        assert dumped.pop("id") and msg.id != coerce_message(value, max_chars).id  # a new id each time
    dumped.pop("created_at")
    return "message", (type(msg), dumped, msg.model_fields_set, [p.model_fields_set for p in msg.parts])


@settings(max_examples=600, deadline=None)
@given(_dicts(), st.sampled_from([10, 1_000_000]))
# each check of the fast path, found wanting by this test before it was there (or by hand):
@example({"role": "user", "content": "hi", "id": None}, 10)  # id given as None: pydantic refuses it
@example({"role": "user", "content": "x" * 11}, 10)  # over the cap
@example({"role": "user", "content": "a\ud800b"}, 10)  # a lone surrogate: not UTF-8
@example({"role": "user", "content": "hi", "id": "a\nb"}, 10)  # a control character in the id
@example({"role": "user", "content": "hi", "id": "x" * 257}, 10)  # an id too long
@example({"role": "bot", "content": "hi"}, 10)
@example({"role": "user", "content": 3}, 10)
def test_the_fast_path_builds_what_pydantic_builds_and_rejects_nothing_itself(value: dict[str, Any], cap: int) -> None:
    fast = _outcome(value, cap)
    with mock.patch.object(records, "_plain_message", return_value=None):
        slow = _outcome(value, cap)
    assert fast == slow


def test_the_plain_dict_takes_the_fast_path() -> None:
    # (the property above would pass if it were never taken)
    msg = records._plain_message({"id": "m1", "role": "user", "content": "hi"}, 100)
    assert isinstance(msg, Message) and msg.text == "hi" and msg.model_fields_set == {"id", "role", "parts"}
    assert records._plain_message({"role": "user", "content": "hi", "metadata": {}}, 100) is None
