"""A context shows a text once: copies of a question asked again and again are not recalled,
so they cannot crowd out the message that answers it, however many there are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_a_failed_deeper_recall_keeps_the_first_and_says_degraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memray.conversation.recall import DEEPER, Recall

    recall_many = Recall._recall_many

    async def failing_when_deeper(self: Recall, reads: Any, recent: Any, extras: Any, depth: int = 1) -> Any:
        if depth == DEEPER:
            raise RuntimeError("a shard went away")
        return await recall_many(self, reads, recent, extras, depth)

    monkeypatch.setattr(Recall, "_recall_many", failing_when_deeper)
    with memray.open(config=memray.MemoryConfig(path=str(tmp_path), mode="inprocess", debounce_ms=60_000)) as mem:
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add({"role": "user", "content": "For the record, at home I keep a tortoise."})
        conv.add([{"role": "user", "content": QUESTION} for _ in range(13)])
        ctx = conv.context(QUESTION, limit=4, semantic_limit=3)  # cut short: every hit a copy
        assert ctx.degraded and "deeper search failed" in (ctx.reason or "") and "a shard went away" in ctx.reason
        assert ctx.recalled_ids == [] and len(ctx.messages) == 4  # the recent ones, as the first recall left them
