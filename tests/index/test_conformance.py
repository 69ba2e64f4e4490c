"""One conformance suite every VectorIndex runs (ExactIndex, HnswIndex), plus HNSW specifics."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from memray.config import IndexConfig
from memray.errors import ModelMismatchError
from memray.index import ExactIndex, HnswIndex, VectorIndex, load_index
from tests.index.conftest import clustered, unit

DIM = 16
Factory = Callable[[], ExactIndex | HnswIndex]

FACTORIES: dict[str, Factory] = {
    "exact": lambda: ExactIndex(DIM, capacity=2),
    "hnsw": lambda: HnswIndex(DIM, m=8, ef_construction=100, ef=32, capacity=4),
}


@pytest.fixture(params=sorted(FACTORIES))
def make(request: pytest.FixtureRequest) -> Factory:
    return FACTORIES[request.param]


def labels(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def test_is_a_vector_index(make: Factory) -> None:
    index = make()
    assert isinstance(index, VectorIndex)
    assert index.dim == DIM and len(index) == 0


def test_empty_index_returns_empty_not_error(make: Factory) -> None:
    index = make()
    got, sims = index.search(np.ones(DIM, dtype=np.float32) / 4, 10)
    assert got.shape == (1, 0) and sims.shape == (1, 0)
    got, _ = index.search(np.ones((3, DIM), dtype=np.float32) / 4, 0)
    assert got.shape == (3, 0)


def test_add_then_search_finds_itself_with_cosine_one(make: Factory) -> None:
    rng = np.random.default_rng(0)
    vecs = unit(rng, 50, DIM)
    index = make()
    index.add(np.arange(100, 150), vecs)  # grows past the initial capacity
    assert len(index) == 50
    got, sims = index.search(vecs[:5], 3)
    assert got.dtype == np.int64 and sims.dtype == np.float32
    assert got[:, 0].tolist() == list(range(100, 105))
    assert np.allclose(sims[:, 0], 1.0, atol=1e-5)
    assert np.all(np.diff(sims, axis=1) <= 1e-6)  # best first


def test_k_is_clamped_to_live_items(make: Factory) -> None:
    rng = np.random.default_rng(1)
    index = make()
    index.add(labels(1, 2, 3), unit(rng, 3, DIM))
    got, sims = index.search(unit(rng, 1, DIM), 10)
    assert got.shape == (1, 3) and sorted(got[0].tolist()) == [1, 2, 3]
    index.delete(labels(2))
    got, _ = index.search(unit(rng, 2, DIM), 10)
    assert got.shape == (2, 2) and sorted(got[0].tolist()) == [1, 3]


def test_upsert_replaces_vector(make: Factory) -> None:
    eye = np.eye(DIM, dtype=np.float32)
    index = make()
    index.add(labels(7, 8), eye[:2])
    index.add(labels(7), eye[5:6])  # re-add: replaces, no duplicate
    assert len(index) == 2
    got, sims = index.search(eye[5], 2)
    assert got[0].tolist()[0] == 7 and sims[0, 0] == pytest.approx(1.0, abs=1e-5)
    got, sims = index.search(eye[0], 2)
    assert 7 in got[0].tolist() and sims[0, got[0].tolist().index(7)] == pytest.approx(0.0, abs=1e-5)


def test_repeated_label_in_one_add_keeps_last(make: Factory) -> None:
    eye = np.eye(DIM, dtype=np.float32)
    index = make()
    index.add(labels(1, 1), eye[:2])
    assert len(index) == 1
    got, sims = index.search(eye[1], 1)
    assert got[0, 0] == 1 and sims[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_delete_and_readd(make: Factory) -> None:
    rng = np.random.default_rng(2)
    vecs = unit(rng, 20, DIM)
    index = make()
    index.add(np.arange(20), vecs)
    assert index.delete(labels(3, 4, 999)) == 2
    assert index.delete(labels(3)) == 0
    assert len(index) == 18
    got, _ = index.search(vecs[3], 18)
    assert 3 not in got[0].tolist() and 4 not in got[0].tolist()
    index.add(labels(3), vecs[3:4])  # re-adding a deleted label
    got, sims = index.search(vecs[3], 1)
    assert got[0, 0] == 3 and sims[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert len(index) == 19


def test_delete_everything(make: Factory) -> None:
    rng = np.random.default_rng(3)
    index = make()
    index.add(np.arange(10), unit(rng, 10, DIM))
    index.delete(np.arange(10))
    assert len(index) == 0
    assert index.search(unit(rng, 1, DIM), 5)[0].shape == (1, 0)


def test_wrong_dim_raises_model_mismatch(make: Factory) -> None:
    index = make()
    with pytest.raises(ModelMismatchError, match="re-embed"):
        index.add(labels(1), np.ones((1, DIM + 1), dtype=np.float32))
    with pytest.raises(ModelMismatchError):
        index.search(np.ones(DIM - 1, dtype=np.float32), 1)
    assert len(index) == 0


def test_save_load_round_trip(make: Factory, tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    vecs = unit(rng, 40, DIM)
    index = make()
    index.add(np.arange(40), vecs)
    index.delete(labels(5))
    index.save(str(tmp_path / "ix"))
    loaded = load_index(str(tmp_path / "ix"))
    assert type(loaded) is type(index) and len(loaded) == 39
    q = unit(rng, 4, DIM)
    a, sa = index.search(q, 10)
    b, sb = loaded.search(q, 10)
    assert a.tolist() == b.tolist() and np.allclose(sa, sb, atol=1e-6)
    assert 5 not in loaded.search(vecs[5], 39)[0][0].tolist()
    # saving again replaces the generation; no stale files, nothing pickled
    loaded.add(labels(5), vecs[5:6])
    loaded.save(str(tmp_path / "ix"))
    names = sorted(os.listdir(tmp_path / "ix"))
    assert all(".1." not in n for n in names) and "meta.json" in names
    assert not any(n.endswith((".pkl", ".pickle", ".tmp")) for n in names)
    assert len(load_index(str(tmp_path / "ix"))) == 40


def test_hnsw_ef_and_params_persisted(tmp_path: Path) -> None:
    index = HnswIndex(DIM, m=8, ef_construction=90, ef=77, compact_ratio=0.4)
    index.add(labels(1, 2), unit(np.random.default_rng(5), 2, DIM))
    index.save(str(tmp_path))
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["ef"] == 77 and meta["m"] == 8 and meta["compact_ratio"] == 0.4
    loaded = HnswIndex.load(str(tmp_path))
    assert (loaded.ef, loaded.m, loaded.ef_construction, loaded.num_threads) == (77, 8, 90, 1)


def test_hnsw_capacity_doubles_and_compacts() -> None:
    rng = np.random.default_rng(6)
    vecs = unit(rng, 300, DIM)
    index = HnswIndex(DIM, m=8, ef_construction=60, compact_ratio=0.25, capacity=64)
    index.add(np.arange(300), vecs)
    assert index.capacity == 512  # 64 -> 128 -> 256 -> 512
    index.delete(np.arange(70))  # 70/300 tombstones: under the ratio
    assert index.tombstones == 70 and index.compactions == 0
    index.delete(np.arange(70, 80))  # 80/300 > 0.25: rebuilt
    assert index.tombstones == 0 and index.compactions == 1 and len(index) == 220
    got, sims = index.search(vecs[150], 1)
    assert got[0, 0] == 150 and sims[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_hnsw_search_survives_tombstone_heavy_graph() -> None:
    # compact_ratio near 1 keeps tombstones, so hnswlib may not reach k live items: no raise
    rng = np.random.default_rng(7)
    index = HnswIndex(DIM, m=4, ef_construction=20, ef=4, compact_ratio=0.99)
    index.add(np.arange(200), unit(rng, 200, DIM))
    index.delete(np.arange(0, 195))
    got, sims = index.search(unit(rng, 3, DIM), 5)
    assert got.shape[0] == 3 and 1 <= got.shape[1] <= 5
    assert set(got.ravel().tolist()) <= set(range(195, 200))


def test_hnsw_recall_at_10_vs_exact_on_clustered_data() -> None:
    rng = np.random.default_rng(8)
    dim = 64
    data = clustered(rng, 5000, dim, 50, spread=1.0)
    queries = clustered(rng, 200, dim, 50, spread=1.0)
    exact = ExactIndex(dim)
    exact.add(np.arange(5000), data)
    cfg = IndexConfig()  # the defaults a shard promotes namespaces with
    hnsw = HnswIndex(dim, m=cfg.hnsw_m, ef_construction=cfg.hnsw_ef_construction, ef=cfg.hnsw_ef)
    hnsw.add(np.arange(5000), data)
    truth, _ = exact.search(queries, 10)
    got, _ = hnsw.search(queries, 10)
    recall = np.mean([len(set(t) & set(g)) / 10 for t, g in zip(truth.tolist(), got.tolist())])
    assert recall >= 0.95, recall
