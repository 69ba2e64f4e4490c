"""The demo's simulation: questions come once the facts have left the recent window, and only
recall counts as a hit."""

from __future__ import annotations

import asyncio

import memray
from memray.simulation import FIRST_QUESTION, RECENT, asks, simulate, summary_line


def test_questions_start_once_the_facts_left_the_recent_window():
    # at turn t's context() the conversation holds messages 0..2t (the question is 2t); the facts
    # are messages 0 and 1, outside the RECENT most recent (2t+1-RECENT .. 2t) once 2t > RECENT
    assert 2 * FIRST_QUESTION > RECENT
    assert [t for t in range(10) if asks(t)] == [3, 5, 7, 9]


def test_recall_brings_back_facts_from_outside_the_window(tmp_path):
    async def indexed(turn, handles, seqs):  # each turn: wait until every message is searchable
        await mem.aflush()
        assert await mem.await_indexed(60)

    with memray.open(str(tmp_path), mode="inprocess", hosts=1, shards=1, debounce_ms=10) as mem:
        report = asyncio.run(simulate(mem, agents=4, turns=6, on_ack=indexed, progress=False))
    assert report.verified
    assert report.recall_questions == 4 * 2  # turns 3 and 5
    assert report.recall_hit_rate == 1.0
    assert "recall 100% of 8 questions about facts outside the 4 recent messages" in summary_line(report)


def test_too_few_turns_measure_no_recall(tmp_path):
    with memray.open(str(tmp_path), mode="inprocess", hosts=1, shards=1) as mem:
        report = asyncio.run(simulate(mem, agents=3, turns=FIRST_QUESTION, progress=False))
    assert report.recall_questions == 0 and report.recall_hit_rate is None
    assert "recall not measured" in summary_line(report)


def test_the_verification_finds_missing_moved_and_unexpected_messages(tmp_path):
    from memray.simulation import _verify

    with memray.open(str(tmp_path), mode="inprocess", hosts=2, shards=1) as mem:
        convs = [mem.conversation(user_id=f"a{i}", conversation_id="main") for i in range(5)]
        acked = {c.key: {} for c in convs}
        for c in convs:
            for n, seq in zip(("x", "y", "z"), c.add([{"id": n, "role": "user", "content": n} for n in "xyz"])):
                acked[c.key][n] = seq
        mem.flush()
        assert asyncio.run(_verify(mem, acked)) == (0, 0)
        acked[convs[0].key]["never-added"] = 4  # missing
        acked[convs[1].key]["x"] = 9  # stored at another seq
        del acked[convs[2].key]["y"]  # in the store, not acknowledged
        del acked[convs[3].key]["x"]  # the oldest row: still read (one row past what was acknowledged)
        assert asyncio.run(_verify(mem, acked)) == (2, 2)
