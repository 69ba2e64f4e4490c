"""A context shows a text once: copies of a question asked again and again are not recalled,
so they cannot crowd out the message that answers it, however many there are."""

from __future__ import annotations

from pathlib import Path

import pytest

import memray

QUESTION = "Remind me, which animals do I keep at home?"


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "tail"])
def test_a_question_asked_again_and_again_does_not_crowd_out_its_answer(tmp_path: Path, indexed: bool) -> None:
    debounce = 50 if indexed else 60_000  # a minute: nothing reaches a shard, the tail answers
    with memray.open(config=memray.MemoryConfig(path=str(tmp_path), mode="inprocess", debounce_ms=debounce)) as mem:
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add({"role": "user", "content": "For the record, at home I keep a tortoise."})
        for day in range(12):  # more copies of the question than a context's search asks for
            conv.add(
                [
                    {"role": "user", "content": QUESTION},
                    {"role": "assistant", "content": f"Noted for day {day}."},
                    {"role": "user", "content": f"Today (day {day}) I tidied the garden and read."},
                ]
            )
        if indexed:
            mem.flush()
        conv.add({"role": "user", "content": QUESTION})
        ctx = conv.context(QUESTION, limit=4, semantic_limit=3)
        recalled = [m.text for m in ctx.messages if m.id in ctx.recalled_ids]
        assert any("tortoise" in text for text in recalled), recalled
        shown = {m.text for m in ctx.messages if m.id not in ctx.recalled_ids}  # the recent ones, as they are
        assert QUESTION in shown and not shown & set(recalled) and len(set(recalled)) == len(recalled)
