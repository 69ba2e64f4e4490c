"""``python -m benchmarks.soak`` in its short form (one minute of kills, a few agents), on the
test session's Ray, so the chaos soak does not rot and its promises are checked in every run:
nothing acknowledged durably is lost, nothing is stored twice or at another seq, every buffered
loss is named, reads see their own writes, an erased user is gone, a fork holds what was acked."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.soak import main

pytestmark = pytest.mark.ray


def test_one_minute_of_kills_loses_nothing_silently(ray_session: None, tmp_path: Path) -> None:
    line = main(
        ["--minutes", "1", "--kill-every", "10", "--agents", "6", "--baseline-s", "5", "--sample-s", "5"]
        + ["--dir", str(tmp_path)]
    )
    assert line["kills"] >= 3 and line["kills_not_recovered"] == 0, line["kills_by_role"]
    assert line["acked"] > 100 and line["acked_durable"] > 0, line
    assert line["lost_durable"] == line["duplicated"] == line["seq_mismatch"] == 0, line
    assert line["unnamed_losses"] == line["order_violations"] == line["reported_but_stored"] == 0, line
    assert line["lost_buffered"] == line["lost_in_dead_letters"] == line["lost_raised_to_caller"], line
    assert line["ryw_failed"] == 0 and line["read_your_writes"]["cross_reads"] == 0, line["read_your_writes"]
    assert line["read_your_writes"]["context_held"] > 0 and line["read_your_writes"]["search_held"] > 0
    assert line["deleted"] > 0 and line["deleted_still_stored"] == 0, line
    assert line["erasure"]["verified_clean"] and line["erasure"]["files_holding_id"] == [], line["erasure"]
    assert line["fork"]["ok"] and line["fork"]["fork_missing"] == line["fork"]["fork_seq_mismatch"] == 0, line["fork"]
    assert line["p99_recover_s"] is not None and line["p99_tick_ratio"] is not None, line
