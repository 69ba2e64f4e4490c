"""No call hangs on a store that is gone: flush() and close() give up after write_timeout_s,
saying what was not made durable (the messages stay pending while the process lives)."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

import memray


def _store_gone_then_close(mem: memray.Memory, kill_store) -> None:
    conv = mem.conversation(user_id="u", conversation_id="c")
    assert conv.add({"role": "user", "content": "durable"}, durable=True) == [1]
    kill_store()
    assert conv.add({"role": "user", "content": "acknowledged, never durable"}) == [2]
    t0 = time.monotonic()
    with pytest.raises(memray.StoreError, match="timed out"):
        conv.flush()
    assert time.monotonic() - t0 < 15
    t0 = time.monotonic()
    with pytest.raises(memray.StoreError, match="1 acknowledged message"):
        mem.close(terminate=True)
    assert time.monotonic() - t0 < 60


def test_in_process_a_closed_store_bounds_flush_and_close(tmp_path) -> None:
    mem = memray.open(str(tmp_path / "m"), mode="inprocess", hosts=1, shards=1, debounce_ms=10, write_timeout_s=2)
    _store_gone_then_close(
        mem, lambda: mem.internals.run(mem.internals.deployment.stores.close())
    )  # serialised, as an actor call


@pytest.mark.ray
def test_a_store_actor_killed_for_good_bounds_flush_and_close(ray_session, tmp_path) -> None:
    import ray

    mem = memray.open(
        str(tmp_path / "m"), mode="ray", hosts=1, shards=1, debounce_ms=10, write_timeout_s=2, namespace="bounds"
    )
    _store_gone_then_close(
        mem, lambda: ray.kill(mem.internals.deployment.stores.clients[0].ref.handle, no_restart=True)
    )


def _within(call: Any, limit_s: float) -> tuple[Any, BaseException | None, float]:
    """Run ``call`` in a thread: its result or error and its seconds; still running after
    ``limit_s`` fails the test (the unbounded wait this is about) instead of hanging it."""
    box: dict[str, Any] = {}

    def run() -> None:
        t0 = time.monotonic()
        try:
            box["result"] = call()
        except BaseException as exc:
            box["error"] = exc
        box["s"] = time.monotonic() - t0

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"still waiting after {limit_s} s"
    return box.get("result"), box.get("error"), box["s"]


@pytest.mark.ray
def test_calls_to_a_host_or_shard_whose_process_stopped_answering_are_cut(ray_session, tmp_path) -> None:
    """Ray has them ALIVE, but their processes are stopped (SIGSTOP): a search answers degraded
    and a read raises UnavailableError naming the host, once placement_timeout_s has passed."""
    mem = memray.open(str(tmp_path / "m"), mode="ray", hosts=1, shards=1, placement_timeout_s=1.0, namespace="stopped")
    try:
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add({"role": "user", "content": "the lighthouse keeper counts ships"}, durable=True)
        assert mem.wait_indexed(60)
        dep = mem.internals.deployment
        shard_pid = mem.internals.run(dep.shards[0].pid())
        host_pid = mem.internals.run(dep.hosts[0].stats())["pid"]
        os.kill(shard_pid, signal.SIGSTOP)
        try:
            found, error, seconds = _within(lambda: conv.search("lighthouse keeper"), 60)
        finally:
            os.kill(shard_pid, signal.SIGCONT)
        assert error is None and found.degraded and "shard 0" in (found.reason or ""), (found, error)
        os.kill(host_pid, signal.SIGSTOP)
        try:
            _, error, seconds = _within(conv.messages, 60)
        finally:
            os.kill(host_pid, signal.SIGCONT)
        assert isinstance(error, memray.UnavailableError), error
        assert (
            "host 0 unavailable: Ray has it alive, but its process has answered nothing" in str(error) and seconds < 30
        )
        assert [m.text for m in conv.messages()] == ["the lighthouse keeper counts ships"]  # both back
    finally:
        mem.close(terminate=True)
