"""The code shown in the README runs and prints what the README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_prints_what_it_shows(tmp_path):
    text = README.read_text()
    match = re.search(r"## Example\n\n```python\n(.*?)```\n\n```text\n(.*?)```", text, re.S)
    assert match, "README has an Example with a python block followed by its output"
    code, expected = match.groups()
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    text = README.read_text()
    ci = (README.parent / ".ci" / "run").read_text()
    test_cmd = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/python -m pytest"
    assert test_cmd in text
    assert test_cmd.replace(" -q", "") in ci.replace(" -q", "")
    assert ".venv/bin/memray demo" in text


def test_every_cli_command_is_documented():
    from memray.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = README.read_text()
    for name in commands:
        assert f"memray {name}" in text, f"`memray {name}` is not in the README"
