"""The examples run at a tiny size: the simulation (examples/town.py), whose branches diverge
(the script exits 1 unless only the forked branch where the party was announced remembers it;
what it prints is checked by tests/test_docs.py, from docs/getting-started.md), and the tick as
a user writes it (examples/tick.py), which exits 1 if a recall missed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "town.py"


def test_town_example_forks_into_branches_that_remember_different_things_and_starts_over_when_run_again(tmp_path):
    for _ in range(2):  # the second run replaces the first one's folders
        out = subprocess.run(
            [sys.executable, str(EXAMPLE), "--agents", "3", "--ticks", "6", "--fork-at", "3", "--path", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "forked at hour 3: 18 memories" in out.stdout
        assert "branch A (no party): 0/3 agents recall a party" in out.stdout
        assert "branch B (party announced at hour 3): 3/3 agents recall it" in out.stdout
        assert (tmp_path / "branch-b" / "history.duckdb").exists() and (tmp_path / "trunk" / "history.duckdb").exists()


def test_tick_example_recalls_every_fact_in_both_styles() -> None:
    tick = EXAMPLE.parent / "tick.py"
    for style in ("batches", "coroutines"):
        out = subprocess.run(
            [sys.executable, str(tick), "--mode", "inprocess", "--agents", "12", "--ticks", "12", "--style", style],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "tick 11: " in out.stdout and out.stdout.count("recalled 12/12") == 5  # ticks 3, 5, 7, 9, 11
