"""Every example the README and the pages under ``docs/`` show runs as written and prints what is
shown beside it, twice in a row in the same folder (:mod:`tests.support.docs` says how)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.docs import ROOT, Chain, chains, compare

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
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
