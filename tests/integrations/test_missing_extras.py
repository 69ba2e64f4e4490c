"""Each adapter imports its framework only when asked for, and without it says which extra to
install. One subprocess checks all three: ``import memray`` loads no framework, then each
adapter is imported with its framework made unimportable."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

ADAPTERS = [
    ("memray.integrations.adk", "google.adk", "google-adk", "adk"),
    ("memray.integrations.langgraph", "langgraph", "langgraph", "langgraph"),
    ("memray.integrations.openai_agents", "agents", "openai-agents", "agents"),
]

SCRIPT = """
import json, sys
import memray, memray.integrations
frameworks = ("google.adk", "langgraph", "agents") + tuple(m for m, *_ in ADAPTERS)
loaded = sorted(m for m in sys.modules if m in frameworks)

class Block:
    name = None
    def find_spec(self, name, path=None, target=None):
        if self.name and (name == self.name or name.startswith(self.name + ".")):
            raise ImportError(name + " is blocked for this test")

block = Block()
sys.meta_path.insert(0, block)
from memray.errors import MissingExtraError
errors = {}
for module, blocked, package, extra in ADAPTERS:
    block.name = blocked
    try:
        __import__(module)
    except MissingExtraError as exc:
        errors[module] = [exc.package, exc.extra, str(exc)]
print(json.dumps({"loaded": loaded, "errors": errors}))
"""


def test_no_framework_is_imported_and_a_missing_one_names_its_extra():
    code = f"ADAPTERS = {ADAPTERS!r}\n" + textwrap.dedent(SCRIPT)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["loaded"] == []
    for module, _, package, extra in ADAPTERS:
        assert report["errors"][module][:2] == [package, extra]
        assert f"pip install 'memray-agents[{extra}]'" in report["errors"][module][2]
