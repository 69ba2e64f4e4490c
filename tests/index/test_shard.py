from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from memray.config import IndexConfig
from memray.errors import ModelMismatchError
from memray.index import IndexItem, ShardHit, VectorShard
from memray.store.base import IndexRow
from memray.store.rows import Namespace
from tests.index.conftest import clustered, unit

DIM = 16
MODEL = "hash-v1"
NS = Namespace("app", "u1", "conv", "c1")
NS2 = Namespace("app", "u1", "conv", "c2")
OTHER = Namespace("app", "u2", "conv", "c1")


def make(tmp_path: Path, threshold: int = 30, model: str = MODEL) -> VectorShard:
    shard = VectorShard(0, str(tmp_path / "shard"), DIM, model, IndexConfig(exact_threshold=threshold))
    shard.open()
    return shard


def items(ns: Namespace, vecs: np.ndarray, prefix: str = "m", texts: list[str] | None = None) -> list[IndexItem]:
    return [
        IndexItem(ns, f"{prefix}{i}", v, texts[i] if texts else f"message {prefix}{i}", float(i))
        for i, v in enumerate(vecs)
    ]


def doc_ids(hits: list[ShardHit]) -> list[str]:
    return [h.doc_id for h in hits]


def test_promotion_and_demotion_keep_results(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vecs = clustered(rng, 120, DIM, 4, spread=1.0)
    queries = unit(rng, 5, DIM)
    oracle = make(tmp_path / "o", threshold=10_000)
    shard = make(tmp_path)
    for target in (oracle, shard):
        target.upsert(items(NS, vecs[:20]), MODEL)
    assert shard.stats()["hnsw_namespaces"] == 0
    for target in (oracle, shard):
        target.upsert(items(NS, vecs)[20:], MODEL)
    assert shard.stats()["hnsw_namespaces"] == 1 and oracle.stats()["hnsw_namespaces"] == 0
    for q in queries:
        assert doc_ids(shard.search([NS], q, "", 10, "vector")) == doc_ids(oracle.search([NS], q, "", 10, "vector"))
    refs = [(NS, f"m{i}") for i in range(110)]
    assert shard.delete(refs) == 110 and oracle.delete(refs) == 110
    assert shard.stats()["hnsw_namespaces"] == 0  # 10 < 30 // 2: back to exact
    for q in queries:
        got = shard.search([NS], q, "", 10, "vector")
        assert doc_ids(got) == doc_ids(oracle.search([NS], q, "", 10, "vector")) and len(got) == 10


def test_wrong_model_or_dim_raises_and_writes_nothing(tmp_path: Path) -> None:
    shard = make(tmp_path)
    vecs = unit(np.random.default_rng(1), 3, DIM)
    with pytest.raises(ModelMismatchError, match="backfill"):
        shard.upsert(items(NS, vecs), "other-model")
    bad = items(NS, vecs) + [IndexItem(NS, "x", np.ones(DIM + 2, dtype=np.float32), "x", 0.0)]
    with pytest.raises(ModelMismatchError, match="re-embed"):
        shard.upsert(bad, MODEL)
    assert shard.stats()["items"] == 0
    with pytest.raises(ModelMismatchError):
        shard.search([NS], np.ones(DIM - 1, dtype=np.float32), "", 3, "vector")
    assert pickle.loads(pickle.dumps(ModelMismatchError("re-embed"))).args == ("re-embed",)


def test_upsert_replaces_and_none_vector_keeps_old(tmp_path: Path) -> None:
    shard = make(tmp_path)
    eye = np.eye(DIM, dtype=np.float32)
    shard.upsert([IndexItem(NS, "a", eye[0], "apples", 1.0), IndexItem(NS, "b", eye[1], "bananas", 2.0)], MODEL)
    shard.upsert([IndexItem(NS, "a", None, "cherries", 3.0)], MODEL)  # text only: vector stays
    assert shard.stats()["items"] == 2 and shard.stats()["vectors"] == 2
    assert doc_ids(shard.search([NS], None, "cherries", 5, "lexical")) == ["a"]
    assert shard.search([NS], None, "apples", 5, "lexical") == []
    top = shard.search([NS], eye[0], "", 1, "vector")[0]
    assert top.doc_id == "a" and top.score == pytest.approx(1.0) and top.recency == 3.0
    shard.upsert([IndexItem(NS, "a", eye[2], "cherries", 3.0)], MODEL)
    assert shard.search([NS], eye[2], "", 1, "vector")[0].doc_id == "a"


def test_scores_modes_and_min_score(tmp_path: Path) -> None:
    shard = make(tmp_path)
    v = np.zeros((3, DIM), dtype=np.float32)
    v[0, 0] = 1.0
    v[1, :2] = [0.8, 0.6]  # cosine 0.8 with e0
    v[2, 1] = 1.0  # cosine 0 with e0
    shard.upsert(items(NS, v, texts=["dark mode", "light theme", "dark chocolate dark"]), MODEL)
    q = np.eye(DIM, dtype=np.float32)[0]
    hits = shard.search([NS], q, "", 5, "vector")
    assert doc_ids(hits) == ["m0", "m1", "m2"]
    assert [round(h.score, 5) for h in hits] == [1.0, 0.8, 0.0]  # cosine, clipped; not (cos+1)/2
    assert doc_ids(shard.search([NS], q, "", 5, "vector", min_score=0.7)) == ["m0", "m1"]
    lex = shard.search([NS], None, "dark mode", 5, "lexical")
    assert doc_ids(lex) == ["m0", "m2"] and all(0 < h.score < 1 for h in lex)
    hyb = shard.search([NS], q, "dark mode", 5, "hybrid")
    assert hyb[0].doc_id == "m0" and hyb[0].score == pytest.approx(1.0)  # first in both lists
    assert all(0 <= h.score <= 1 for h in hyb)
    only_lex = shard.search([NS], None, "dark mode", 5, "hybrid")  # no vector: lexical list only
    assert only_lex[0].doc_id == "m0" and only_lex[0].score == pytest.approx(1.0)
    assert shard.search([NS], None, "dark", 5, "vector") == []
    assert shard.search([NS], q, '"?-', 5, "lexical") == []


def test_ties_break_by_recency_then_doc_id(tmp_path: Path) -> None:
    shard = make(tmp_path)
    e = np.eye(DIM, dtype=np.float32)[0]
    shard.upsert([
        IndexItem(NS, "b", e, "same", 1.0), IndexItem(NS, "a", e, "same", 1.0), IndexItem(NS, "c", e, "same", 5.0),
    ], MODEL)
    assert doc_ids(shard.search([NS], e, "", 3, "vector")) == ["c", "a", "b"]
    assert doc_ids(shard.search([NS], None, "same", 3, "lexical")) == ["c", "a", "b"]


def test_multi_namespace_search_stays_in_its_namespaces(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    shard = make(tmp_path)
    vecs = unit(rng, 30, DIM)
    shard.upsert(items(NS, vecs[:10], "a") + items(NS2, vecs[10:20], "b") + items(OTHER, vecs[20:], "c"), MODEL)
    for mode in ("vector", "lexical", "hybrid"):
        hits = shard.search([NS, NS2], vecs[25], "message", 30, mode)
        assert {h.namespace for h in hits} <= {NS, NS2} and len(hits) == 20
        assert len({(h.namespace, h.doc_id) for h in hits}) == len(hits)
    assert {h.namespace for h in shard.search_app("app", "conv", vecs[0], "message", 50, "vector")} == {NS, NS2, OTHER}
    assert shard.search_app("app", "entry", vecs[0], "message", 50, "vector") == []
    assert shard.search([Namespace("app", "nobody", "conv", "x")], vecs[0], "m", 5, "hybrid") == []


def test_drop_and_count_user(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    shard = make(tmp_path)
    entry = Namespace("app", "u1", "entry", "")
    shard.upsert(items(NS, unit(rng, 4, DIM)) + items(NS2, unit(rng, 3, DIM)) + items(entry, unit(rng, 2, DIM))
                 + items(OTHER, unit(rng, 5, DIM)), MODEL)
    assert shard.count_user("app", "u1") == 9
    assert shard.drop("app", "u1", kind="conv", scope="c2") == 3
    assert shard.drop("app", "u1", kind="entry") == 2
    assert shard.count_user("app", "u1") == 4
    assert shard.drop("app", "u1") == 4 and shard.count_user("app", "u1") == 0
    assert shard.count_user("app", "u2") == 5 and shard.drop("app", "nobody") == 0
    assert {ns for ns, _ in shard.inventory()} == {OTHER}


def test_snapshot_open_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    shard = make(tmp_path)
    big, small = clustered(rng, 60, DIM, 3), unit(rng, 5, DIM)
    shard.upsert(items(NS, big) + items(OTHER, small, "s"), MODEL)
    shard.upsert([IndexItem(NS2, "t", None, "text only 深色", 9.0)], MODEL)
    shard.delete([(NS, "m3")])
    shard.snapshot()
    shard.upsert(items(OTHER, unit(rng, 2, DIM), "late"), MODEL)  # OTHER dirty, NS clean: hard-linked
    shard.close()
    again = make(tmp_path)
    assert again.stats() == shard.stats()
    assert sorted(again.inventory()) == sorted(shard.inventory())
    for mode in ("vector", "lexical", "hybrid"):
        q = big[7]
        assert again.search([NS, NS2, OTHER], q, "message 深色", 10, mode) == \
            shard.search([NS, NS2, OTHER], q, "message 深色", 10, mode)
    assert sorted(os.listdir(tmp_path / "shard")) == ["CURRENT", again.stats()["snapshot"]]
    again.upsert([IndexItem(NS, "m3", big[3], "back", 100.0)], MODEL)
    assert again.search([NS], big[3], "", 1, "vector")[0].doc_id == "m3"


def test_open_discards_other_model_and_crash_leftovers(tmp_path: Path) -> None:
    shard = make(tmp_path)
    shard.upsert(items(NS, unit(np.random.default_rng(5), 3, DIM)), MODEL)
    shard.snapshot()
    (tmp_path / "shard" / ".snap-00000099.tmp").mkdir()
    (tmp_path / "shard" / ".snap-00000099.tmp" / "junk").write_bytes(b"x")
    assert make(tmp_path).stats()["items"] == 3
    assert not (tmp_path / "shard" / ".snap-00000099.tmp").exists()
    other = make(tmp_path, model="other-v2")
    assert other.stats()["items"] == 0 and other.discarded_snapshot
    other.snapshot()
    assert make(tmp_path, model="other-v2").stats()["snapshot"] is not None


def _scan(root: Path, needles: list[bytes]) -> set[bytes]:
    found = set()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            data = (Path(dirpath) / name).read_bytes()
            found |= {n for n in needles if n in data or n in name.encode()}
        found |= {n for n in needles if n in dirpath.encode()}
    return found


def test_drop_then_snapshot_leaves_no_byte_of_the_user(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    shard = make(tmp_path, threshold=10)  # the victim's conversation goes through HNSW
    victim = [Namespace("app", "victim-user-7f3a", "conv", "victim-conv-9"), Namespace("app", "victim-user-7f3a", "entry", "")]
    keeper = Namespace("app", "keeper-user-1b2c", "conv", "keeper-conv")
    shard.upsert(items(victim[0], unit(rng, 20, DIM), "victim-msg-", [f"zyxwv secret {i} 秘密" for i in range(20)]), MODEL)
    shard.upsert(items(victim[1], unit(rng, 2, DIM), "victim-entry-", ["qwerty private note"] * 2), MODEL)
    shard.upsert(items(keeper, unit(rng, 3, DIM), "keeper-msg-", ["plain keeper text"] * 3), MODEL)
    shard.snapshot()
    needles = [b"victim-user-7f3a", b"victim-conv-9", b"victim-msg-", b"victim-entry-", b"zyxwv", b"qwerty", "秘密".encode()]
    keeper_needles = [b"keeper-user-1b2c", b"keeper-msg-", b"keeper"]
    root = tmp_path / "shard"
    assert _scan(root, needles) == set(needles)  # the scan does see the data while it is there
    assert shard.drop("app", "victim-user-7f3a") == 22
    shard.snapshot()
    assert _scan(root, needles) == set()
    assert _scan(root, keeper_needles) == set(keeper_needles)
    assert make(tmp_path).count_user("app", "victim-user-7f3a") == 0


def test_reconcile_fills_missing_and_prunes_extra(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    shard = make(tmp_path)
    vecs = unit(rng, 6, DIM)
    shard.upsert(items(NS, vecs[:4]), MODEL)
    shard.upsert([IndexItem(NS, "m3", None, "message m3", 3.0)], MODEL)
    shard.upsert([IndexItem(NS2, "gone", vecs[5], "deleted in the store", 1.0)], MODEL)
    rows = [IndexRow(NS, f"m{i}", vecs[i], f"message m{i}", float(i)) for i in range(6)]
    rows[1] = IndexRow(NS, "m1", vecs[1], "edited text", 1.0)
    shard.begin_reconcile()
    assert shard.missing_from([(NS, "m5"), (NS, "m0")]) == [(NS, "m5")]
    assert shard.reconcile(rows[:3]) == 1  # m1's text changed; m0, m2 are current
    assert shard.reconcile(rows[3:]) == 2  # m4, m5 missing (m3's vector is there already)
    assert shard.end_reconcile() == 1  # "gone"
    assert sorted(doc for _, doc in shard.inventory()) == [f"m{i}" for i in range(6)]
    assert doc_ids(shard.search([NS], None, "edited", 3, "lexical")) == ["m1"]
    assert shard.reconcile(rows) == 0 and shard.ping()
