"""What the README must say, beyond its examples (which tests/test_docs.py runs, as it runs those
of every page under docs/).

- Every ``$ memray ...`` line of a transcript parses with the real command-line parser.
- The two commands are there, CI runs the test one, and every CLI command is documented.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")


def transcript_commands() -> list[str]:
    return [line[2:] for line in TEXT.splitlines() if line.startswith("$ memray ")]


def test_transcript_commands_parse():
    from memray.cli import build_parser

    commands = transcript_commands()
    assert any(c.startswith("memray demo") for c in commands) and any(c.startswith("memray stats") for c in commands)
    for command in commands:
        argv = shlex.split(command)[1:]
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --version / --help print and exit 0
            assert exc.code == 0, command
            continue
        assert callable(args.func), command


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    ci = (ROOT / ".ci" / "run").read_text().replace(" -q", "")
    test_cmd = "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest"
    assert test_cmd in TEXT
    # CI runs each step of it, in order, with the ruff checks before the tests
    ci_steps = [step.strip() for line in ci.splitlines() if not line.startswith("#") for step in line.split("&&")]
    wanted = [step.strip() for step in test_cmd.split("&&")]
    wanted[-1:-1] = [".venv/bin/ruff check .", ".venv/bin/ruff format --check ."]
    assert [step for step in ci_steps if step in wanted] == wanted
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/memray demo" in TEXT


def test_readme_says_where_the_demo_data_goes():
    assert "**deletes at the end**" in TEXT and "--keep" in TEXT and "memray demo DIR" in TEXT


def test_every_cli_command_is_documented():
    from memray.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:
        assert f"memray {name}" in TEXT, f"`memray {name}` is not in the README"


def test_readme_says_how_long_the_tests_take():
    assert re.search(r"The tests take about \d+ minutes", TEXT)


def test_the_test_run_shows_a_line_per_test_file():
    """pytest as configured (pyproject.toml) prints each file's name and its progress as it goes,
    not one anonymous line of dots."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_ids.py", "tests/test_errors.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:]
    for name in ("tests/test_ids.py", "tests/test_errors.py"):
        assert re.search(rf"^{re.escape(name)} \.+\s+\[ *\d+%\]$", out.stdout, re.M), out.stdout[-3000:]
