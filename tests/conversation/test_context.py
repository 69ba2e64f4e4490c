from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memray.conversation.context import (
    WORKING_MEMORY_MARKER,
    assemble,
    merge_messages,
    tool_units,
    working_memory_message,
)
from memray.conversation.summary import SUMMARY_MARKER, message_tokens, summary_message
from memray.errors import ValidationError
from memray.models import Message, ToolPart
from memray.text import estimate_tokens

# The checkout this test runs from, for the subprocesses it starts.
REPO_ROOT = str(Path(__file__).resolve().parents[2])


def msg(seq: int, text: str = "", role: str = "user") -> Message:
    return Message(id=f"m{seq}", role=role, parts=text or f"message number {seq}", seq=seq)  # type: ignore[arg-type]


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


RECENT = [msg(s) for s in (7, 8, 9, 10)]
RECALLED = [msg(3), msg(8), msg(1), msg(3)]  # rank order; m8 is also recent, m3 repeats


# -- merge strategies and dedupe -------------------------------------------------------------
@pytest.mark.parametrize(
    ("merge", "expected"),
    [
        ("append", ["m7", "m8", "m9", "m10", "m3", "m1"]),
        ("prepend", ["m3", "m1", "m7", "m8", "m9", "m10"]),
        ("interleave", ["m1", "m3", "m7", "m8", "m9", "m10"]),
    ],
)
def test_merge_strategies_dedupe_and_keep_rank(merge: Any, expected: list[str]) -> None:
    ctx = assemble(RECENT, RECALLED, merge=merge)
    assert ids(ctx.messages) == expected
    assert ctx.recalled_ids == ["m3", "m1"]  # rank order, duplicates gone
    assert ctx.summary is None and ctx.working_memory is None and not ctx.degraded


def test_interleave_puts_messages_without_seq_last() -> None:
    loose = Message(id="x", role="user", parts="no seq")
    assert ids(merge_messages([msg(5)], [loose, msg(2)], "interleave")) == ["m2", "m5", "x"]


def test_bad_merge_and_budget_are_validation_errors() -> None:
    with pytest.raises(ValidationError) as info:
        assemble(RECENT, [], merge="zip")  # type: ignore[arg-type]
    assert info.value.field == "merge"
    with pytest.raises(ValidationError) as info:
        assemble(RECENT, [], token_budget=0)
    assert info.value.field == "token_budget"


def test_summary_and_working_memory_lead_as_system_messages() -> None:
    stale_summary = summary_message("old summary")
    stale_wm = working_memory_message("old block")
    ctx = assemble(
        [stale_summary, stale_wm, *RECENT],
        [stale_summary],
        summary="- Ann lives in Oslo",
        working_memory="WORKING MEMORY\n<current_context>x</current_context>",
        degraded=True,
        reason="shard 1 down",
    )
    first, second, *rest = ctx.messages
    assert first.role == "system" and first.metadata[SUMMARY_MARKER] is True
    assert first.text == "<agent_summary>\n- Ann lives in Oslo\n</agent_summary>"
    assert second.role == "system" and second.metadata[WORKING_MEMORY_MARKER] is True
    assert "<current_context>x</current_context>" in second.text
    assert ids(rest) == ids(RECENT)  # the stale injected messages are not fed back
    assert ctx.summary == "- Ann lives in Oslo"
    assert ctx.degraded and ctx.reason == "shard 1 down"


# -- token budget ----------------------------------------------------------------------------
def cost(messages: list[Message]) -> int:
    return sum(message_tokens(m, estimate_tokens) for m in messages)


def test_budget_drops_lowest_ranked_recalled_then_oldest_recent() -> None:
    recalled = [msg(2), msg(1)]
    full = assemble(RECENT, recalled)
    one_less = cost(full.messages) - 1
    assert ids(assemble(RECENT, recalled, token_budget=one_less).messages) == ["m7", "m8", "m9", "m10", "m2"]
    three_less = cost(full.messages) - cost([msg(1), msg(2)]) - 1
    assert ids(assemble(RECENT, recalled, token_budget=three_less).messages) == ["m8", "m9", "m10"]
    tiny = assemble(RECENT, recalled, token_budget=1, summary="s")
    assert ids(tiny.messages) == ["memray-agent-summary", "m10"]  # newest and summary always kept
    assert tiny.recalled_ids == []


def tool_call(seq: int, call_id: str) -> Message:
    return Message(
        id=f"m{seq}",
        role="assistant",
        seq=seq,
        parts=[ToolPart(tool_call_id=call_id, tool_name="weather", input={"city": "Oslo"})],
    )


