"""``memray keys``, ``memray serve`` and the ``serve`` extra, as a user runs them."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import httpx
import pytest

from memray.cli import main
from tests.support.serve import APP, Served, free_port


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_keys_create_list_revoke_in_a_directory_no_server_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "data")
    code, out, _ = run(capsys, "keys", "create", path, "--app", "acme", "--user", "ada", "--read-only")
    key = out[-1]
    assert code == 0 and key.startswith("mry_") and "read-only" in out[0]
    code, listed, _ = run(capsys, "keys", "list", path)
    key_id = listed[0].split()[0]
    assert code == 0 and "live" in listed[0] and "user=ada" in listed[0] and key.startswith(f"mry_{key_id}_")
    assert run(capsys, "keys", "revoke", path, key_id)[0] == 0
    assert "revoked" in run(capsys, "keys", "list", path)[1][0]
    # the store keeps the digest, never the key
    rows = duckdb.connect(str(tmp_path / "data" / "history.duckdb"), read_only=True).sql("FROM api_keys").fetchall()
    assert len(rows) == 1 and hashlib.sha256(key.encode()).hexdigest() in rows[0] and key not in map(str, rows[0])
    code, _, err = run(capsys, "keys", "revoke", path, "nope")
    assert code == 2 and "no key has id 'nope'" in err


def test_keys_join_the_running_server(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    import ray

    path = served.mem.config.path
    code, listed, _ = run(capsys, "keys", "list", path)  # joins the memray running on the path
    assert code == 0 and any(line.endswith("admin") for line in listed)
    address = ray.get_runtime_context().gcs_address
    code, out, _ = run(capsys, "keys", "create", path, "--address", address, "--app", APP)
    assert code == 0
    url = f"{served.url}/v1/apps/{APP}/users/z/conversations/c/messages"
    for _ in range(200):  # the replica follows the key ring: wait on state, bounded
        if httpx.get(url, headers={"X-API-Key": out[-1]}).status_code == 200:
            break
    assert httpx.get(url, headers={"X-API-Key": out[-1]}).status_code == 200


def descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.long
def test_serve_is_ready_then_stops_cleanly_and_quietly_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "memray.cli", "serve", str(tmp_path / "d"), "--port", str(port)]
    proc = subprocess.Popen([*argv, "--num-cpus", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    try:
        ready = False
        while not ready and proc.poll() is None and time.monotonic() - t0 < 180:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                time.sleep(0.2)
        assert ready, proc.stderr.read() if proc.poll() is not None else "not ready in 180 s"
        print(f"memray serve ready in {time.monotonic() - t0:.1f} s")
        assert httpx.get(f"http://127.0.0.1:{port}/v1/apps/a/users/u/conversations/c/messages").status_code == 401
        started = descendants(proc.pid)
        assert started  # the local Ray, its actors, Serve's controller, proxy and replica
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        # only memray's own lines: Ray's and Serve's (started, deleting, a failed shutdown task)
        # stay out of the terminal without --verbose
        assert out == "", out
        assert [line.split(":")[0] for line in err.splitlines()] == ["memray serve"] * 2, err
        assert "memray serve: stopping" in err
        deadline = time.monotonic() + 30
        while any(alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.2)  # orphans re-parented to init are reaped as they exit
        assert [p for p in started if alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()


def test_no_auth_only_on_loopback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "serve", str(tmp_path), "--host", "0.0.0.0", "--no-auth")
    assert code == 2 and "loopback" in err and len(err.strip().splitlines()) == 1


def test_serve_without_the_extra_says_which_to_install(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "fastapi" or name.startswith("fastapi."):
                    raise ImportError("blocked for this test")
        sys.meta_path.insert(0, Block())
        import memray  # the core imports without the server's packages
        from memray.cli import main
        sys.exit(main(["serve", {str(tmp_path)!r}]))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "memray serve: error: fastapi is not installed; install the extra: pip install 'memray-agents[serve]'"
    ]
