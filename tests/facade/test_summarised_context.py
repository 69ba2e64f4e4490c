"""``context()`` of a summarised conversation: the summary instead of the messages it covers, and
the newest messages (``keep_messages``) even when the summary covers them, in both modes."""

from __future__ import annotations

import time

from tests.support.memories import fresh_conversation

APP = "summarised"


def test_context_leaves_out_what_the_summary_covers_but_keeps_the_newest(mem):
    conv = fresh_conversation(mem, APP)
    conv.add(
        [
            {
                "id": f"m{i}",
                "role": "user" if i % 2 else "assistant",
                "content": f"turn {i}: " + "many words about the harvest festival " * 3,
            }
            for i in range(1, 9)
        ],
        durable=True,
    )
    deadline = time.monotonic() + 60
    while conv.summary() is None and time.monotonic() < deadline:  # the summary is folded in the background
        time.sleep(0.05)
    state = mem.internals.run(mem.internals.deployment.stores.get_summary(conv.key))
    assert state is not None and state.summarized_through_seq == 6  # all but keep_messages=2 folded
    ctx = conv.context(limit=8)
    assert ctx.summary is not None and ctx.messages[0].id == "memray-agent-summary"
    assert [m.seq for m in ctx.messages[1:]] == [7, 8]  # seqs 1-6 are in the summary
    recalled = conv.context("turn 3 harvest", limit=8, semantic_limit=1)
    assert [m.seq for m in recalled.messages[1:3]] == [7, 8] and len(recalled.recalled_ids) == 1
    assert conv.context(limit=1).messages[1:] == ctx.messages[2:]  # fewer than keep_messages asked: the newest
