"""Everything the README shows runs as written.

- Every ```python block runs in a fresh folder (nothing else on the path but this checkout) and
  exits 0. When an output block follows it (```text or ```, optionally after a line
  ``Output:``), what it prints must match, with wall-clock times (``2026-11-30 03:44 UTC``)
  compared as times.
- A block that cannot run here (it needs a Ray cluster, an API key...) is preceded by an HTML
  comment ``<!-- readme-test: skip: <why> -->``; nothing else is skipped, and the reason is required.
- Every ``$ memray ...`` line of a transcript parses with the real command-line parser.
- The two commands are there, CI runs the test one, and every CLI command is documented.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")

_BLOCK = re.compile(
    r"(?P<before>(?:<!--[^\n]*-->\n)?)```python\n(?P<code>.*?)```\n"
    r"(?:\n(?:Output:\n\n)?```(?:text)?\n(?P<out>.*?)```\n)?",
    re.S,
)
_SKIP = re.compile(r"<!-- readme-test: skip: (?P<why>\S.*?) -->")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})? UTC")


def python_blocks() -> list[tuple[str, str, str | None, str | None]]:
    """(id, code, expected output or None, reason to skip or None) for each ```python block."""
    out = []
    for match in _BLOCK.finditer(TEXT):
        line = TEXT.count("\n", 0, match.start("code"))
        skip = _SKIP.search(match.group("before") or "")
        out.append((f"README.md:{line}", match.group("code"), match.group("out"), skip.group("why") if skip else None))
    return out


BLOCKS = python_blocks()


def test_every_python_block_is_found():
    assert len(BLOCKS) == TEXT.count("```python\n") >= 4


@pytest.mark.parametrize("where,code,expected,skip", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_readme_python_block_runs_as_written(tmp_path, where, code, expected, skip):
    if skip is not None:
        pytest.skip(f"{where}: {skip}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{where} failed:\n{out.stderr[-3000:]}"
    if expected is not None:
        assert _TIME.sub("<time>", out.stdout) == _TIME.sub("<time>", expected), f"{where} printed something else"


def test_only_blocks_that_cannot_run_here_are_skipped():
    for where, _, _, skip in BLOCKS:
        if skip is not None:
            assert re.search(r"cluster|API key|network|GPU", skip), (
                f"{where}: {skip!r} is not a reason it cannot run here"
            )


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
