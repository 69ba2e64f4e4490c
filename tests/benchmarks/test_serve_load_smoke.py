"""``python -m benchmarks.serve_load`` at tiny size against the server tests' Serve app (Serve's
HTTP proxy is one per Ray: the benchmark's own deploy would find it taken), so it does not rot:
every phase at two client counts, the floor beside each, the ratios and the targets read off."""

from __future__ import annotations

import argparse
import asyncio

from tests.support.serve import APP, Served


def test_serve_load_times_search_and_add_beside_the_noop_floor(served: Served) -> None:
    from benchmarks import serve_load

    serve_load.seed(served.mem, argparse.Namespace(seed=3, conversations=3, messages=4))
    keys = [served.mem.keys.create(serve_load.APP, label=f"smoke-{c}")[0] for c in range(4)]
    args = argparse.Namespace(clients="1,4", requests=12, phase_seconds=60.0, conversations=3, seed=3)
    noop = [f"/v1/apps/{serve_load.APP}/noop"] * 4
    for _ in range(200):  # the replica follows the key ring: wait on state, bounded
        if asyncio.run(serve_load.run_phase(served.url, keys, 4, noop, [{}] * 4, 5))["errors"] == 0:
            break
    results = asyncio.run(serve_load.measure_http(served.url, keys, args))
    assert set(results) == {"1", "4"}
    for row in results.values():
        for phase in ("search", "add", "floor_search", "floor_add"):
            assert row[phase]["n"] == 12 and row[phase]["errors"] == 0 and row[phase]["requests_per_s"] > 0
        assert row["search_p50_to_floor"] > 0 and row["add_throughput_to_floor"] > 0
    assert set(serve_load.targets(results)) == {
        "search_p50_to_floor_at_1_le_1.5",
        "search_throughput_to_floor_at_64_ge_0.7",
        "p99_le_3x_p50",
    }
    assert APP != serve_load.APP  # the benchmark's app is its own
