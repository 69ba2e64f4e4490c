"""No call hangs on a store that is gone: flush() and close() give up after write_timeout_s,
saying what was not made durable (the messages stay pending while the process lives)."""

from __future__ import annotations

import time

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
    _store_gone_then_close(mem, lambda: mem._run(mem._deployment.stores.close()))  # serialised, as an actor call


@pytest.mark.ray
def test_a_store_actor_killed_for_good_bounds_flush_and_close(ray_session, tmp_path) -> None:
    import ray

    mem = memray.open(
        str(tmp_path / "m"), mode="ray", hosts=1, shards=1, debounce_ms=10, write_timeout_s=2, namespace="bounds"
    )
    _store_gone_then_close(mem, lambda: ray.kill(mem._deployment.stores.clients[0].ref.handle, no_restart=True))
