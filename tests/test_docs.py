"""The documentation: every example the README and the pages under ``docs/`` show runs as written
and prints what is shown beside it, twice in a row in the same folder (:mod:`tests.support.docs`
says how); the site builds with ``mkdocs build --strict`` (so a broken link, a missing image or a
docstring the API reference cannot render fails the suite), every page is in its navigation, and
the pages are written for users."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import memray
from benchmarks.render import BLOCKS, COMMAND, Block
from tests.support.docs import ROOT, Chain, chains, compare

DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
CHAINS = [chain for page in PAGES for chain in chains(page)]


@pytest.mark.parametrize("chain", CHAINS, ids=[c.where for c in CHAINS])
def test_an_example_prints_what_the_page_shows_and_again_when_run_again(chain: Chain, tmp_path: Path) -> None:
    if chain.skip is not None:
        pytest.skip(f"{chain.where}: {chain.skip}")
    first = chain.run(tmp_path)
    assert not first, "\n\n".join(first)
    again = chain.run(tmp_path)
    assert not again, "run a second time in the same folder:\n" + "\n\n".join(again)


def test_every_code_block_is_an_example_or_says_why_not() -> None:
    """A ```python or ```console block is run; only ```bash (commands to copy, with no output
    shown) and output blocks are not."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        runnable = sum(len(c.examples) for c in chains(page))
        assert runnable == len(re.findall(r"^```(?:python|console)\n", text, re.M)), page


def test_only_examples_that_cannot_run_here_are_skipped() -> None:
    """A skip says why the example cannot run here (a fragment, or it needs what this machine has
    not), or names the test that runs it."""
    for chain in CHAINS:
        if chain.skip is None:
            continue
        runner = re.search(r"(tests/\S+\.py) runs this", chain.skip)
        assert re.search(r"cluster|API key|network|GPU|endpoint|fragment", chain.skip) or (
            runner and (ROOT / runner.group(1)).is_file()
        ), f"{chain.where}: {chain.skip!r} is not a reason it cannot run here"


