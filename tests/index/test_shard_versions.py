"""Model versions on a shard: stage a new model next to the active one, cut over in one call,
answer each query from exactly one model's indexes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memray.config import IndexConfig
from memray.errors import ModelMismatchError
from memray.ids import Namespace
from memray.index import IndexItem, VectorShard
from memray.store.base import IndexRow
from tests.index.conftest import find, unit

OLD, NEW = "old-16", "new-8"
NS = Namespace("app", "u1", "conv", "c1")


def make(tmp_path: Path, threshold: int = 30) -> VectorShard:
    shard = VectorShard(0, str(tmp_path / "shard"), 16, OLD, IndexConfig(exact_threshold=threshold))
    shard.open()
    return shard


def seeded(tmp_path: Path, n: int = 40, threshold: int = 30) -> tuple[VectorShard, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    old, new = unit(rng, n, 16), unit(rng, n, 8)
    shard = make(tmp_path, threshold)
    shard.upsert([IndexItem(NS, f"m{i}", v, f"text {i}", float(i), f'{{"i": {i}}}') for i, v in enumerate(old)], OLD)
    return shard, old, new


def rows(new: np.ndarray, ids: range) -> list[IndexRow]:
    return [IndexRow(NS, f"m{i}", new[i], f"text {i}", float(i)) for i in ids]


def test_staged_vectors_are_invisible_until_cutover_then_only_they_answer(tmp_path: Path) -> None:
    shard, old, new = seeded(tmp_path)
    assert shard.stage_begin(NEW, 8)
    assert shard.stage_upsert(rows(new, range(40)), NEW) == 40
    assert shard.stats()["staged_vectors"] == 40
    hit = find(shard, [NS], old[3], "", 1, "vector")  # active: the old model
    assert hit[0].doc_id == "m3"
    with pytest.raises(ModelMismatchError):
        find(shard, [NS], new[3], "", 1, "vector")  # a new-model query before the cutover
    assert shard.cutover(NEW)
    stats = shard.stats()
    assert (stats["model_id"], stats["dim"], stats["staged_model_id"], stats["retired_model_id"]) == (NEW, 8, None, OLD)
    assert find(shard, [NS], new[5], "", 1, "vector", model_id=NEW)[0].doc_id == "m5"
    assert find(shard, [NS], new[5], "", 1, "vector")[0].payload == '{"i": 5}'  # payloads are shared
    # a driver still on the old model is answered from the retired indexes, not a mix
    assert find(shard, [NS], old[7], "", 1, "vector", model_id=OLD)[0].doc_id == "m7"
    shard.retire_release()
    with pytest.raises(ModelMismatchError):
        find(shard, [NS], old[7], "", 1, "vector", model_id=OLD)


def test_upserts_of_the_staged_model_go_to_the_stage_and_others_are_refused(tmp_path: Path) -> None:
    shard, old, new = seeded(tmp_path, n=10)
    shard.stage_begin(NEW, 8)
    shard.stage_upsert(rows(new, range(10)), NEW)
    extra = unit(np.random.default_rng(1), 1, 8)[0]
    shard.upsert([IndexItem(NS, "late", extra, "late words", 99.0)], NEW)  # a host already switched
    assert find(shard, [NS], None, "late words", 1, "lexical")[0].doc_id == "late"  # text is live now
    with pytest.raises(ModelMismatchError):
        shard.upsert([IndexItem(NS, "x", extra, "x", 1.0)], "third-8")
    shard.delete([(NS, "m0")])
    shard.cutover(NEW)
    assert find(shard, [NS], extra, "", 1, "vector")[0].doc_id == "late"
    assert shard.stats()["vectors"] == 10  # 10 staged + late - deleted m0
    with pytest.raises(ModelMismatchError):
        shard.upsert([IndexItem(NS, "y", old[0], "y", 1.0)], OLD)  # the old model is gone for writes


def test_cutover_is_idempotent_snapshots_on_the_new_model_and_needs_a_stage(tmp_path: Path) -> None:
    shard, _, new = seeded(tmp_path, n=40, threshold=30)
    with pytest.raises(ModelMismatchError):
        shard.cutover(NEW)
    shard.stage_begin(NEW, 8)
    shard.stage_upsert(rows(new, range(40)), NEW)
    assert shard.cutover(NEW)
    assert shard.stats()["hnsw_namespaces"] == 1  # the staged set was promoted like an active one
    assert not shard.cutover(NEW) and not shard.stage_begin(NEW, 8)  # a resumed job: no-ops
    shard.snapshot()
    reopened = VectorShard(0, shard.path, 8, NEW, IndexConfig(exact_threshold=30))
    reopened.open()
    assert reopened.stats()["vectors"] == 40
    assert find(reopened, [NS], new[9], "", 1, "vector")[0].doc_id == "m9"


def test_stage_abort_drops_the_stage(tmp_path: Path) -> None:
    shard, _, new = seeded(tmp_path, n=5)
    shard.stage_begin(NEW, 8)
    shard.stage_upsert(rows(new, range(5)), NEW)
    shard.stage_abort()
    assert shard.stats()["staged_model_id"] is None
    with pytest.raises(ModelMismatchError):
        shard.stage_upsert(rows(new, range(1)), NEW)


def test_staged_rows_of_another_dim_are_refused_before_any_is_written(tmp_path: Path) -> None:
    shard, old, new = seeded(tmp_path, n=5)
    shard.stage_begin(NEW, 8)
    unknown = IndexRow(NS, "new-item", new[0], "words never seen", 50.0)
    wrong = IndexRow(NS, "m1", old[1], "text 1", 1.0)  # the old model's 16 floats
    with pytest.raises(ModelMismatchError, match="dim 16"):
        shard.stage_upsert([unknown, wrong], NEW)
    assert shard.stats()["staged_vectors"] == 0 and shard.stats()["items"] == 5
    assert find(shard, [NS], None, "words never seen", 1, "lexical") == []
