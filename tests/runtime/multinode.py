"""A memray on several Ray nodes of one machine (``ray.cluster_utils.Cluster``), run as a script
in its own process by ``tests/runtime/test_multinode.py`` (the test session's shared local Ray
cannot be joined to a cluster of raylets).

The cluster: two nodes with a "disk", the head and a worker, each offering ``memray_store: 1``,
so each of the two history partitions (``stores=2``, ``store_resource="memray_store"``, one
unit each) runs on exactly one of them. The scenario:

1. the two partitions run on the two nodes (hosts and shards anywhere);
2. durable writes to users of both partitions are acknowledged;
3. the worker node is removed (its raylet and every process on it are killed); a new disk node
   joins; the lost partition's actor restarts there and opens the same file (one machine: the
   "disk" is reattached), while writes to the other partition's users keep being acknowledged;
4. every acknowledged durable message is in the store, at its seq;
5. with ``--job``: the summaries job runs its Ray Data pool across the nodes.

Prints one JSON line of what it saw; exits non-zero on any broken promise.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import ray
from ray.cluster_utils import Cluster

import memray
from benchmarks._harness import scratch
from memray.ids import ConversationKey
from memray.store.layout import partition_of

DISK = {"memray_store": 1}  # room for one partition per disk node (each asks for 1 unit)
# the head declares a removed node dead after 3 failed health checks 1 s apart (a killed raylet
# fails each at once; Ray's default takes ~15 s); a live one has 2 s to answer each, under load
FAST_HEALTH = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3, "health_check_timeout_ms": 2000}
USERS = [f"user-{i}" for i in range(8)]


def actor_node(name: str, namespace: str) -> str:
    handle = ray.get_actor(name, namespace=namespace)
    info = ray._private.state.state.actor_table(handle._actor_id.hex())
    return str(info["Address"]["NodeID"])


def answers(name: str, namespace: str) -> bool:
    """The named actor answers a ping (False while it restarts)."""
    try:
        return bool(ray.get(ray.get_actor(name, namespace=namespace).ping.remote(), timeout=10))
    except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
        return False


def wait_for(what: str, check: Any, timeout_s: float = 120.0) -> None:
    """Wait on state (``check()`` true); the bound only turns a hang into a failure."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


T0 = time.monotonic()


def step(what: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {what}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def local_cluster(namespace: str, **head: Any) -> Iterator[Cluster]:
    """A ``Cluster`` of one head node (1 CPU, plus ``head``) in its own Ray temp dir, this
    process's Ray joined to it; shut down after."""
    if "RAY_TMPDIR" not in os.environ:  # a Cluster advertises itself there: never in the machine's shared one
        os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="mr-", dir="/tmp")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "_system_config": FAST_HEALTH, **head})
    ray.init(address=cluster.address, namespace=namespace, log_to_driver=False)
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def add(mem: memray.Memory, user: str, text: str, acked: dict[ConversationKey, dict[str, int]]) -> bool:
    conv = mem.conversation(user_id=user, conversation_id="c")
    mid = f"m{sum(len(v) for v in acked.values())}"
    try:
        [seq] = conv.add({"id": mid, "role": "user", "content": text}, durable=True)
    except memray.MemrayError:
        return False  # not acknowledged: nothing is promised about it
    acked.setdefault(conv.key, {})[mid] = seq
    return True


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job", action="store_true", help="also run the summaries job across the nodes")
    args = parser.parse_args()
    with local_cluster("memray-multinode", resources=DISK) as cluster:
        worker = cluster.add_node(num_cpus=1, resources=DISK)
        out = scenario(cluster, worker, args.job)
    print(json.dumps(out))
    return 0


def scenario(cluster: Cluster, worker: Any, job: bool) -> dict[str, Any]:
    """Steps 1-5 of the module docstring; what it saw."""
    out: dict[str, Any] = {}
    path = scratch("memray-multinode-")
    config = memray.MemoryConfig(
        path=path,
        mode="ray",
        address=cluster.address,
        namespace="memray-multinode",
        stores=2,
        shards=1,
        hosts=1,
        store_resource="memray_store",
        write_timeout_s=5.0,
        summarizer=memray.SummarizerConfig(keep_messages=1),  # the job then folds every conversation
        debounce_ms=10,
    )
    mem = memray.open(config=config)
    try:
        names = mem.internals.deployment.store_names()
        nodes = [actor_node(n, config.namespace) for n in names]
        out["store_nodes"] = nodes
        disk_ids = [cluster.head_node.node_id, worker.node_id]
        assert sorted(nodes) == sorted(disk_ids), f"partitions on {nodes}, disk nodes {disk_ids}"
        gone = nodes.index(worker.node_id)  # the partition on the node that will be removed
        # The scenario is about a lost partition: the host and the shard must outlive the node.
        # Placement is SPREAD, so either may start on the worker; restart it until it is not (an
        # actor that loses its node cannot come back before a node joins, and its calls wait).
        prefix = names[0].rsplit(":", 1)[0]
        for role in ("host-0", "shard-0"):
            name = f"{prefix}:{role}"
            while actor_node(name, config.namespace) == worker.node_id:
                ray.kill(ray.get_actor(name, namespace=config.namespace), no_restart=False)
                wait_for(f"{role} to restart", lambda n=name: answers(n, config.namespace))  # type: ignore[misc]

        step("opened: partitions on the disk nodes")
        acked: dict[ConversationKey, dict[str, int]] = {}
        for user in USERS:
            assert add(mem, user, f"before the loss {user}", acked)
        on_lost = [u for u in USERS if partition_of("default", u, 2) == gone]
        survivors = [u for u in USERS if partition_of("default", u, 2) != gone]
        assert on_lost and survivors, "the users must cover both partitions"

        step("removing the worker node")
        cluster.remove_node(worker, allow_graceful=False)
        during = [add(mem, u, f"during the loss {u}", acked) for u in survivors]
        out["acked_during_loss"], out["survivors"] = sum(during), len(survivors)
        assert all(during), "the surviving partition stops acknowledging while the other is down"
        step("a new disk node joins")
        fresh = cluster.add_node(num_cpus=1, resources=DISK)  # a disk again: the lost partition restarts there
        wait_for("the lost partition to restart", lambda: add(mem, on_lost[0], "back", acked))
        out["store_nodes_after"] = [actor_node(n, config.namespace) for n in names]
        assert out["store_nodes_after"][gone] == fresh.node_id
        for user in USERS:
            assert add(mem, user, f"after the loss {user}", acked)

        step("checking every acknowledged message")
        missing = 0
        for key, want in acked.items():
            stored = {m.id: m.seq for m in mem.conversation(user_id=key.user_id, conversation_id="c").messages()}
            missing += sum(1 for mid, seq in want.items() if stored.get(mid) != seq)
        out["acknowledged"] = sum(len(v) for v in acked.values())
        out["missing"] = missing
        assert missing == 0, f"{missing} acknowledged durable message(s) lost"

        step("job")
        if job:
            from memray.jobs import backfill_summaries

            report = backfill_summaries.run(config, workers=2, cpus_per_worker=0.5, force=True)
            out["job"] = {k: report[k] for k in ("conversations", "updated", "unchanged", "failed")}
            assert report["conversations"] == report["updated"] == len(USERS), report
            assert all(mem.conversation(user_id=u, conversation_id="c").summary() for u in on_lost)
    finally:
        mem.close(terminate=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
