"""Job arguments without Ray: model specs, config from flags, progress files, fail points."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.backfill_embeddings import build_parser, parse_model
from jobs.common import InjectedFailure, ProgressFile, config_from_args, fail_point
from memray.errors import ValidationError


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
    args = build_parser().parse_args(
        ["--path", str(tmp_path), "--model", "hash:8", "--config", str(cfg_file), "--shards", "5"]
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
