"""``python -m benchmarks.restart_micro`` at tiny size, so it does not rot. It starts Ray of its
own (the setting it compares is one of the whole Ray), so it runs as a separate process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.docs import ROOT


@pytest.mark.long
def test_restart_micro_times_a_retried_call_against_ray_restarting_the_actor() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.restart_micro", "--rounds", "1", "--init-s", "0", "--variants", "memray"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    [line] = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
    figures = line["memray"]
    assert line["benchmark"] == "restart_micro" and figures["death_info_wait_ms"] == 0 and figures["held"]
    assert figures["alive_s"]["max"] > 0 and figures["answered_s"]["max"] >= figures["alive_s"]["max"] - 0.5
    assert figures["failed_calls"]["max"] >= 1  # the call in flight at the kill failed: a restart was met
