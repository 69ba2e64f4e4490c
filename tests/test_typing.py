"""`mypy --strict` on the package and the jobs is the bar (pyproject.toml [tool.mypy])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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


@pytest.mark.long
def test_package_and_jobs_type_check_strictly_and_users_code_sees_their_types(tmp_path):
    """First ``mypy --strict`` on memray and the jobs. Then memray's ``py.typed`` (PEP 561): mypy
    on a user's code sees memray's types when memray is installed the way a regular install lays
    it out (on the path of a site-packages ``.pth``, where mypy demands the marker; without it,
    memray would be ``Any`` and nothing below flagged), so it accepts the right calls and flags
    the wrong ones, including a typo in ``mode`` (a ``Literal``). One test, in this order: the
    second check reads what the first one cached (the same files, under the same options), which
    takes it from ~21 s to ~4 s on a fresh clone."""
    import sysconfig
    import tomllib

    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "memray", "jobs"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-4000:]
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
            "--config-file",  # the package's options and cache: its modules come from what was just written
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
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
