"""A second process on a data directory joins the memray running there, with no address typed,
whatever the authentication of its Ray (:mod:`memray.runtime.join`).

Every process here is a child started with none of this test session's Ray environment (the
session's ``ray.init`` set ``RAY_AUTH_MODE=token`` in it, which would make any join pass): the
owner starts a Ray of its own as a user's script would, and the joiner finds it from the data
directory alone.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memray

ROOT = Path(__file__).resolve().parents[2]

OWNER = """
    import json, os, sys, memray, ray
    mem = memray.open(sys.argv[1], hosts=1, shards=1, num_cpus=1)  # ray mode: a local Ray of its own, or joined
    conv = mem.conversation(user_id="u", conversation_id=sys.argv[2])
    conv.add({"role": "user", "content": "from the owner"}, durable=True)
    started = mem._started_ray  # (private: which of two racing processes started the Ray)
    print(json.dumps({"address": ray.get_runtime_context().gcs_address, "started": started}), flush=True)
    sys.stdin.readline()  # until the test says stop
    print(json.dumps([m.text for m in conv.messages()]), flush=True)
    mem.close()
"""

JOINER = """
    import json, sys, time, memray
    t0 = time.monotonic()
    try:
        mem = memray.open(sys.argv[1])  # no address, no namespace, default shape: all found
    except memray.MemrayError as exc:
        print(json.dumps({"error": str(exc)}))
        raise SystemExit(0)
    import ray
    conv = mem.conversation(user_id="u", conversation_id="c")
    seqs = conv.add({"role": "user", "content": "from the joiner"}, durable=True)
    print(json.dumps({
        "open_s": time.monotonic() - t0, "ray": ray.get_runtime_context().gcs_address,
        "hosts": mem.config.hosts, "seqs": seqs, "texts": [m.text for m in conv.messages()],
    }))
    mem.close()
"""


def scrubbed(**extra: str) -> dict[str, str]:
    """This process's environment without any RAY_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return {**env, **extra}


def run(code: str, path: Path, env: dict[str, str], timeout_s: float = 180) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(path)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


