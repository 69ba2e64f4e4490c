"""The example simulation (examples/town.py) runs at a tiny size and its branches diverge: the
script exits 1 unless only the forked branch where the party was announced remembers it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "town.py"


def test_town_example_forks_into_branches_that_remember_different_things(tmp_path):
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--agents", "3", "--ticks", "6", "--fork-at", "3", "--path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "branch A (no party): 0/3 agents recall a party" in out.stdout
    assert "branch B (party announced at hour 3): 3/3 agents recall it" in out.stdout
    assert (tmp_path / "branch-b" / "history.duckdb").exists() and (tmp_path / "trunk" / "history.duckdb").exists()


def test_the_readme_simulation_example_prints_what_it_shows(tmp_path):
    import re

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## Simulations", 1)[1]
    match = re.search(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, re.S)
    assert match, "the Simulations section has a python block followed by its output"
    code, expected = match.groups()
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
