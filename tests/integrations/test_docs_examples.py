"""The agent-framework page (docs/integrations.md) runs and prints what it shows. The examples run
in this process (the frameworks are imported once for the whole package) from an empty folder."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
FRAMEWORKS = ["adk", "langgraph", "openai_agents"]


def examples() -> list[tuple[str, str]]:
    body = PAGE.read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```\n\nOutput:\n\n```text\n(.*?)```", body, re.S)


def test_each_framework_has_an_example():
    found = [re.search(r"from memray\.integrations\.(\w+) import", code) for code, _ in examples()]
    assert [m.group(1) if m else None for m in found] == FRAMEWORKS


@pytest.mark.parametrize("index", range(len(FRAMEWORKS)), ids=FRAMEWORKS)
def test_the_example_prints_the_documented_output(index, tmp_path, monkeypatch):
    pytest.importorskip({"adk": "google.adk", "langgraph": "langgraph", "openai_agents": "agents"}[FRAMEWORKS[index]])
    code, expected = examples()[index]
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"docs/integrations.md ({FRAMEWORKS[index]} example)", "exec"), {"__name__": "__main__"})
    assert printed.getvalue() == expected
