"""The service section of the README runs and prints what it shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
HEADING = "## Long-term memory service and erasure"


def section() -> str:
    for name in ("README.md",):
        path = os.path.join(ROOT, name)
        if os.path.exists(path):
            text = open(path, encoding="utf-8").read()
            if HEADING in text:
                body = text.split(HEADING, 1)[1]
                return body.split("\n## ", 1)[0]
    raise AssertionError(f"no README has {HEADING!r}")


def test_service_example_prints_the_documented_output(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```\n\nOutput:\n\n```\n(.*?)```", section(), re.S)
    assert blocks, "the example and its output are missing"
    code, expected = blocks[0]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == expected
