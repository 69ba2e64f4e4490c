"""``python -m benchmarks.call_watch`` at tiny size on the test session's Ray, so it does not rot:
every variant timed, the floor among them, the placement check and the watch's CPU cost."""

from __future__ import annotations

import argparse
import asyncio


def test_call_watch_times_watched_calls_against_a_ray_noop(ray_session: None) -> None:
    from benchmarks.call_watch import measure

    args = argparse.Namespace(calls=20, rounds=1, clients="1,4", checks=5, cpu_calls=100)
    result = asyncio.run(measure(args))
    assert set(result["clients"]) == {"1", "4"}
    for row in result["clients"].values():
        for name in ("floor", "unwatched", "watched"):
            assert row[name]["p50_ms"] > 0 and row[name]["calls_per_s"] > 0
        assert row["watched_p50_to_unwatched"] is not None and row["watched_p50_to_floor"] is not None
        assert [run["watched"]["n"] for run in row["rounds"]] == [20]
    assert result["placement_check"]["n"] == 5 and result["placement_check"]["p50_ms"] > 0
    assert result["cpu"]["watched_us"] > 0 and result["cpu"]["plain_await_us"] > 0
