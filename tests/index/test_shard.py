from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from memray.config import IndexConfig
from memray.errors import ModelMismatchError
from memray.ids import Namespace
from memray.index import IndexItem, ShardHit, VectorShard
from memray.index.base import atomic_save_rows
from memray.store.base import IndexRow
from tests.index.conftest import WEIGHT, clustered, find, find_app, unit

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
        assert doc_ids(find(shard, [NS], q, "", 10, "vector")) == doc_ids(find(oracle, [NS], q, "", 10, "vector"))
    refs = [(NS, f"m{i}") for i in range(110)]
    assert shard.delete(refs) == 110 and oracle.delete(refs) == 110
    assert shard.stats()["hnsw_namespaces"] == 0  # 10 < 30 // 2: back to exact
    for q in queries:
        got = find(shard, [NS], q, "", 10, "vector", min_score=0.0)  # no relevance floor: all ten
        assert doc_ids(got) == doc_ids(find(oracle, [NS], q, "", 10, "vector", min_score=0.0)) and len(got) == 10


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
        find(shard, [NS], np.ones(DIM - 1, dtype=np.float32), "", 3, "vector")
    assert pickle.loads(pickle.dumps(ModelMismatchError("re-embed"))).args == ("re-embed",)


def test_upsert_replaces_and_none_vector_keeps_old(tmp_path: Path) -> None:
    shard = make(tmp_path)
    eye = np.eye(DIM, dtype=np.float32)
    shard.upsert([IndexItem(NS, "a", eye[0], "apples", 1.0), IndexItem(NS, "b", eye[1], "bananas", 2.0)], MODEL)
    shard.upsert([IndexItem(NS, "a", None, "cherries", 3.0)], MODEL)  # text only: vector stays
    assert shard.stats()["items"] == 2 and shard.stats()["vectors"] == 2
    assert doc_ids(find(shard, [NS], None, "cherries", 5, "lexical")) == ["a"]
    assert find(shard, [NS], None, "apples", 5, "lexical") == []
    top = find(shard, [NS], eye[0], "", 1, "vector")[0]
    assert top.doc_id == "a" and top.score == pytest.approx(1.0) and top.recency == 3.0
    shard.upsert([IndexItem(NS, "a", eye[2], "cherries", 3.0)], MODEL)
    assert find(shard, [NS], eye[2], "", 1, "vector")[0].doc_id == "a"


def test_scores_modes_relevance_floor_and_min_score(tmp_path: Path) -> None:
    shard = VectorShard(0, str(tmp_path / "shard"), DIM, MODEL, IndexConfig(neighbour_weight=0.0))
    shard.open()
    v = np.zeros((3, DIM), dtype=np.float32)
    v[0, 0] = 1.0
    v[1, :2] = [0.8, 0.6]  # cosine 0.8 with e0
    v[2, 1] = 1.0  # cosine 0 with e0
    shard.upsert(items(NS, v, texts=["dark mode", "light theme", "dark chocolate dark"]), MODEL)
    q = np.eye(DIM, dtype=np.float32)[0]
    hits = find(shard, [NS], q, "", 5, "vector")  # threshold 0: the score is the cosine, clipped
    assert doc_ids(hits) == ["m0", "m1"] and [round(h.score, 5) for h in hits] == [1.0, 0.8]
    # the relevance threshold rescales: (cos - t) / (1 - t), and cos <= t is no hit at all
    assert [round(h.score, 5) for h in find(shard, [NS], q, "", 5, "vector", threshold=0.6)] == [1.0, 0.5]
    assert doc_ids(find(shard, [NS], q, "", 5, "vector", threshold=0.9)) == ["m0"]
    assert doc_ids(find(shard, [NS], q, "", 5, "vector", min_score=0.9)) == ["m0"]
    assert doc_ids(find(shard, [NS], q, "", 5, "vector", min_score=0.0)) == ["m0", "m1", "m2"]  # floor lifted
    lex = find(shard, [NS], None, "dark mode", 5, "lexical")
    assert doc_ids(lex) == ["m0", "m2"] and 0 < lex[1].score < lex[0].score <= 1
    hyb = find(shard, [NS], q, "dark mode", 5, "hybrid")
    got = {h.doc_id: h.score for h in hyb}  # m1 by its vector alone, m2 by its words alone
    assert doc_ids(hyb)[0] == "m0" and set(got) == {"m0", "m1", "m2"}
    assert lex[0].score == pytest.approx(1.0)  # holds every query term
    assert got["m0"] == pytest.approx((1 - WEIGHT) * lex[0].score + WEIGHT * 1.0)
    assert got["m1"] == pytest.approx(WEIGHT * 0.8)
    assert got["m2"] == pytest.approx((1 - WEIGHT) * lex[1].score)
    only_lex = find(shard, [NS], None, "dark mode", 5, "hybrid")  # no vector: the lexical part only
    assert doc_ids(only_lex) == ["m0", "m2"]
    assert find(shard, [NS], None, "dark", 5, "vector") == []
    assert find(shard, [NS], q, '"?-', 5, "lexical") == []
    assert find(shard, [NS], None, "what is it?", 5, "lexical") == []  # function words match nothing
    assert find(shard, [NS], None, "programming rust", 5, "hybrid") == []  # unrelated: nothing


