"""The active-model record: written atomically, read back, and preferred over the config."""

from __future__ import annotations

import logging
import tarfile
from pathlib import Path

import pytest

import memray
from memray.config import EmbedderConfig, MemoryConfig
from memray.embedding.active import ModelWatcher, read_active_model, resolve_config, write_active_model
from memray.jobs import backfill_embeddings
from memray.jobs.backfill_embeddings import parse_model


def test_record_round_trips_and_wins_over_the_config(tmp_path: Path) -> None:
    cfg = MemoryConfig(path=str(tmp_path), mode="inprocess")
    assert read_active_model(cfg.root) is None and resolve_config(cfg) is cfg
    target = EmbedderConfig(kind="hash", dim=64)
    write_active_model(cfg.root, target, "hash-v1-64", 64)
    assert read_active_model(cfg.root).embedder == target  # type: ignore[union-attr]
    assert resolve_config(cfg).embedder == target
    assert [p.name for p in tmp_path.iterdir()] == ["model.json"]  # no temp file left behind


def test_watcher_reports_each_change_once(tmp_path: Path) -> None:
    watcher = ModelWatcher(str(tmp_path))
    assert watcher.changed() is None
    write_active_model(str(tmp_path), EmbedderConfig(kind="hash", dim=32), "hash-v1-32", 32)
    first = watcher.changed()
    assert first is not None and first.dim == 32
    assert watcher.changed() is None


def test_open_uses_the_recorded_model_and_a_running_facade_follows_it(tmp_path: Path) -> None:
    with memray.open(str(tmp_path), mode="inprocess", shards=1, hosts=1) as mem:
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add({"role": "user", "content": "apples and pears"})
        assert mem.wait_indexed(10.0)
        assert mem.config.embedder.dim == 256
        write_active_model(mem.config.root, EmbedderConfig(kind="hash", dim=64), "hash-v1-64", 64)
        results = conv.search("apples", mode="lexical")  # the search checks the record first
        assert [h.message.text for h in results] == ["apples and pears"]
        assert mem.config.embedder.dim == 64
    with memray.open(str(tmp_path), mode="inprocess", shards=1, hosts=1) as mem:
        assert mem.config.embedder.dim == 64


LEGACY = Path(__file__).resolve().parents[1] / "data" / "datadir-v0.1.0.tgz"


def test_a_new_directory_records_the_default_it_was_made_with(tmp_path: Path) -> None:
    with memray.open(str(tmp_path / "new"), mode="inprocess") as mem:
        mem.conversation(user_id="u", conversation_id="c").add({"role": "user", "content": "hello"})
    record = read_active_model(str(tmp_path / "new"))
    assert record is not None and record.embedder == EmbedderConfig() and record.model_id.startswith("static:")
    with memray.open(str(tmp_path / "explicit"), mode="inprocess", embedder="hash"):
        pass
    assert read_active_model(str(tmp_path / "explicit")) is None  # a configured model is the caller's to pass


@pytest.mark.long
@pytest.mark.ray
def test_a_directory_made_with_the_hash_default_keeps_it_says_so_and_is_re_embedded_by_one_command(
    tmp_path: Path, ray_session: None, caplog: pytest.LogCaptureFixture
) -> None:
    with tarfile.open(LEGACY) as tar:
        tar.extractall(tmp_path, filter="data")
    data = str(tmp_path / "data")
    with caplog.at_level(logging.WARNING, logger="memray.embedding.active"):
        with memray.open(data, mode="inprocess", hosts=1, shards=1) as mem:
            assert mem.config.embedder == EmbedderConfig(kind="hash")  # the model its vectors are of
            conv = mem.conversation(user_id="ada", conversation_id="c1", app="legacy")
            assert [h.message.id for h in conv.search("bees roof", limit=1)] == ["m1"]
            conv.add({"id": "m9", "role": "user", "content": "I drive a red Tesla Model 3"}, durable=True)
            assert conv.search("what car do I own?") == []  # words only: the hash embedder
    said = [r.getMessage() for r in caplog.records if "made with the hash embedder" in r.getMessage()]
    assert said and "memray backfill embeddings" in said[0] and "--model static" in said[0]

    mem = memray.open(data, mode="ray", hosts=1, shards=1, debounce_ms=20)  # what the command runs
    try:
        result = backfill_embeddings.run(mem.config, parse_model("static"), workers=1, cpus_per_worker=0.5)
    finally:
        mem.close(terminate=True)
    assert result["status"] == "done" and result["model"] == "static:minilm-static-v1:384"
    record = read_active_model(data)
    assert record is not None and record.embedder.kind == "static"
    with memray.open(data, mode="inprocess", hosts=1, shards=1) as mem:
        conv = mem.conversation(user_id="ada", conversation_id="c1", app="legacy")
        assert [h.message.id for h in conv.search("what car do I own?", limit=1)] == ["m9"]  # meaning, now
        assert [h.message.id for h in conv.search("bees roof", limit=1)] == ["m1"]
