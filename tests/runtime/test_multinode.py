"""memray on several Ray nodes of one machine: the scenario of ``tests/runtime/multinode.py``
(partitions pinned to the nodes with disks, a node lost mid-run, no acknowledged durable message
lost), run in a subprocess with its own Ray temp dir — the test session's local Ray cannot join a
cluster, and a ``Cluster`` advertises its address in Ray's temp dir, where another ``ray.init()``
on the machine would find it.

The default run is the smoke version (about 40 s on 2 cores); ``MEMRAY_HEAVY_TESTS=1`` adds the
summaries job running its Ray Data pool across the nodes. ``tests/runtime/unplaced.py`` (about 45 s)
is the store that no node can take: calls to it fail within ``placement_timeout_s``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = os.environ.get("MEMRAY_HEAVY_TESTS") == "1"


def run_scenario(*flags: str, script: str = "tests.runtime.multinode") -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="mr-", dir="/tmp") as tmp:  # short: Ray's socket paths
        env = {**os.environ, "RAY_TMPDIR": tmp}
        env.pop("RAY_ADDRESS", None)
        out = subprocess.run(
            [sys.executable, "-m", script, *flags], cwd=ROOT, env=env, capture_output=True, text=True, timeout=420
        )
    assert out.returncode == 0, out.stderr[-4000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.long
@pytest.mark.parametrize("job", [pytest.param(True, marks=pytest.mark.skipif(not HEAVY, reason="heavy")), False])
def test_partitions_on_nodes_survive_a_lost_node(job: bool) -> None:
    if job is False and HEAVY:
        pytest.skip("the heavy run covers it")
    result = run_scenario(*(["--job"] if job else []))
    nodes, after = result["store_nodes"], result["store_nodes_after"]
    assert isinstance(nodes, list) and isinstance(after, list)
    assert len(set(nodes)) == 2  # one partition per node with a disk
    assert len(set(after) - set(nodes)) == 1  # the lost one restarted on the node that joined
    assert result["acked_during_loss"] == result["survivors"] and result["missing"] == 0
    if job:
        assert result["job"] == {"conversations": 8, "updated": 8, "unchanged": 0, "failed": 0}


@pytest.mark.long
def test_calls_to_a_store_no_node_can_take_fail_within_the_bound() -> None:
    result = run_scenario(script="tests.runtime.unplaced")
    bound_s, open_s = result["bound_s"], result["open_s"]
    assert isinstance(bound_s, float) and isinstance(open_s, float)
    assert bound_s <= open_s  # it used to wait for ever (Ray 2.60 queues the call)
    assert "PENDING_CREATION" in str(result["open_error"]) and "memray_store: 1" in str(result["open_error"])
    assert result["store_state"] == "RESTARTING"  # the node is gone: no node offers memray_store
    assert "no live node offers memray_store: 1" in str(result["store_read_error"])
    assert result["acked"] == 3  # a disk node joined: open succeeded, durable adds too
