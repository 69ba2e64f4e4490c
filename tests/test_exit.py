"""A script that ends without ``close()`` loses nothing it was acknowledged (memray.facade.exit):
each open memray is flushed and closed at exit, in both modes, and what could not be written is
named on stderr then, not at the next open. Each script runs in a child process, as a user's
would; the ray one with none of this session's Ray environment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memray

ROOT = Path(__file__).resolve().parent.parent


def script(code: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env or {**os.environ, "PYTHONPATH": str(ROOT)},
    )


def stored(path: Path) -> list[str]:
    with memray.open(str(path), mode="inprocess") as mem:
        return [m.text for m in mem.conversation(user_id="a", conversation_id="c").messages(limit=1000)]


@pytest.mark.parametrize("durable", [False, True])
def test_an_in_process_script_that_never_closes_keeps_what_it_added(tmp_path, durable) -> None:
    # a durable add returns before its messages are embedded and indexed: the script ends meanwhile
    run = script(
        f"""
        import memray
        m = memray.open("./f", mode="inprocess")
        conv = m.conversation(user_id="a", conversation_id="c")
        conv.add([{{"role": "user", "content": f"milk {{i}}"}} for i in range(200)], durable={durable})
        """,
        tmp_path,
    )
    assert run.returncode == 0 and run.stderr == "", run.stderr  # nothing to report, no "retrying" line
    assert stored(tmp_path / "f") == [f"milk {i}" for i in range(200)]


def test_what_could_not_be_written_is_named_on_stderr_at_exit(tmp_path) -> None:
    run = script(
        """
        import memray
        m = memray.open("./g", mode="inprocess", hosts=1, shards=1, write_timeout_s=2)
        conv = m.conversation(user_id="a", conversation_id="c")
        conv.add({"role": "user", "content": "kept"}, durable=True)
        m.internals.run(m.internals.deployment.stores.close())  # the store is gone (as an actor call would see it)
        conv.add({"role": "user", "content": "acknowledged, never stored"})
        print("script done")
        """,
        tmp_path,
    )
    assert run.returncode == 0 and run.stdout == "script done\n"
    at_exit = [line for line in run.stderr.splitlines() if line.startswith("memray: at exit")]
    assert len(at_exit) == 1, run.stderr
    assert str(tmp_path / "g") in at_exit[0] and "1 acknowledged message(s)" in at_exit[0]
    assert "default/a/c" in at_exit[0] and "could not be made durable" in at_exit[0]
    with memray.open(str(tmp_path / "g"), mode="inprocess") as mem:  # and the next open says it again, as lost
        assert [d.kind for d in mem.dead_letters()] == ["lost"]
        assert [m.text for m in mem.conversation(user_id="a", conversation_id="c").messages()] == ["kept"]


@pytest.mark.long
@pytest.mark.ray
def test_a_ray_mode_script_that_never_closes_keeps_what_it_added(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a Ray of its own, as a user's
    run = script(
        """
        import memray
        m = memray.open("./r", hosts=1, shards=1, num_cpus=1)
        m.conversation(user_id="a", conversation_id="c").add({"role": "user", "content": "milk"})
        """,
        tmp_path,
        {**env, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr
    assert "memray: at exit" not in run.stderr and "retrying" not in run.stderr, run.stderr
    assert stored(tmp_path / "r") == ["milk"]


@pytest.mark.long
@pytest.mark.ray
def test_a_memray_whose_ray_was_shut_down_first_says_so_at_exit_at_once(tmp_path) -> None:
    """Ray gone (a test fixture's ray.shutdown(), say) before the memray was closed: its actors
    went with it. Closing then must not start a new Ray to call them (it used to, and waited)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    run = script(
        """
        import ray, memray
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        m = memray.open("./s", hosts=1, shards=1)
        m.conversation(user_id="a", conversation_id="c").add({"role": "user", "content": "milk"})
        ray.shutdown()
        """,
        tmp_path,
        {**env, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr
    at_exit = [line for line in run.stderr.splitlines() if line.startswith("memray: at exit")]
    assert len(at_exit) == 1 and "Ray was shut down before this memray was closed" in at_exit[0], run.stderr
    assert "Started a local Ray" not in run.stderr  # no second Ray
