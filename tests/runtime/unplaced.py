"""A memray whose history store Ray cannot place, on several Ray nodes of one machine, run as a
script by ``tests/runtime/test_multinode.py`` (like ``tests/runtime/multinode.py``).

The cluster: a head node without a disk and one disk node offering ``memray_store: 1``, so the
store (``store_resource="memray_store"``) can only run on the disk node. The scenario:

1. a call held open on a live actor well past ``grace + placement_timeout_s`` is not cut, while
   its actor's placement is checked (it is placed: alive);
2. the disk node is removed: no node left offers ``memray_store``. A durable add raises within
   ``write_timeout_s``, a read of the store raises UnavailableError, a search answers;
3. ``close(terminate=True)`` returns; opening again creates a store actor Ray cannot place, and
   ``open`` raises UnavailableError naming the history store, its state and the resource, within
   ``placement_timeout_s`` and the watch's grace (in Ray 2.60 this call used to wait for ever);
4. a disk node joins (what the error says to do) and ``open`` succeeds: every durable message is
   back.

Prints one JSON line of what it saw; exits non-zero on any broken promise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

import memray
from memray.rpc.ref import WATCH_EVERY_S, WATCH_GRACE_S, Placement
from memray.runtime.actors import RayRef
from tests.runtime.multinode import FAST_HEALTH, actor_node, answers, step, wait_for

DISK = {"memray_store": 1}
BOUND_S = 2.0  # placement_timeout_s


@ray.remote(num_cpus=0)
class Gate:
    """An actor whose one call runs until it is released: a long call on a live actor."""

    def __init__(self) -> None:
        self.opened: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        self.opened = self.opened or asyncio.Event()
        return self.opened

    async def hold(self) -> str:
        await self._event().wait()
        return "released"

    async def release(self) -> None:
        self._event().set()


async def long_call_on_a_live_actor(checks: int) -> list[str]:
    """Hold a call open until its placement has been checked ``checks`` times; the states seen."""
    ref = RayRef(Gate.remote(), "gate", placement_timeout_s=BOUND_S)
    seen: list[Placement | None] = []
    real = ref.placement

    async def counted() -> Placement | None:
        seen.append(await real())
        return seen[-1]

    ref.placement = counted  # type: ignore[method-assign]
    held = asyncio.create_task(ref.call("hold"))
    while len(seen) < checks and not held.done():  # wait on state: the watch has looked `checks` times
        await asyncio.sleep(0.05)
    assert not held.done(), f"the long call ended early: {held}"
    await ref.call("release")
    assert await held == "released"
    ray.kill(ref.handle)
    return [w.state if w else "unknown" for w in seen]


def store_state(name: str, namespace: str) -> str:
    handle = ray.get_actor(name, namespace=namespace)
    return str(ray._private.state.state.actor_table(handle._actor_id.hex())["State"])  # type: ignore[attr-defined]


def within(what: str, call: Any, limit_s: float = 120.0) -> tuple[Any, BaseException | None, float]:
    """Run ``call`` in a thread: its result or exception and its seconds; a call still running
    after ``limit_s`` fails the scenario (the hang this scenario is about) instead of hanging it."""
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
    assert not thread.is_alive(), f"{what} still waiting after {limit_s} s"
    return box.get("result"), box.get("error"), round(box["s"], 2)


def main() -> int:
    if "RAY_TMPDIR" not in os.environ:  # a Cluster advertises itself there: never in the machine's shared one
        os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="mr-", dir="/tmp")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": FAST_HEALTH})
    disk = cluster.add_node(num_cpus=1, resources=DISK)
    ns = "memray-unplaced"
    ray.init(address=cluster.address, namespace=ns, log_to_driver=False)
    out: dict[str, Any] = {"bound_s": BOUND_S, "grace_s": WATCH_GRACE_S, "every_s": WATCH_EVERY_S}
    path = tempfile.mkdtemp(prefix="memray-unplaced-")
    config = memray.MemoryConfig(
        path=path,
        mode="ray",
        address=cluster.address,
        namespace=ns,
        shards=1,
        hosts=1,
        store_resource="memray_store",
        placement_timeout_s=BOUND_S,
        write_timeout_s=3.0,
        debounce_ms=10,
    )
    mem = memray.open(config=config)
    try:
        [store] = mem._deployment.store_names()  # type: ignore[attr-defined]
        assert actor_node(store, ns) == disk.node_id
        prefix = store.rsplit(":", 1)[0]
        for role in ("host-0", "shard-0"):  # the host and the shard live on: only the store is lost
            name = f"{prefix}:{role}"
            while actor_node(name, ns) == disk.node_id:
                ray.kill(ray.get_actor(name, namespace=ns), no_restart=False)
                wait_for(f"{role} to restart", lambda n=name: answers(n, ns))  # type: ignore[misc]
        conv = mem.conversation(user_id="u", conversation_id="c")
        notes = [{"id": f"m{i}", "role": "user", "content": f"note {i} about lanterns"} for i in range(3)]
        seqs = conv.add(notes, durable=True)

        step("a long call on a live actor")
        out["long_call_states"] = asyncio.run(long_call_on_a_live_actor(checks=4))
        assert set(out["long_call_states"]) == {"ALIVE"}, out["long_call_states"]

        step("removing the disk node")
        cluster.remove_node(disk, allow_graceful=False)
        wait_for("the store to lose its node", lambda: store_state(store, ns) != "ALIVE")
        out["store_state"] = store_state(store, ns)
        late = {"role": "user", "content": "after the loss"}
        _, error, out["durable_add_s"] = within("a durable add", lambda: conv.add(late, durable=True))
        assert isinstance(error, memray.StoreError), repr(error)
        _, error, out["store_read_s"] = within("a store read", lambda: mem.list_conversations(user_id="u"))
        assert isinstance(error, memray.UnavailableError) and "history store" in str(error), repr(error)
        hits, error, out["search_s"] = within("a search", lambda: conv.search("lanterns"))
        assert error is None, repr(error)
        _, error, out["close_s"] = within("close", lambda: mem.close(terminate=True))

        step("opening again: the store cannot be placed")
        reopened, error, out["open_s"] = within("open", lambda: memray.open(config=config))
        assert reopened is None and isinstance(error, memray.UnavailableError), repr(error or reopened)
        out["open_error"] = str(error)
        for part in ("history store unavailable", "PENDING_CREATION", "memray_store: 1", "add a node"):
            assert part in out["open_error"], out["open_error"]
        assert out["open_s"] >= BOUND_S  # not before the bound

        step("a disk node joins; opening again")
        cluster.add_node(num_cpus=1, resources=DISK)
        mem, error, out["reopen_s"] = within("open with a disk node", lambda: memray.open(config=config))
        assert error is None, repr(error)
        stored = {m.id: m.seq for m in mem.conversation(user_id="u", conversation_id="c").messages()}
        out["durable_back"] = sum(stored.get(f"m{i}") == seq for i, seq in enumerate(seqs))
        assert out["durable_back"] == len(seqs), stored
    finally:
        if mem is not None:
            within("the last close", lambda: mem.close(terminate=True))
        ray.shutdown()
        cluster.shutdown()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
