"""The ``curl`` examples of the README and the pages under docs/, run as written against a real server.

A ```bash block preceded by ``<!-- serve-test -->`` runs in bash with ``MEMRAY_URL`` and
``MEMRAY_KEY`` (a key of app ``demo``) set, and must exit 0; when a ```text block follows, its
JSON must match what the block printed: every field shown has the value shown (a number stands for
any number: scores and times vary), lists have the length shown, fields not shown are not checked.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import Served

ROOT = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"<!-- serve-test -->\n```bash\n(?P<code>.*?)```\n(?:\n```text\n(?P<out>.*?)```\n)?", re.S)


def examples() -> list[tuple[str, str, str | None]]:
    out = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        doc = str(page.relative_to(ROOT))
        text = page.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            out.append((f"{doc}:{text.count(chr(10), 0, m.start('code'))}", m.group("code"), m.group("out")))
    return out


def matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(map(matches, expected, actual))
    if isinstance(expected, float):
        return isinstance(actual, (int, float)) and not isinstance(actual, bool)
    return bool(expected == actual)


EXAMPLES = examples()


def test_the_docs_have_curl_examples() -> None:
    assert len(EXAMPLES) >= 4 and any(where.startswith("docs/server.md") for where, _, _ in EXAMPLES)


@pytest.fixture(scope="module")
def demo_key(served: Served) -> str:
    key, _ = served.mem.keys.create("demo", label="docs")
    return key


def test_every_curl_example_runs_as_written(served: Served, demo_key: str) -> None:
    env = {"MEMRAY_URL": served.url, "MEMRAY_KEY": demo_key, "PATH": "/usr/bin:/bin"}
    for _ in range(200):  # the replica follows the key ring: wait on state, bounded
        probe = subprocess.run(
            [
                "curl",
                "-sf",
                f"{served.url}/v1/apps/demo/users/probe/conversations/p/summary",
                "-H",
                f"X-API-Key: {demo_key}",
            ],
            capture_output=True,
        )
        if probe.returncode == 0:
            break
    for where, code, expected in EXAMPLES:
        out = subprocess.run(["bash", "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, (where, out.stderr)
        if expected is not None:
            assert matches(json.loads(expected), json.loads(out.stdout)), (where, out.stdout)