@pytest.mark.parametrize(
    "expected,got,same",
    [
        ("a 1\nb\n", "a 1\nb\n", True),
        ("a 1\nb\n", "a 2\nb\n", False),
        ('{"seconds": ..., "n": 2}\n', '{"seconds": 0.03417858100010562, "n": 2}\n', True),
        ('{"seconds": ..., "n": 2}\n', '{"seconds": 0.034, "n": 3}\n', False),
        ("first\n...\nlast\n", "first\nx\ny\nlast\n", True),
        ("at 2026-11-30 03:44 UTC\n", "at 2027-01-02 10:00 UTC\n", True),
        ("embeddings 1,200\n", "embeddings 0\n", False),
    ],
)
def test_output_is_compared_exactly_but_for_ellipses_and_times(expected: str, got: str, same: bool) -> None:
    assert compare(expected, got) is same


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """What CI runs too (the test command installs the ``docs`` extra: tests/test_readme.py)."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    # the API reference documents every public name of `memray`
    ids = {
        i
        for page in (tmp_path / "site" / "api").rglob("*.html")
        for i in re.findall(r'id="(memray\.[\w.]+)"', page.read_text())
    }
    missing = [n for n in memray.__all__ if not any(i == f"memray.{n}" or i.endswith(f".{n}") for i in ids)]
    assert not missing, f"not in the API reference (docs/api/): {missing}"


def _nav_pages(nav: list[object]) -> list[str]:
    found: list[str] = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        found += _nav_pages(value) if isinstance(value, list) else [str(value)]
    return found


def test_every_page_is_in_the_navigation() -> None:
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages


# What a user cannot act on: where the code came from, and documents they never see.
_NOT_FOR_USERS = re.compile(
    r"\bissues? \d|\bthe issue\b|issue's|(?<![\w&/])#\d+\b|\bshared/|SPEC\.md|SPEC §|\bthe seeds?\b|seed's|\bthe lead\b"
    r"|README \"[A-Z]"
    r"|\bthis round\b|\blast round\b|\bthe run before\b|\bbefore this change\b|\bthe tree before\b|\bold design\b",
    re.I,
)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_a_page_is_written_for_users(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = [
        f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for m in _NOT_FOR_USERS.finditer(text)
    ]
    assert not found, "\n".join(found)


def _docstrings() -> list[tuple[str, str]]:
    """(where, text) of every docstring in memray: the API reference renders them, and a reader
    of the code reads them."""
    found = []
    for path in sorted((ROOT / "memray").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    found.append((f"{path.relative_to(ROOT)}:{getattr(node, 'name', '<module>')}", doc))
    return found


def test_a_docstring_is_written_for_users() -> None:
    found = [f"{where}: {m.group(0)!r}" for where, doc in _docstrings() for m in _NOT_FOR_USERS.finditer(doc)]
    assert not found, "\n".join(found)


def test_the_code_around_memray_names_no_issue_by_number() -> None:
    """The tests, benchmarks, examples and jobs say what they check or measure, not which issue
    asked for it: a reader of the code cannot look an issue number up."""
    found = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for folder in ("tests", "benchmarks", "examples", "jobs")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for text in [path.read_text(encoding="utf-8")]
        for m in re.finditer(r"\bissues? \d+", text, re.I)
    ]
    assert not found, "\n".join(found)


def _transcript_commands() -> list[str]:
    return [
        line[2:]
        for page in PAGES
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("$ memray ")
    ]


def test_transcript_commands_parse() -> None:
    """Every ``$ memray ...`` line of a transcript parses with the real command-line parser."""
    from memray.cli import build_parser

    commands = _transcript_commands()
    assert any(c.startswith("memray demo") for c in commands) and any(c.startswith("memray stats") for c in commands)
    for command in commands:
        argv = shlex.split(command)[1:]
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --version / --help print and exit 0
            assert exc.code == 0, command
            continue
        assert callable(args.func), command


def test_every_cli_command_is_documented() -> None:
    from memray.cli import build_parser

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:
        assert f"memray {name}" in text, f"`memray {name}` is not in docs/cli.md"


@pytest.mark.parametrize("rendered", BLOCKS, ids=[f"{b.page}:{b.name}" for b in BLOCKS])
def test_a_block_of_recorded_results_is_what_its_results_render_to(rendered: Block) -> None:
    """A page's figures come from benchmarks/results (one source): the block between a block's
    markers is what its renderer makes of the recorded JSON lines (``python -m benchmarks.render
    --check`` checks the same)."""
    assert rendered.on_page() == rendered.text(), f"docs/{rendered.page} is stale: run {COMMAND}"


def test_every_marked_block_on_a_page_is_in_the_registry() -> None:
    """A block with markers but no renderer would never be checked."""
    marked = {
        (str(page.relative_to(DOCS)), m.group(1))
        for page in DOCS.rglob("*.md")
        for m in re.finditer(r"<!-- ([\w-]+): begin \(", page.read_text(encoding="utf-8"))
    }
    assert marked == {(b.page, b.name) for b in BLOCKS}


def test_the_check_lists_a_page_that_disagrees_with_its_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m benchmarks.render --check`` exits 1 naming a block whose page holds another
    figure, and writing the blocks makes the page agree again."""
    import benchmarks.render as render

    for page in {b.page for b in BLOCKS}:
        (tmp_path / page).write_text((DOCS / page).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(render, "DOCS", tmp_path)
    assert render.main(["--check"]) == 0
    first = BLOCKS[0]
    page = tmp_path / first.page
    page.write_text(page.read_text(encoding="utf-8").replace(first.text(), first.text() + "\n| a typed row |"))
    assert render.stale() == [b for b in BLOCKS if b.page == first.page and b.name == first.name]
    assert render.main(["--check"]) == 1
    render.main([])
    assert render.main(["--check"]) == 0
