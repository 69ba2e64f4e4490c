"""Stream scoring and time windows inside a shard: the formula, the relevance floor, exact and
HNSW namespaces agreeing, and the per-item columns surviving snapshots (old ones included)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memray.config import IndexConfig
from memray.ids import Namespace
from memray.index import IndexItem, VectorShard
from memray.index.columns import ItemColumns, columns_of, snapshot_columns
from memray.index.scorer import in_window, stream_scores
from memray.ranking import Stream
from memray.sim_time import Window
from memray.store.base import IndexRow
from memray.text import text_id
from tests.index.conftest import query, unit

DIM = 16
NS = Namespace("app", "u1", "conv", "c1")
H = 3600.0
NAN = math.nan


def test_stream_score_is_the_documented_weighted_mean():
    cols = np.array([[0.0, 0.0, 0.5], [0.0, 10 * H, NAN], [0.0, NAN, 1.0], [0.0, 30 * H, 0.2]])
    rel = np.array([0.8, 0.4, 0.6, 0.9])
    got = stream_scores(rel, cols, Stream(20 * H, 0.9, 2.0, 1.0, 1.0))
    recency = [0.9**20, 0.9**10, 0.0, 1.0]  # in the future: no decay
    importance = [0.5, 0.0, 1.0, 0.2]
    want = [(2 * r + i + v) / 4 for r, i, v in zip(recency, importance, rel)]
    assert got.tolist() == pytest.approx(want)


def test_the_window_and_the_relevance_floor_come_before_stream_scoring(tmp_path: Path):
    cols = [(5.0, 1.0 * H, 1.0), (6.0, 2.0 * H, 1.0), (7.0, NAN, 1.0), (8.0, 3.0 * H, 1.0)]
    texts = ["weather report", "market stall", "market stall stall", "market"]
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", IndexConfig(neighbour_weight=0.0))
    shard.upsert(
        [IndexItem(NS, f"m{i}", None, t, float(i + 1), "", 0, c) for i, (t, c) in enumerate(zip(texts, cols))], "m"
    )
    stream = Stream(3.0 * H, 1.0, 1.0, 1.0, 0.0)  # relevance weight 0: still has to pass the floor

    def ids(min_score: float | None, window: Window | None = None) -> list[str]:
        q = query(None, "market", k=10, mode="lexical", min_score=min_score)._replace(stream=stream, window=window)
        return [h.doc_id for h in shard.search([NS], q).hits]

    assert ids(None) == ["m3", "m1", "m2"]  # m0 shares no word: recency and importance cannot lift it
    assert sorted(ids(0.0)) == ["m0", "m1", "m2", "m3"]  # no floor: every item is a candidate
    assert ids(None, Window(after=2.0 * H, before=3.0 * H)) == ["m1"]  # [after, before); no sim_time: outside
    everything = np.array(cols)
    assert in_window(everything, Window(after=2.0 * H, before=3.0 * H)).tolist() == [False, True, False, False]
    assert in_window(everything, Window(created_after=6.0, created_before=8.0)).tolist() == [False, True, True, False]


def test_item_columns_grow_clear_and_read_unknown_labels_as_none():
    cols = ItemColumns()
    cols.set(9, (1.0, 2.0, 0.5))
    assert cols.get(9) == (1.0, 2.0, 0.5) and len(cols) >= 10
    assert all(math.isnan(v) for v in cols.get(3)) and all(math.isnan(v) for v in cols.get(100))
    cols.clear(9)
    assert np.isnan(cols.rows([9, 50])).all()


def _stream_items(n: int) -> list[IndexItem]:
    vecs = unit(np.random.default_rng(3), n, DIM)
    return [
        IndexItem(
            NS, f"m{i}", vecs[i], f"market stall {i}", float(i + 1), "", 0, columns_of(1000.0 + i, i * H, (i % 5) / 4)
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("threshold", [1000, 8], ids=["exact", "hnsw"])
def test_shard_stream_and_window_search_match_a_brute_force_oracle(tmp_path: Path, threshold: int):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", IndexConfig(exact_threshold=threshold, neighbour_weight=0.0))
    shard.open()
    data = _stream_items(40)
    shard.upsert(data, "m")
    stream = Stream(39 * H, 0.95, 1.0, 1.0, 1.0)
    q = query(None, "market stall", k=5, mode="lexical")._replace(stream=stream)
    hits = shard.search([NS], q).hits
    # lexical relevance is the same for every item (each holds both words once): recency and
    # importance decide
    rel = 1.0
    want = sorted(data, key=lambda it: -((0.95 ** ((39 * H - it.columns[1]) / H)) + it.columns[2] + rel) / 3)[:5]
    assert [h.doc_id for h in hits] == [it.doc_id for it in want]
    window = Window(after=10 * H, before=20 * H)
    vec = data[15].vector
    got = shard.search([NS], query(vec, "", k=40, mode="vector", min_score=0.0)._replace(window=window)).hits
    assert sorted(h.doc_id for h in got) == sorted(f"m{i}" for i in range(10, 20))
    assert got[0].doc_id == "m15"
    created = shard.search(
        [NS],
        query(None, "market", k=40, mode="lexical")._replace(
            window=Window(created_after=1005.0, created_before=1008.0)
        ),
    ).hits
    assert sorted(h.doc_id for h in created) == ["m5", "m6", "m7"]


def test_columns_survive_snapshots_and_upserts_without_columns_keep_them(tmp_path: Path):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", IndexConfig())
    shard.open()
    shard.upsert(_stream_items(3), "m")
    shard.upsert([IndexItem(NS, "m1", None, "market stall 1 updated", 2.0)], "m")  # columns unknown: kept
    shard.snapshot()
    again = VectorShard(0, str(tmp_path / "s"), DIM, "m", IndexConfig())
    again.open()
    space = again._spaces[NS]
    assert space.columns.get(space.labels["m1"]) == (1001.0, 1 * H, 0.25)
    hits = again.search([NS], query(None, "market", k=3, mode="lexical")._replace(window=Window(after=2 * H))).hits
    assert [h.doc_id for h in hits] == ["m2"]


def test_a_snapshot_written_before_the_columns_existed_loads_them_from_the_payloads(tmp_path: Path):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", IndexConfig())
    shard.open()
    msg = json.dumps(
        {"id": "a", "role": "user", "parts": [], "created_at": 1234.5, "metadata": {}, "seq": 1, "sim_time": 60.0}
    )
    entry = json.dumps({"entry": {"id": "e", "content": "x", "timestamp": 99.0, "importance": 0.7}})
    vec = unit(np.random.default_rng(0), 3, DIM)
    shard.upsert(
        [
            IndexItem(NS, "a", vec[0], "alpha", 1.0, msg),
            IndexItem(NS, "b", vec[1], "beta", 2.0),
            IndexItem(Namespace("app", "u1", "entry", ""), "e", vec[2], "x", 99.0, entry),
        ],
        "m",
    )
    shard.snapshot()
    # the layout of that memray: one items.parquet and one vectors.npy, no segments listed
    folder = Path(shard.path) / str(shard._snap_name)
    meta = json.loads((folder / "shard.json").read_text())
    (segment,) = meta.pop("segments")
    (folder / segment[1]).rename(folder / "vectors.npy")
    (folder / "shard.json").write_text(json.dumps(meta))
    items = str(folder / "items.parquet")
    old = pq.read_table(folder / segment[0]).drop_columns(["created_at", "sim_time", "importance", "text_id"])
    pq.write_table(old, items)
    (folder / segment[0]).unlink()
    assert "sim_time" not in pq.read_table(items).column_names
    again = VectorShard(0, shard.path, DIM, "m", IndexConfig())
    again.open()
    conv, ent = again._spaces[NS], again._spaces[Namespace("app", "u1", "entry", "")]
    assert conv.columns.get(conv.labels["a"])[:2] == (1234.5, 60.0)
    assert all(math.isnan(v) for v in conv.columns.get(conv.labels["b"]))
    assert ent.columns.get(ent.labels["e"])[0] == 99.0 and ent.columns.get(ent.labels["e"])[2] == 0.7
    assert snapshot_columns(pa.table({"payload": [""]}).to_pydict())[0] != (0.0, 0.0, 0.0)
    # no text identity either (never merged by a search for distinct texts), until the shard takes
    # the item again: a reconcile with the store's rows (a Ray shard's recovery pass) does
    labels = np.array([conv.labels["a"], conv.labels["b"]])
    assert conv.text_ids(labels).tolist() == [0, 0]
    assert again.reconcile([IndexRow(NS, "a", vec[0], "alpha", 1.0, conv.columns.get(conv.labels["a"]))]) == 1
    assert conv.text_ids(labels).tolist() == [text_id("alpha"), 0]


def test_reconcile_fixes_stale_columns(tmp_path: Path):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", IndexConfig())
    shard.open()
    shard.upsert([IndexItem(NS, "a", None, "alpha", 1.0, "", 0, columns_of(1.0, None, None))], "m")
    row = IndexRow(NS, "a", None, "alpha", 1.0, columns_of(1.0, 5.0, 0.5))
    assert shard.reconcile([row]) == 1
    space = shard._spaces[NS]
    assert space.columns.get(space.labels["a"]) == (1.0, 5.0, 0.5)
    assert shard.reconcile([row]) == 0