class Owner:
    """A child process holding a memray in ray mode on ``path`` until :meth:`stop`."""

    def __init__(self, path: Path, env: dict[str, str], conversation_id: str = "c") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(OWNER), str(path), conversation_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
        )

    def wait_open(self) -> Owner:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the owner is open (or has died)
        assert line, self.proc.communicate(timeout=60)[1][-3000:]
        opened = json.loads(line)
        self.address, self.started = opened["address"], opened["started"]
        return self

    def stop(self) -> list[str]:
        """Close the owner; the messages it then reads from the conversation."""
        out, err = self.proc.communicate("stop\n", timeout=120)
        assert self.proc.returncode == 0, err[-3000:]
        return list(json.loads(out.strip().splitlines()[-1]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def owned(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Path, Owner]]:
    """A data directory held by an owner started with the environment ``request.param`` builds."""
    path = tmp_path / "shared"
    owner = Owner(path, request.param(tmp_path))
    try:
        owner.wait_open()
        yield path, owner
    finally:
        owner.kill()


def _home(tmp_path: Path, name: str) -> str:
    home = tmp_path / name
    home.mkdir(exist_ok=True)
    return str(home)


def _default_token(tmp_path: Path) -> dict[str, str]:
    # RAY_AUTH_MODE unset, as for a user's script: Ray turns token authentication on by itself and
    # writes a token to $HOME/.ray/auth_token (a home of the test's own, not the user's)
    return scrubbed(HOME=_home(tmp_path, "owner-home"))


def _token_in_env(tmp_path: Path) -> dict[str, str]:
    return scrubbed(HOME=_home(tmp_path, "owner-home"), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN)


def _auth_disabled(tmp_path: Path) -> dict[str, str]:
    return scrubbed(HOME=_home(tmp_path, "owner-home"), RAY_AUTH_MODE="disabled")


TOKEN = secrets.token_hex(32)


@pytest.mark.long
@pytest.mark.parametrize("owned", [_default_token], indirect=True, ids=["token-by-default"])
def test_a_second_process_joins_with_no_address_and_its_token_found_from_the_data_directory(owned, tmp_path) -> None:
    path, owner = owned
    in_process = JOINER.replace("memray.open(sys.argv[1])", "memray.open(sys.argv[1], mode='inprocess')")
    refused = run(in_process, path, scrubbed())  # cannot share: told to open in ray mode, which works below
    assert "open it with mode='ray' (the default) and no address" in refused.get("error", ""), refused
    # another home: the joiner's own ~/.ray/auth_token does not exist; the recorded path is used
    joiner = run(JOINER, path, scrubbed(HOME=_home(tmp_path, "joiner-home")))
    assert "error" not in joiner, joiner["error"]
    assert joiner["ray"] == owner.address  # joined the owner's Ray, started none of its own
    assert joiner["hosts"] == 1  # the running memray's shape, not this machine's default: one route per conversation
    assert joiner["seqs"] == [2] and joiner["texts"] == ["from the owner", "from the joiner"]
    # the command line joins too: memray stats asks the running store (its file is locked), and
    # counts over the running memray's hosts (1; the default here would be 2)
    stats = subprocess.run(
        [sys.executable, "-m", "memray.cli", "stats", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=scrubbed(HOME=_home(tmp_path, "joiner-home")),
    )
    assert stats.returncode == 0, stats.stderr[-3000:]
    counted = json.loads(stats.stdout)
    assert counted["tables"]["messages"] == 2 and counted["hosts"] == {"count": 1, "conversations": [1]}
    assert owner.stop() == ["from the owner", "from the joiner"]


@pytest.mark.long
@pytest.mark.parametrize("owned", [_token_in_env], indirect=True, ids=["token-in-env"])
def test_a_token_given_in_the_environment_is_asked_for_and_the_advice_works(owned, tmp_path) -> None:
    path, owner = owned
    refused = run(JOINER, path, scrubbed(HOME=_home(tmp_path, "joiner-home")))
    assert "RAY_AUTH_TOKEN" in refused.get("error", ""), refused
    assert "set RAY_AUTH_TOKEN to that token" in refused["error"]
    joined = run(JOINER, path, scrubbed(HOME=_home(tmp_path, "joiner-home"), RAY_AUTH_TOKEN=TOKEN))
    assert joined.get("ray") == owner.address, joined
    assert owner.stop() == ["from the owner", "from the joiner"]


@pytest.mark.long
@pytest.mark.parametrize("owned", [_auth_disabled], indirect=True, ids=["auth-disabled"])
def test_a_ray_without_authentication_is_joined_by_a_process_that_has_a_token(owned, tmp_path) -> None:
    path, owner = owned
    home = _home(tmp_path, "joiner-home")  # a token of its own that the running Ray does not ask for
    os.makedirs(os.path.join(home, ".ray"))
    Path(home, ".ray", "auth_token").write_text(secrets.token_hex(32))
    joiner = run(JOINER, path, scrubbed(HOME=home))
    assert joiner.get("ray") == owner.address, joiner
    assert owner.stop() == ["from the owner", "from the joiner"]


def test_a_memray_in_one_process_cannot_be_joined_and_the_error_says_so(tmp_path) -> None:
    path = tmp_path / "inproc"
    with memray.open(str(path), mode="inprocess", hosts=1, shards=1):
        refused = run(JOINER, path, scrubbed())
    assert "a memray in one process cannot be shared" in refused.get("error", ""), refused
    assert "mode=inprocess" in refused["error"]


@pytest.mark.long
def test_two_processes_opening_a_free_data_directory_at_once_share_one_ray(tmp_path) -> None:
    """Both start a Ray (the directory is free); the one whose store finds the file locked stops
    its Ray and joins the other's, whatever the two Rays' authentication."""
    path = tmp_path / "raced"
    token_home = _home(tmp_path, "joiner-home")
    os.makedirs(os.path.join(token_home, ".ray"))
    Path(token_home, ".ray", "auth_token").write_text(secrets.token_hex(32))
    both = [Owner(path, _auth_disabled(tmp_path), "c1"), Owner(path, scrubbed(HOME=token_home), "c2")]
    try:
        for racer in both:
            racer.wait_open()
        assert both[0].address == both[1].address
        assert sorted(r.started for r in both) == [False, True]
        first, last = sorted(both, key=lambda r: r.started)  # the one that joined closes first
        assert first.stop() == ["from the owner"] and last.stop() == ["from the owner"]
    finally:
        for racer in both:
            racer.kill()