def test_neighbour_support_raises_relevant_messages_next_to_relevant_ones(tmp_path: Path) -> None:
    shard = make(tmp_path)
    e = np.eye(DIM, dtype=np.float32)
    texts = ["which tent should I buy", "the blue tent is lighter", "tent poles bent in the storm", "unrelated chat"]
    shard.upsert([IndexItem(NS, f"m{i}", e[i], t, float(i)) for i, t in enumerate(texts)], MODEL)
    plain = VectorShard(1, str(tmp_path / "plain"), DIM, MODEL, IndexConfig(neighbour_weight=0.0))
    plain.upsert([IndexItem(NS, f"m{i}", e[i], t, float(i)) for i, t in enumerate(texts)], MODEL)
    with_support = {h.doc_id: h.score for h in find(shard, [NS], None, "tent storm", 5, "lexical")}
    without = {h.doc_id: h.score for h in find(plain, [NS], None, "tent storm", 5, "lexical")}
    assert set(with_support) == set(without) == {"m0", "m1", "m2"}  # m3 is not lifted in: not relevant
    weight = IndexConfig().neighbour_weight
    assert with_support["m1"] == pytest.approx(
        without["m1"] + weight * max(without["m0"], without["m2"]) * (1 - without["m1"])
    )
    assert with_support["m0"] > without["m0"] and with_support["m1"] > without["m1"]
    assert without["m2"] > max(without["m0"], without["m1"]) and with_support["m2"] >= without["m2"]


def test_ties_break_by_recency_then_doc_id(tmp_path: Path) -> None:
    shard = make(tmp_path)
    e = np.eye(DIM, dtype=np.float32)[0]
    shard.upsert(
        [IndexItem(NS, "b", e, "twin", 1.0), IndexItem(NS, "a", e, "twin", 1.0), IndexItem(NS, "c", e, "twin", 9.0)],
        MODEL,
    )
    assert doc_ids(find(shard, [NS], e, "", 3, "vector")) == ["c", "a", "b"]
    assert doc_ids(find(shard, [NS], None, "twin", 3, "lexical")) == ["c", "a", "b"]


