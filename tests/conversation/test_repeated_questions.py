"""A context shows a text once: copies of a question asked again and again are not recalled,
so they cannot crowd out the message that answers it, however many there are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import memray

QUESTION = "Remind me, which animals do I keep at home?"


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "tail"])
def test_a_question_asked_again_and_again_does_not_crowd_out_its_answer(
    tmp_path: Path, indexed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """...and the context searches once: its search asks for one hit per text, so the copies are
    one hit (before, they filled its hits, and it searched again, deeper, with every copy more)."""
    from memray.conversation.recall import Recall

    depths: list[int] = []
    recall_many = Recall._recall_many

    async def counted(self: Recall, reads: Any, recent: Any, extras: Any, depth: int = 1) -> Any:
        depths.append(depth)
        return await recall_many(self, reads, recent, extras, depth)

    monkeypatch.setattr(Recall, "_recall_many", counted)
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
        assert depths == [1]
        shown = {m.text for m in ctx.messages if m.id not in ctx.recalled_ids}  # the recent ones, as they are
        assert QUESTION in shown and not shown & set(recalled) and len(set(recalled)) == len(recalled)


def test_a_failed_deeper_recall_keeps_the_first_and_says_degraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search whose hits are all texts the context shows already searches again, deeper. The
    shard's hits are of distinct texts, so that is rare (copies split between the shard and the
    tail, messages deleted meanwhile): here every first search is taken to be cut short."""
    from memray.conversation import recall
    from memray.conversation.recall import DEEPER, Recall

    recall_many = Recall._recall_many
    monkeypatch.setattr(recall, "_cut_short", lambda read, found, picked: True)

    async def failing_when_deeper(self: Recall, reads: Any, recent: Any, extras: Any, depth: int = 1) -> Any:
        if depth == DEEPER:
            raise RuntimeError("a shard went away")
        return await recall_many(self, reads, recent, extras, depth)

    monkeypatch.setattr(Recall, "_recall_many", failing_when_deeper)
    with memray.open(config=memray.MemoryConfig(path=str(tmp_path), mode="inprocess", debounce_ms=60_000)) as mem:
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add({"role": "user", "content": "For the record, at home I keep a tortoise."})
        conv.add([{"role": "user", "content": QUESTION} for _ in range(13)])
        ctx = conv.context(QUESTION, limit=4, semantic_limit=3)
        assert ctx.degraded and "deeper search failed" in (ctx.reason or "") and "a shard went away" in ctx.reason
        # what the first recall found (the fact: the copies of the question are one hit) and the recent ones
        recalled = [m.text for m in ctx.messages if m.id in ctx.recalled_ids]
        assert recalled == ["For the record, at home I keep a tortoise."] and len(ctx.messages) == 5
