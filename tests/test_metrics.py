"""Metrics: in-memory totals in every mode, export to Ray's Prometheus endpoint in Ray mode."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import memray
from memray import metrics
from memray.metrics import LagRecorder, percentiles

ROOT = Path(__file__).resolve().parents[1]


def test_counter_and_histogram_keep_totals_and_buckets_without_ray() -> None:
    c = metrics.Counter("memray_test_counter", "test", ("host",))
    h = metrics.Histogram("memray_test_hist", "test", [0.1, 1.0], ("host",))
    c.inc(3, {"host": "a"})
    c.inc(2, {"host": "b"})
    c.inc(0)  # ignored: counters only go up
    h.observe_many([0.05, 0.5, 0.5, 7.0], {"host": "a"})
    snap = metrics.snapshot()
    assert snap["memray_test_counter"]["total"] == 5
    assert snap["memray_test_counter"]["by_tags"] == {"host=a": 3, "host=b": 2}
    assert snap["memray_test_hist"]["by_tags"]["host=a"] == [1, 2, 1]
    assert snap["memray_test_hist"]["sum"] == pytest.approx(8.05)
    assert metrics.export() is metrics.ray_active()


def test_lag_recorder_measures_ack_to_commit_per_message() -> None:
    rec = LagRecorder("7")
    before = metrics.MESSAGES_COMMITTED.totals.get((("host", "7"),), 0.0)
    rec.acked("k", ["a", "b"], now=10.0)
    rec.acked("k", ["a"], now=11.0)  # a re-add before the commit keeps the first ack
    rec.acked("j", ["c"], now=10.5)
    rec.forget("j")
    rec.committed([("k", ["a", "b"]), ("j", ["c"])], now=10.25)  # one write; j forgotten: no lag
    out = rec.summary(reset=True, samples=True)
    assert out["samples"] == [0.25, 0.25] and out["count"] == 2 and out["pending"] == 0
    assert out["p99"] == 0.25 and out["max"] == 0.25
    assert rec.summary()["count"] == 0
    assert metrics.MESSAGES_COMMITTED.totals[(("host", "7"),)] - before == 3


def test_percentiles_are_nearest_rank() -> None:
    xs = [float(i) for i in range(1, 101)]
    assert percentiles(xs) == {"p50": 50.0, "p95": 95.0, "p99": 99.0}
    assert percentiles([]) == {"p50": 0.0, "p95": 0.0, "p99": 0.0}


def test_inprocess_memory_records_writes_lag_and_search_latency(tmp_path: Path) -> None:
    before = metrics.snapshot()
    with memray.open(
        config=memray.MemoryConfig(path=str(tmp_path), mode="inprocess", hosts=1, shards=1, debounce_ms=10)
    ) as mem:
        conv = mem.conversation(user_id="u", conversation_id="c", app="m")
        conv.add(
            [{"role": "user", "content": "sourdough starter"}, {"role": "assistant", "content": "feed it"}],
            durable=True,
        )
        mem.wait_indexed()
        assert conv.search("sourdough")
        assert mem.search_app("m", "sourdough")
        lag = mem.internals.run(mem.internals.deployment.hosts[0].durable_lag())
    after = metrics.snapshot()
    assert after["memray_messages_committed"]["total"] - before["memray_messages_committed"]["total"] == 2
    assert after["memray_flush_lag_seconds"]["count"] - before["memray_flush_lag_seconds"]["count"] == 2
    assert after["memray_search_latency_seconds"]["count"] - before["memray_search_latency_seconds"]["count"] == 2
    assert set(after["memray_search_latency_seconds"]["by_tags"]) >= {"scope=conversation", "scope=app"}
    assert lag["count"] == 2 and lag["pending"] == 0 and 0 < lag["max"] < 60


RAY_SCRIPT = textwrap.dedent("""
    import json, sys, time, urllib.request
    import ray, memray
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             _system_config={"metrics_report_interval_ms": 500})
    port = ray._private.worker.global_worker.node.metrics_export_port
    mem = memray.open(config=memray.MemoryConfig(path=sys.argv[1], hosts=1, shards=1, debounce_ms=10))
    conv = mem.conversation(user_id="u", conversation_id="c", app="m")
    conv.add([{"role": "user", "content": "sourdough starter"}], durable=True)
    mem.wait_indexed()
    conv.search("sourdough")
    want = {"ray_memray_messages_committed", "ray_memray_flush_lag_seconds", "ray_memray_search_latency_seconds"}
    seen = set()
    deadline = time.time() + 60
    while time.time() < deadline and not want <= seen:
        time.sleep(0.5)
        conv.search("sourdough")  # keeps a fresh export scheduled in the driver
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        seen = {name for name in want if any(line.startswith(name) for line in body.splitlines())}
    mem.close(terminate=True)
    ray.shutdown()
    print(json.dumps(sorted(seen)))
""")


@pytest.mark.long
@pytest.mark.ray
def test_ray_mode_metrics_reach_prometheus_endpoint(tmp_path: Path) -> None:
    """Own Ray in a subprocess: the export interval must be short, and the session fixture's Ray
    (if any) must not be disturbed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_DEDUP_LOGS": "0"}
    out = subprocess.run(
        [sys.executable, "-c", RAY_SCRIPT, str(tmp_path / "data")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = out.stdout.strip().splitlines()[-1]
    assert (
        seen == '["ray_memray_flush_lag_seconds", "ray_memray_messages_committed", "ray_memray_search_latency_seconds"]'
    ), out.stderr[-2000:]