def tool_result(seq: int, call_id: str) -> Message:
    return Message(
        id=f"m{seq}",
        role="tool",
        seq=seq,
        parts=[ToolPart(tool_call_id=call_id, tool_name="weather", state="output", output="sunny")],
    )


def test_budget_never_splits_a_tool_call_from_its_result() -> None:
    recent = [msg(1), tool_call(2, "t1"), tool_result(3, "t1"), msg(4), msg(5)]
    # Room for everything but m1 and a little: dropping m2 must take m3 with it.
    budget = cost(recent) - cost([msg(1)]) - 1
    kept = ids(assemble(recent, [], token_budget=budget).messages)
    assert kept == ["m4", "m5"]
    # The newest message's tool unit is kept whole, even over budget.
    recent = [msg(1), tool_call(2, "t2"), tool_result(3, "t2")]
    assert ids(assemble(recent, [], token_budget=1).messages) == ["m2", "m3"]


def test_tool_units_span_recalled_and_recent() -> None:
    merged = [tool_result(9, "a"), msg(10), tool_call(4, "a"), tool_call(5, "b")]
    assert tool_units(merged) == [[0, 2], [1], [0, 2], [3]]


@st.composite
def conversations(draw: Any) -> tuple[list[Message], list[Message], int]:
    n = draw(st.integers(1, 14))
    messages: list[Message] = []
    seq = 0
    while len(messages) < n:
        seq += 1
        if draw(st.booleans()):
            messages += [tool_call(seq, f"c{seq}"), tool_result(seq + 1, f"c{seq}")]
            seq += 1
        else:
            messages.append(msg(seq, "word " * draw(st.integers(1, 30))))
    split = draw(st.integers(0, len(messages) - 1))
    older, recent = messages[:split], messages[split:]
    recalled = draw(st.permutations(older)) if older else []
    return recent, list(recalled), draw(st.integers(1, 400))


@settings(max_examples=150, deadline=None)
@given(conversations(), st.sampled_from(["append", "prepend", "interleave"]))
def test_budget_properties(case: tuple[list[Message], list[Message], int], merge: Any) -> None:
    recent, recalled, budget = case
    out = assemble(recent, recalled, merge=merge, token_budget=budget).messages
    kept = set(ids(out))
    assert recent[-1].id in kept  # the newest message stays
    for call_id in {c for m in recent + recalled for c in m.tool_call_ids}:
        holders = {m.id for m in recent + recalled if call_id in m.tool_call_ids}
        assert holders <= kept or not (holders & kept), f"tool pair {call_id} split"
    newest_unit = {m.id for m in recent + recalled if set(m.tool_call_ids) & set(recent[-1].tool_call_ids)}
    if cost(out) > budget:  # over budget only when nothing else could go
        assert kept <= newest_unit | {recent[-1].id}
    # The order of what survives is the order of the unbudgeted merge.
    full = ids(assemble(recent, recalled, merge=merge).messages)
    assert ids(out) == [i for i in full if i in kept]


# -- the token estimate ----------------------------------------------------------------------
def test_cjk_estimate_exceeds_chars_over_four() -> None:
    chinese = "记忆子系统负责把对话消息存下来、取回来,并在取回时做得更聪明。"
    assert estimate_tokens(chinese) >= len(chinese) * 0.9 > len(chinese) / 4
    english = "The memory subsystem stores conversation messages and recalls them later."
    assert len(english) / 6 < estimate_tokens(english) < len(english) / 2
    assert estimate_tokens("") == 0
    assert estimate_tokens("a b c d") == 4  # at least one per word
    assert estimate_tokens("日本語とEnglish混合") == 4 + 2 + 2  # 日本語と, English, 混合


def test_cores_import_without_ray_or_openai() -> None:
    import os
    import subprocess
    import sys

    code = (
        "import sys, memray.conversation.context, memray.conversation.summary, "
        "memray.conversation.working_memory; "
        "print(sorted(m for m in ('ray', 'openai') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"


def _estimate_word_by_word(text: str) -> int:
    """The token estimate's rule (memray.text) applied one word at a time: the reference."""
    import re

    from memray.text import _WORD_CHAR, CJK_RANGES

    total = 0
    for cjk, word, _ in re.findall(r"([" + CJK_RANGES + r"]+)|(" + _WORD_CHAR + r"+)|(\S)", text):
        total += len(cjk) if cjk else (len(word) + 3) // 4 if word else 1
    return total


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab9 .,!-_\t\n日本語한글カナéß٣😀©"), max_size=60) | st.text(max_size=40))
def test_the_token_estimate_counts_what_its_rule_says(text: str) -> None:
    assert estimate_tokens(text) == _estimate_word_by_word(text)
