"""Two driver processes on one data directory: sharing through one Ray keeps one order per
conversation and lets either driver close while the other goes on; a driver that cannot share
(one in-process) fails within seconds, saying who holds the store and how to share it. (A driver
that joins with no address typed: tests/runtime/test_join.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import memray

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]


def _driver(code: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout_s, cwd=ROOT
    )


def test_an_in_process_driver_fails_fast_and_names_the_holder(ray_session, tmp_path) -> None:
    import ray

    path = str(tmp_path / "held")
    mem = memray.open(path, mode="ray", hosts=1, shards=1, namespace="held")
    try:
        t0 = time.monotonic()
        with pytest.raises(memray.StoreError) as err:
            memray.open(path, mode="inprocess", hosts=1, shards=1)
        assert time.monotonic() - t0 < 5
        text = str(err.value)
        assert "in use by memray store actor" in text and ray.get_runtime_context().gcs_address in text
        assert "open it with mode='ray'" in text and "\x1b[" not in text
    finally:
        mem.close(terminate=True)


def test_two_drivers_share_one_order_and_either_may_close(ray_session, tmp_path) -> None:
    import ray

    address = ray.get_runtime_context().gcs_address
    path = str(tmp_path / "shared")
    cfg = dict(path=path, mode="ray", hosts=2, shards=1, namespace="shared", address=address, debounce_ms=20)
    a = memray.open(**cfg)  # joined by address: detached actors, shared by design
    go = tmp_path / "go"
    b = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import json, os, time, memray
        mem = memray.open(**{cfg!r})
        conv = mem.conversation(user_id="u", conversation_id="c")
        seqs = [conv.add({{"id": f"b{{i}}", "role": "user", "content": f"b {{i}}"}})[0] for i in range(20)]
        while not os.path.exists({str(go)!r}):  # the other driver closes meanwhile
            time.sleep(0.05)
        after = [{{"id": f"b-after{{i}}", "role": "user", "content": "after"}} for i in range(5)]
        seqs += [conv.add(m, durable=True)[0] for m in after]
        mem.close()
        print(json.dumps(seqs))
    """),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        conv = a.conversation(user_id="u", conversation_id="c")
        mine = [conv.add({"id": f"a{i}", "role": "user", "content": f"a {i}"})[0] for i in range(20)]
        a.close()  # joined, so it only flushes and disconnects: the other driver goes on
        go.touch()
        out, err = b.communicate(timeout=120)
        assert b.returncode == 0, err[-3000:]
        theirs = json.loads(out.strip().splitlines()[-1])
        assert len(set(mine + theirs)) == 45  # one total order: no seq given twice
        with memray.open(**cfg) as again:
            stored = again.conversation(user_id="u", conversation_id="c").messages()
            assert [m.seq for m in stored] == list(range(1, 46))
            assert {m.id: m.seq for m in stored} == {
                **{f"a{i}": s for i, s in enumerate(mine)},
                **{m.id: m.seq for m in stored if m.id.startswith("b")},
            }
            again.close(terminate=True)  # the last one out stops the detached actors
    finally:
        if b.poll() is None:
            b.kill()


def test_a_joining_driver_closing_leaves_the_owners_actors_alone(ray_session, tmp_path) -> None:
    import ray

    path = str(tmp_path / "owned")
    a = memray.open(path, mode="ray", hosts=2, shards=1, namespace="owned")  # the owner: actors die with it
    try:
        conv = a.conversation(user_id="u", conversation_id="c")
        assert conv.add({"role": "user", "content": "first"}) == [1]
        proc = _driver(f"""
            import memray
            mem = memray.open({path!r}, mode="ray", hosts=2, shards=1, namespace="owned",
                              address={ray.get_runtime_context().gcs_address!r})
            print(mem.conversation(user_id="u", conversation_id="c").add({{"role": "user", "content": "second"}}))
            mem.close()  # joined: flushes and disconnects, kills nothing
        """)
        assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "[2]", proc.stderr[-3000:]
        assert conv.add({"role": "user", "content": "third"}, durable=True) == [3]
        assert [m.text for m in conv.messages()] == ["first", "second", "third"]
    finally:
        a.close(terminate=True)
