"""The active-model record: written atomically, read back, and preferred over the config."""

from __future__ import annotations

from pathlib import Path

import memray
from memray.config import EmbedderConfig, MemoryConfig
from memray.embedding.active import ModelWatcher, read_active_model, resolve_config, write_active_model


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
