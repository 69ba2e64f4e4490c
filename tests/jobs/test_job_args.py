"""Job arguments without Ray: the entry points, model specs, config from flags, progress files,
fail points, the pool plan, stopping on a deadline or Ctrl-C, and the progress line."""

from __future__ import annotations

import importlib
import io
import logging
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import memray
from memray.errors import ValidationError
from memray.jobs.backfill_embeddings import build_parser, parse_model
from memray.jobs.common import InjectedFailure, ProgressFile, config_from_args, fail_point, pool_args
from memray.jobs.control import EXIT_CODES, Meter, Stop
from memray.jobs.resources import plan_pool

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("job", ["backfill_embeddings", "backfill_summaries"])
def test_each_entry_point_runs_its_job_in_the_package(job: str) -> None:
    """``python -m jobs.<job>`` (what ``ray job submit`` runs) is the job of ``memray.jobs.<job>``."""
    entry, package = importlib.import_module(f"jobs.{job}"), importlib.import_module(f"memray.jobs.{job}")
    assert (entry.main, entry.run) == (package.main, package.run)
    shown = subprocess.run(
        [sys.executable, "-m", f"jobs.{job}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"usage: python -m jobs.{job} [-h]")
    assert "--workers" in shown.stdout and "(default:" in shown.stdout


def test_parse_model_specs() -> None:
    assert parse_model("hash:384").model_dump(include={"kind", "dim"}) == {"kind": "hash", "dim": 384}
    oa = parse_model("openai:text-embedding-3-small:512", base_url="http://x/v1")
    assert (oa.kind, oa.model, oa.dim, oa.send_dimensions, oa.base_url) == (
        "openai",
        "text-embedding-3-small",
        512,
        True,
        "http://x/v1",
    )
    plain = parse_model("openai:nomic-embed-text")
    assert (plain.model, plain.send_dimensions) == ("nomic-embed-text", False)
    assert parse_model("local:BAAI/bge-small-en").model == "BAAI/bge-small-en"
    for bad in ("hash:x", "word2vec:1", "openai:"):
        with pytest.raises(ValidationError, match="model"):
            parse_model(bad)


def test_config_from_flags_is_ray_mode_and_overrides_the_file(tmp_path: Path) -> None:
    cfg_file = tmp_path / "cfg.json"
    cfg_file.write_text('{"shards": 3, "hosts": 2, "namespace": "x"}')
    memray.open(str(tmp_path / "data"), mode="inprocess", hosts=1, shards=1).close()
    args = build_parser().parse_args(
        [str(tmp_path / "data"), "--model", "hash:8", "--config", str(cfg_file), "--shards", "5"]
    )
    cfg = config_from_args(args)
    assert (cfg.mode, cfg.shards, cfg.hosts, cfg.namespace) == ("ray", 5, 2, "x")


def test_progress_file_is_replaced_whole(tmp_path: Path) -> None:
    progress = ProgressFile(str(tmp_path), "job")
    assert progress.load() is None
    progress.save({"files_done": ["a"]})
    progress.save({"files_done": ["a", "b"]})
    assert progress.load() == {"files_done": ["a", "b"]}
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["job.json"]


def test_fail_point(monkeypatch: pytest.MonkeyPatch) -> None:
    fail_point("bulk", 5)  # unset: nothing
    monkeypatch.setenv("MEMRAY_JOB_FAIL_AT", "bulk:3")
    fail_point("bulk", 2)
    fail_point("cutover", 9)
    with pytest.raises(InjectedFailure):
        fail_point("bulk", 3)


def test_pool_plan_leaves_the_read_tasks_a_slot() -> None:
    plan = plan_pool(2.0, 0.0)  # the defaults on a 2-CPU machine
    assert (plan.workers, plan.threads) == (2, 1)
    assert plan.workers * plan.cpus_per_worker + plan.read_cpus <= 2.0
    assert plan_pool(16.0, 0.0, workers=2).threads == 7  # a bigger box: each worker's share of threads
    gpu = plan_pool(8.0, 2.0, use_gpus=True)
    assert (gpu.workers, gpu.gpus_per_worker, gpu.threads) == (2, 1.0, 1)
    assert plan_pool(1.0, 0.0).workers == 1  # one CPU still runs


@pytest.mark.parametrize(
    ("free", "workers", "cpus", "hint"),
    [
        (2.0, 2, 1.0, "--workers 1 or fewer, or --cpus-per-worker 0.87"),  # the old default: the read task starves
        (0.2, None, None, "free some CPUs"),  # another job holds the cluster
        (4.0, 400, None, "free some CPUs"),
    ],
)
def test_pool_plan_that_cannot_fit_says_what_would(
    free: float, workers: int | None, cpus: float | None, hint: str
) -> None:
    with pytest.raises(ValidationError, match="the pool cannot fit") as err:
        plan_pool(free, 0.0, workers, cpus)
    assert hint in str(err.value)
    with pytest.raises(ValidationError, match="GPU"):
        plan_pool(8.0, 1.0, workers=2, use_gpus=True)


def test_stop_by_deadline_and_by_signal() -> None:
    now = [100.0]
    stop = Stop(timeout_s=30, clock=lambda: now[0])
    assert stop.reason is None
    now[0] = 130.0
    assert stop.reason == "timed_out" and "timed out after 30 s" in stop.message()
    ctrl_c = Stop()
    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN in a background job
    with ctrl_c.signals():
        with ctrl_c.critical():  # the cutover: signals are recorded, never raised
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
        assert ctrl_c.reason == "interrupted"
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C outside it quits at once
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before  # restored
    assert EXIT_CODES == {"interrupted": 130, "timed_out": 124}


def test_meter_prints_rate_and_eta() -> None:
    now = [0.0]
    meter = Meter("embedding messages", 1000, every_s=5, clock=lambda: now[0])
    assert "ETA unknown" in meter.line()
    now[0] = 10.0
    meter.add(250)
    assert meter.line() == "embedding messages: 250/1,000 rows (25.0%), 25 rows/s, ETA 0m30s"


def test_fail_point_can_press_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = Stop()
    monkeypatch.setenv("MEMRAY_JOB_FAIL_AT", "bulk:2:sigint")
    with stop.signals():
        fail_point("bulk", 1)
        assert stop.reason is None
        fail_point("bulk", 2)
    assert stop.reason == "interrupted"


def test_a_job_quiets_ray_datas_console_and_leaves_anyone_elses_handler_alone() -> None:
    """Ray Data's console shows errors only during a job; a handler the application attached to
    ``ray.data`` keeps its level (it used to be raised to ERROR for good: pytest attaches its
    capture handler there, and every later test of the session lost its warnings)."""
    import ray.data  # noqa: F401  (first: its import sets the ray.data logger's handlers, dropping any attached before)

    logger = logging.getLogger("ray.data")
    mine = logging.StreamHandler(io.StringIO())
    logger.addHandler(mine)
    try:
        pool_args(1, verbose=False)
        rays = [h for h in logger.handlers if type(h).__module__.startswith("ray.")]
        consoles = [h for h in rays if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
        assert consoles and all(h.level == logging.ERROR for h in consoles), logger.handlers
        assert mine.level == logging.NOTSET
    finally:
        logger.removeHandler(mine)
