"""Each adapter imports its framework only when asked for, and without it says which extra to
install (run in a subprocess where the framework cannot be imported)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

ADAPTERS = [
    ("memray.integrations.adk", "google.adk", "google-adk", "adk"),
    ("memray.integrations.langgraph", "langgraph", "langgraph", "langgraph"),
    ("memray.integrations.openai_agents", "agents", "openai-agents", "agents"),
]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module,blocked,package,extra", ADAPTERS)
def test_a_missing_framework_gives_install_the_extra_error(module, blocked, package, extra):
    out = _run(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == {blocked!r} or name.startswith({blocked!r} + "."):
                    raise ImportError(name + " is blocked for this test")
        sys.meta_path.insert(0, Block())
        from memray.errors import MissingExtraError
        try:
            __import__({module!r})
        except MissingExtraError as exc:
            assert (exc.package, exc.extra) == ({package!r}, {extra!r}), exc
            print(exc)
        else:
            raise SystemExit("imported without its framework")
        """)
    assert out.returncode == 0, out.stderr
    assert f"pip install 'memray-agents[{extra}]'" in out.stdout


def test_importing_memray_imports_no_framework():
    out = _run("""
        import sys, memray, memray.integrations
        loaded = [m for m in ("google.adk", "langgraph", "agents", "memray.integrations.adk",
                              "memray.integrations.langgraph", "memray.integrations.openai_agents") if m in sys.modules]
        assert not loaded, loaded
        print("ok")
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
