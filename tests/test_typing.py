"""`mypy --strict` on the package and the jobs is the bar (pyproject.toml [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_package_and_jobs_type_check_strictly():
    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "memray", "jobs"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-4000:]


USER_CODE = """\
import memray

with memray.open("./data", mode="inprocess") as mem:
    conv = mem.conversation(user_id="u1", conversation_id="c1")
    seqs: list[int] = conv.add({"role": "user", "content": "hi"})
    hits = conv.search("hi", limit=3)
    score: float = hits[0].score
    wrong: str = conv
memray.open("./data", mode="rya")
"""


def test_users_code_is_type_checked_against_the_installed_package(tmp_path):
    """memray ships ``py.typed`` (PEP 561): mypy on a user's code sees memray's types when memray
    is installed the way a regular install lays it out (on the path of a site-packages ``.pth``,
    where mypy demands the marker), so it accepts the right calls and flags the wrong ones,
    including a typo in ``mode`` (a ``Literal``)."""
    import sysconfig
    import tomllib

    pytest.importorskip("mypy")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["memray"]
    assert (ROOT / "memray" / "py.typed").is_file()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "memray_checkout.pth").write_text(f"{ROOT}\n")  # memray, as a regular install places it
    Path(site, "memray_deps.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")  # pydantic, numpy...
    user = tmp_path / "user.py"
    user.write_text(USER_CODE)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--python-executable",
            str(python),
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "user-code"),
            "--no-error-summary",
            "user.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = out.stdout.strip().splitlines()
    assert errors == [
        'user.py:8: error: Incompatible types in assignment (expression has type "ConversationHandle", '
        'variable has type "str")  [assignment]',
        'user.py:9: error: Argument "mode" to "open" has incompatible type "Literal[\'rya\']"; '
        "expected \"Literal['ray', 'inprocess'] | None\"  [arg-type]",
    ], out.stdout