def test_multi_namespace_search_stays_in_its_namespaces(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    shard = make(tmp_path)
    vecs = unit(rng, 30, DIM)
    shard.upsert(items(NS, vecs[:10], "a") + items(NS2, vecs[10:20], "b") + items(OTHER, vecs[20:], "c"), MODEL)
    for mode in ("vector", "lexical", "hybrid"):
        hits = find(shard, [NS, NS2], vecs[25], "message", 30, mode, min_score=0.0)
        assert {h.namespace for h in hits} <= {NS, NS2} and len(hits) == 20
        assert len({(h.namespace, h.doc_id) for h in hits}) == len(hits)
    assert {h.namespace for h in find_app(shard, "app", "conv", vecs[0], "message", 50, "vector")} == {NS, NS2, OTHER}
    assert find_app(shard, "app", "entry", vecs[0], "message", 50, "vector") == []
    assert find(shard, [Namespace("app", "nobody", "conv", "x")], vecs[0], "m", 5, "hybrid") == []


def test_drop_and_count_user(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    shard = make(tmp_path)
    entry = Namespace("app", "u1", "entry", "")
    shard.upsert(
        items(NS, unit(rng, 4, DIM))
        + items(NS2, unit(rng, 3, DIM))
        + items(entry, unit(rng, 2, DIM))
        + items(OTHER, unit(rng, 5, DIM)),
        MODEL,
    )
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
        assert find(again, [NS, NS2, OTHER], q, "message 深色", 10, mode) == find(
            shard, [NS, NS2, OTHER], q, "message 深色", 10, mode
        )
    assert sorted(os.listdir(tmp_path / "shard")) == ["CURRENT", again.stats()["snapshot"]]
    again.upsert([IndexItem(NS, "m3", big[3], "back", 100.0)], MODEL)
    assert find(again, [NS], big[3], "", 1, "vector")[0].doc_id == "m3"


def test_a_snapshot_writes_its_vectors_as_numpy_saves_the_rows_end_to_end(tmp_path: Path) -> None:
    """The vectors file is written a namespace's block at a time, and must be byte for byte the
    ``.npy`` of the concatenated matrix (none, empty and one-row blocks included)."""
    rng = np.random.default_rng(9)
    for shapes in ([], [0], [3, 0, 1, 24]):
        blocks = [rng.random((n, DIM), dtype=np.float32) for n in shapes]
        atomic_save_rows(tmp_path / "rows.npy", blocks, DIM)
        np.save(tmp_path / "whole.npy", np.concatenate(blocks) if blocks else np.zeros((0, DIM), np.float32))
        assert (tmp_path / "rows.npy").read_bytes() == (tmp_path / "whole.npy").read_bytes()


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
    victim = [
        Namespace("app", "victim-user-7f3a", "conv", "victim-conv-9"),
        Namespace("app", "victim-user-7f3a", "entry", ""),
    ]
    keeper = Namespace("app", "keeper-user-1b2c", "conv", "keeper-conv")
    shard.upsert(
        items(victim[0], unit(rng, 20, DIM), "victim-msg-", [f"zyxwv secret {i} 秘密" for i in range(20)]), MODEL
    )
    shard.upsert(items(victim[1], unit(rng, 2, DIM), "victim-entry-", ["qwerty private note"] * 2), MODEL)
    shard.upsert(items(keeper, unit(rng, 3, DIM), "keeper-msg-", ["plain keeper text"] * 3), MODEL)
    shard.snapshot()
    needles = [
        b"victim-user-7f3a",
        b"victim-conv-9",
        b"victim-msg-",
        b"victim-entry-",
        b"zyxwv",
        b"qwert",
        "秘密".encode(),
    ]
    keeper_needles = [b"keeper-user-1b2c", b"keeper-msg-", b"keeper"]
    root = tmp_path / "shard"
    assert _scan(root, needles) == set(needles)  # the scan does see the data while it is there
    assert shard.drop("app", "victim-user-7f3a") == 22
    shard.snapshot()
    assert _scan(root, needles) == set()
    assert _scan(root, keeper_needles) == set(keeper_needles)
    assert make(tmp_path).count_user("app", "victim-user-7f3a") == 0


def test_missing_from_with_vectors_names_the_refs_held_for_their_text_alone(tmp_path: Path) -> None:
    # what leveling a shard with the store asks: the store's vectored refs the shard has no vector for
    shard = make(tmp_path)
    vec = unit(np.random.default_rng(3), 1, DIM)[0]
    shard.upsert([IndexItem(NS, "v", vec, "with a vector", 1.0), IndexItem(NS, "t", None, "text alone", 2.0)], MODEL)
    refs = [(NS, "v"), (NS, "t"), (NS2, "nope")]
    assert shard.missing_from(refs) == [(NS2, "nope")]
    assert shard.missing_from(refs, vectors=True) == [(NS, "t"), (NS2, "nope")]
    assert shard.missing_from([(tuple(NS), "t")], vectors=True) == [(NS, "t")]  # a plain tuple: as sent by hand


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
    assert doc_ids(find(shard, [NS], None, "edited", 3, "lexical")) == ["m1"]
    assert shard.reconcile(rows) == 0 and shard.ping()


def test_work_stats_count_each_upsert_and_search_and_the_cpu_they_took(tmp_path: Path) -> None:
    shard = make(tmp_path)
    vecs = unit(np.random.default_rng(7), 4, DIM)
    assert shard.work_stats() == dict.fromkeys(
        ("upserts", "upserted", "upsert_cpu_s", "searches", "searched", "search_cpu_s"), 0
    )
    shard.upsert(items(NS, vecs[:3]), MODEL)
    shard.upsert(items(NS2, vecs[3:]), MODEL)
    find(shard, [NS], vecs[0], "message", 2, "hybrid")  # a search is a batch of one
    shard.search_many([])
    work = shard.work_stats()
    assert (work["upserts"], work["upserted"], work["searches"], work["searched"]) == (2, 4, 2, 1)
    assert work["upsert_cpu_s"] > 0 and work["search_cpu_s"] > 0
    with pytest.raises(ModelMismatchError):  # a refused upsert is work done too: counted
        shard.upsert(items(NS, vecs[:2]), "other-model")
    assert shard.work_stats()["upserts"] == 3 and shard.work_stats()["upserted"] == 6
