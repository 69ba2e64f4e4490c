"""The batch jobs on the shared local Ray: re-embedding with live writes and searches, a killed
and resumed job, a finished job rerun, summaries, and the export read by Ray Data and DuckDB."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memray
from memray.config import EmbedderConfig, SummarizerConfig
from memray.embedding import HashEmbedder
from memray.embedding.static import StaticEmbedder
from memray.errors import ValidationError
from memray.jobs import backfill_embeddings, backfill_summaries
from memray.jobs.common import InjectedFailure, ProgressFile

pytestmark = pytest.mark.ray

NEW = EmbedderConfig(kind="hash", dim=128)
NEW_ID = "hash-v1-128"


def config(path: Path, **extra: Any) -> memray.MemoryConfig:
    return memray.MemoryConfig(
        **{"path": str(path), "mode": "ray", "hosts": 1, "shards": 2, "debounce_ms": 20, **extra}
    )


def seed(mem: memray.Memory, convs: int = 12, per: int = 25) -> int:
    mem.add_many(
        [
            (
                mem.conversation(user_id=f"u{c % 4}", conversation_id=f"c{c}").key,
                [{"role": "user", "content": f"note {i} of chat {c}: pears {i * c} plums"} for i in range(per)],
            )
            for c in range(convs)
        ]
    )
    assert mem.wait_indexed(60.0)
    return convs * per


def shard_stats(mem: memray.Memory) -> list[dict[str, Any]]:
    async def every_shard() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(s.stats() for s in mem.internals.deployment.shards)))

    return mem.internals.run(every_shard())


def store_vectors(mem: memray.Memory, model_id: str) -> dict[str, tuple[str, np.ndarray]]:
    """doc_id → (text, vector) of every stored vector of ``model_id``, through the store actor."""
    out: dict[str, tuple[str, np.ndarray]] = {}
    for shard in range(mem.config.shards):
        for store in mem.internals.deployment.stores.clients:  # every history partition
            rows = mem.internals.run(store.scan_index_rows(shard, mem.config.shards, model_id, None, 1_000_000))
            out.update({r.doc_id: (r.text, np.asarray(r.vector)) for r in rows})
    return out


def assert_fully_on_new_model(mem: memray.Memory, total: int) -> None:
    assert (
        mem.internals.run(mem.internals.deployment.stores.pending_embeddings(NEW_ID, 10)) == []
    )  # every item embedded
    vectors = store_vectors(mem, NEW_ID)
    # the job stores the vectors it makes; items written after the cutover are embedded by the
    # pipeline with the new (recomputable) model: marked embedded, their vectors only in the shards
    assert 0 < len(vectors) <= total
    texts = [t for t, _ in vectors.values()]
    expected = HashEmbedder(128).embed(texts)
    assert np.allclose(np.stack([v for _, v in vectors.values()]), expected, atol=1e-6)  # = an uninterrupted run
    stats = shard_stats(mem)
    assert {(s["model_id"], s["dim"], s["staged_model_id"], s["retired_model_id"]) for s in stats} == {
        (NEW_ID, 128, None, None)
    }
    assert sum(s["vectors"] for s in stats) == total == sum(s["items"] for s in stats)


@pytest.mark.long
def test_reembed_while_writing_and_searching(ray_session: None, tmp_path: Path) -> None:
    mem = memray.open(config=config(tmp_path))
    try:
        total = seed(mem)
        live = mem.conversation(user_id="writer", conversation_id="live")
        stop, added, errors, degraded = threading.Event(), [], [], []

        def writer() -> None:
            n = 0
            while not stop.is_set():
                try:
                    live.add({"role": "user", "content": f"live message {n} kiwis"})
                    added.append(n)
                    n += 1
                    res = mem.conversation(user_id="u1", conversation_id="c1").search("pears plums", limit=3)
                    if res.degraded:
                        degraded.append(res.reason)
                    elif not res:
                        errors.append("a search during the job found nothing")
                except Exception as exc:  # any exception fails the test below
                    errors.append(repr(exc))
                stop.wait(0.05)

        thread = threading.Thread(target=writer)
        thread.start()
        result = backfill_embeddings.run(mem.config, NEW, batch_size=64)  # default pool: 2 CPUs are enough
        stop.set()
        thread.join()
        assert mem.wait_indexed(60.0)
        assert not errors, errors
        # a search is refused (degraded), never answered from a mix, if it straddles the switch
        assert all("ModelMismatch" in (r or "") for r in degraded), degraded
        assert result["status"] == "done" and result["model"] == NEW_ID and result["workers"] == 2
        assert result["rows"] >= total
        assert len(live.messages()) == len(added) > 0  # no write lost
        assert_fully_on_new_model(mem, total + len(added))
        assert mem.config.embedder == NEW  # the facade's query embedder followed the record
        hits = live.search(f"live message {added[-1]} kiwis", limit=1, mode="vector")
        assert hits and hits[0].message.text == f"live message {added[-1]} kiwis"
        rerun = backfill_embeddings.run(mem.config, NEW, workers=1, batch_size=64, cpus_per_worker=0.5)
        assert rerun["rows"] == 0
    finally:
        mem.close(terminate=True)
    with memray.open(config=config(tmp_path, mode="inprocess")) as reopened:  # the record survives
        assert reopened.config.embedder == NEW
        assert {s["model_id"] for s in shard_stats(reopened)} == {NEW_ID}


@pytest.mark.long
def test_stopped_and_killed_job_resumes_to_the_state_of_an_uninterrupted_run(
    ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = memray.open(config=config(tmp_path, stores=2))  # one vector writer per history partition
    try:
        total = seed(mem, convs=16, per=20)
        before = shard_stats(mem)

        def run() -> dict[str, Any]:
            return backfill_embeddings.run(mem.config, NEW, workers=1, batch_size=40, cpus_per_worker=0.5)

        timed_out = backfill_embeddings.run(mem.config, NEW, workers=1, timeout_s=0.0)
        assert (timed_out["status"], timed_out["rows"]) == ("timed_out", 0)
        monkeypatch.setenv("MEMRAY_JOB_FAIL_AT", "bulk:1:sigint")  # Ctrl-C after the first batch is written
        stopped = run()
        assert stopped["status"] == "interrupted" and stopped["bulk_rows"] > 0  # (batches already embedded are kept)
        state = next(iter(Path(tmp_path, "jobs").glob("backfill-embeddings-*.json")))
        saved = ProgressFile(str(tmp_path), state.stem).load()
        assert saved is not None and saved["model_id"] == NEW_ID and saved["base"] == 0
        assert saved["written"] == stopped["bulk_rows"] == len(store_vectors(mem, NEW_ID))  # what was written is known
        assert "finished_at" not in saved
        after = shard_stats(mem)  # nothing staged, nothing switched: searches never noticed
        assert [(s["model_id"], s["staged_model_id"], s["vectors"]) for s in after] == [
            (s["model_id"], None, s["vectors"]) for s in before
        ]
        monkeypatch.setenv("MEMRAY_JOB_FAIL_AT", "cutover:1")  # dies after the first shard cut over
        with pytest.raises(InjectedFailure):
            run()
        default_id = StaticEmbedder().model_id  # what the memray was opened with
        assert sorted(s["model_id"] for s in shard_stats(mem)) == sorted([default_id, NEW_ID])
        monkeypatch.delenv("MEMRAY_JOB_FAIL_AT")
        assert run()["status"] == "done"
        assert_fully_on_new_model(mem, total)
        again = run()
        assert (again["rows"], again["bulk_rows"], again["staged_vectors"]) == (0, 0, 0)
    finally:
        mem.close(terminate=True)


def _every_cpu_free(timeout_s: float = 60.0) -> None:
    """Wait (on Ray's state, bounded) until no CPU of the session is reserved: an earlier test's
    Ray Data tasks hand their CPU back asynchronously, after the call that ran them returned."""
    import ray

    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU") != ray.cluster_resources().get("CPU"):
        assert time.monotonic() < deadline, f"CPUs still reserved after {timeout_s:g} s: {ray.available_resources()}"
        time.sleep(0.05)


def test_a_pool_that_cannot_fit_is_refused_before_anything_starts(ray_session: None, tmp_path: Path) -> None:
    import ray

    _every_cpu_free()  # the refusal below is for a cluster with 2 CPUs free
    with pytest.raises(ValidationError, match="the pool cannot fit") as err:
        backfill_embeddings.run(config(tmp_path), NEW, workers=2, cpus_per_worker=1.0)  # the read task: no slot
    assert "--workers 1 or fewer" in str(err.value)
    assert not Path(tmp_path, "jobs").exists() and not Path(tmp_path, "history.duckdb").exists()
    assert ray.available_resources().get("CPU") == 2.0  # nothing was left holding CPUs


@pytest.mark.long
def test_summary_backfill_updates_every_conversation_once(ray_session: None, tmp_path: Path) -> None:
    cfg = config(tmp_path, summarizer=SummarizerConfig(trigger_tokens=1_000_000, keep_messages=2))
    mem = memray.open(config=cfg)
    try:
        seed(mem, convs=6, per=8)
        assert all(mem.conversation(user_id=f"u{c % 4}", conversation_id=f"c{c}").summary() is None for c in range(6))
        first = backfill_summaries.run(mem.config, workers=1, force=True, cpus_per_worker=0.5)
        assert (first["conversations"], first["updated"], first["failed"]) == (6, 6, 0)
        for c in range(6):
            text = mem.conversation(user_id=f"u{c % 4}", conversation_id=f"c{c}").summary()
            assert text and f"chat {c}" in text
        second = backfill_summaries.run(mem.config, workers=1, force=True, cpus_per_worker=0.5)
        assert (second["updated"], second["unchanged"]) == (0, 6)
    finally:
        mem.close(terminate=True)


@pytest.mark.long
def test_export_is_read_by_ray_data_and_duckdb(ray_session: None, tmp_path: Path) -> None:
    import duckdb
    import ray.data

    with memray.open(config=config(tmp_path, mode="inprocess")) as mem:
        conv = mem.conversation(user_id="u1", conversation_id=uuid.uuid4().hex, app="a/b c")
        conv.add([{"role": "user", "content": f"m{i}"} for i in range(7)])
        manifest = mem.export()
        assert manifest["rows"] == 7 and manifest["files"]
        assert mem.export()["rows"] == 0  # incremental: nothing changed since
    root = Path(mem.config.exports_path)
    ds = ray.data.read_parquet(str(root / "messages"))
    assert ds.count() == 7 and set(ds.unique("app")) == {"a/b c"}
    got = duckdb.sql(
        f"SELECT app, count(*) FROM read_parquet('{root}/messages/*/*/*.parquet', hive_partitioning=true) GROUP BY app"
    ).fetchall()
    assert got == [("a/b c", 7)]
