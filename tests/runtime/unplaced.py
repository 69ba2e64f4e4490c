"""A memray whose history store Ray cannot place, on several Ray nodes of one machine, run as a
script by ``tests/runtime/test_multinode.py`` (like ``tests/runtime/multinode.py``).

The store asks for ``memray_store`` (``store_resource``), which only a "disk" node offers. The
scenario:

1. the cluster is only a head node (too small): ``open`` raises UnavailableError naming the
   history store, its state (PENDING_CREATION) and the resource, once ``placement_timeout_s``
   and the watch's grace have passed (in Ray 2.60 it used to wait for ever);
2. a disk node joins (what the error says to do): ``open`` succeeds; durable adds;
3. the disk node is removed, so no node offers ``memray_store``: a durable add raises within
   ``write_timeout_s``, a read of the store raises UnavailableError saying no live node offers
   it, a search answers. (That a lost store restarts on a disk node that joins, with nothing
   lost, is ``tests/runtime/multinode.py``'s scenario.)

Prints one JSON line of what it saw; exits non-zero on any broken promise.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import ray
from ray.cluster_utils import Cluster

import memray
from benchmarks._harness import scratch
from memray.rpc.ref import WATCH_EVERY_S, WATCH_GRACE_S
from tests.runtime.multinode import DISK, actor_node, local_cluster, step, wait_for

BOUND_S = 2.0  # placement_timeout_s
NS = "memray-unplaced"


def store_state(name: str, namespace: str) -> str:
    handle = ray.get_actor(name, namespace=namespace)
    return str(ray._private.state.state.actor_table(handle._actor_id.hex())["State"])


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
    with local_cluster(NS) as cluster:
        out = scenario(cluster)
    print(json.dumps(out))
    return 0


def scenario(cluster: Cluster) -> dict[str, Any]:
    """Steps 1-3 of the module docstring; what it saw."""
    ns = NS
    out: dict[str, Any] = {"bound_s": BOUND_S, "grace_s": WATCH_GRACE_S, "every_s": WATCH_EVERY_S}
    config = memray.MemoryConfig(
        path=scratch("memray-unplaced-"),
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
    mem: memray.Memory | None = None
    try:
        step("opening on a cluster without a disk")
        mem, error, out["open_s"] = within("open", lambda: memray.open(config=config))
        assert mem is None and isinstance(error, memray.UnavailableError), repr(error or mem)
        out["open_error"] = str(error)
        for part in ("history store unavailable", "PENDING_CREATION", "memray_store: 1", "add a node"):
            assert part in out["open_error"], out["open_error"]
        assert out["open_s"] >= BOUND_S  # not before the bound

        step("a disk node joins; opening again")
        disk = cluster.add_node(num_cpus=1, resources=DISK)
        mem, error, out["reopen_s"] = within("open with a disk node", lambda: memray.open(config=config))
        assert mem is not None, repr(error)
        [store] = mem.internals.deployment.store_names()
        assert actor_node(store, ns) == disk.node_id
        conv = mem.conversation(user_id="u", conversation_id="c")
        notes = [{"id": f"m{i}", "role": "user", "content": f"note {i} about lanterns"} for i in range(3)]
        out["acked"] = len(conv.add(notes, durable=True))

        step("removing the disk node")
        cluster.remove_node(disk, allow_graceful=False)
        wait_for("the store to lose its node", lambda: store_state(store, ns) != "ALIVE")
        out["store_state"] = store_state(store, ns)
        late = {"id": "late", "role": "user", "content": "after the loss"}
        _, error, out["durable_add_s"] = within("a durable add", lambda: conv.add(late, durable=True))
        assert isinstance(error, memray.StoreError), repr(error)
        out["durable_add_error"] = str(error)
        _, error, out["store_read_s"] = within("a store read", lambda: mem.list_conversations(user_id="u"))
        assert isinstance(error, memray.UnavailableError), repr(error)
        out["store_read_error"] = str(error)  # Ray's "restarting", and that no live node offers memray_store
        assert "history store" in out["store_read_error"] and "no live node offers" in out["store_read_error"]
        hits, error, out["search_s"] = within("a search", lambda: conv.search("lanterns"))
        assert error is None, repr(error)
        out["search_hits"] = len(hits)

    finally:
        if mem is not None:
            within("close", lambda: mem.close(terminate=True))  # type: ignore[union-attr]
    return out


if __name__ == "__main__":
    sys.exit(main())
