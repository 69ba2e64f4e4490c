"""App-wide search through a shard's flat view (memray.index.flat) answers exactly what a walk over
the app's namespaces answers, and forgets what deletes, drops and erasure remove."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from memray.config import IndexConfig
from memray.ids import Namespace
from memray.index import IndexItem, VectorShard
from memray.index.search import Mode, Query
from tests.index.conftest import WEIGHT, clustered

DIM = 16
MODEL = "m"
WORDS = "river garden jazz coffee piano bread train cheese lisbon osaka amber teal".split()


def fill(shard: VectorShard, rng: random.Random, vecs: np.ndarray, users: int = 6, convs: int = 3) -> list[Namespace]:
    spaces = [
        Namespace("app", f"u{u}", kind, f"c{c}") for u in range(users) for c in range(convs) for kind in ("conv",)
    ]
    items = []
    for i, v in enumerate(vecs):
        ns = spaces[i % len(spaces)]
        items.append(IndexItem(ns, f"m{i}", v, " ".join(rng.choices(WORDS, k=5)), float(i // len(spaces))))
    shard.upsert(items, MODEL)
    shard.upsert([IndexItem(Namespace("other", "u0", "conv", "c0"), "x", vecs[0], "river river", 0.0)], MODEL)
    shard.upsert([IndexItem(Namespace("app", "u0", "entry", "global"), "e", vecs[1], "river jazz", 5.0)], MODEL)
    return spaces


def both(shard: VectorShard, q: Query) -> tuple[list[tuple[str, str, float]], list[tuple[str, str, float]]]:
    walk = shard.search([ns for ns in shard._spaces if ns.app == "app" and ns.kind == "conv"], q)
    flat = shard.search_app("app", "conv", q)
    assert flat.stats == walk.stats

    def rows(hits: list) -> list[tuple[str, str, float]]:
        return [(h.namespace.user_id + h.namespace.scope, h.doc_id, round(h.score, 5)) for h in hits]

    return rows(flat.hits), rows(walk.hits)


def queries(rng: random.Random, vecs: np.ndarray) -> list[Query]:
    out = []
    for j in range(12):
        mode: Mode = ("hybrid", "vector", "lexical")[j % 3]
        floor = (None, 0.0)[j % 2]
        out.append(Query(" ".join(rng.choices(WORDS, k=2)), vecs[j * 7], 10, mode, floor, MODEL, 0.2, WEIGHT))
    return out


@pytest.mark.parametrize("threshold", [100_000, 50])  # an exact view, an HNSW one
def test_flat_view_matches_the_namespace_walk(tmp_path: Path, threshold: int) -> None:
    rng = random.Random(3)
    vecs = clustered(np.random.default_rng(3), 240, DIM, 6)
    shard = VectorShard(0, str(tmp_path), DIM, MODEL, IndexConfig(app_exact_threshold=threshold, hnsw_ef=400))
    spaces = fill(shard, rng, vecs)
    qs = queries(rng, vecs)
    for q in qs:
        flat, walk = both(shard, q)
        assert flat == walk and flat
    # kept in step after the view exists: new items, a changed text, deletes, a dropped user
    shard.upsert([IndexItem(spaces[0], "new", vecs[3], "osaka osaka", 99.0)], MODEL)
    shard.upsert([IndexItem(spaces[1], "m1", None, "lisbon teal", 0.0)], MODEL)
    assert shard.delete([(spaces[2], "m2"), (spaces[2], "m20"), (spaces[3], "m3")]) == 3
    assert shard.drop("app", "u1") > 0
    for q in qs + [Query("osaka", None, 10, "lexical", None, MODEL, 0.2, WEIGHT)]:
        flat, walk = both(shard, q)
        assert flat == walk
        assert not {"m2", "m20", "m3"} & {doc for _, doc, _ in flat}
        assert not any(user.startswith("u1") for user, _, _ in flat)
    osaka = shard.search_app("app", "conv", Query("osaka", None, 10, "lexical", None, MODEL, 0.2, WEIGHT))
    assert "new" in [h.doc_id for h in osaka.hits]


def test_erasing_a_user_leaves_nothing_in_the_view(tmp_path: Path) -> None:
    rng = random.Random(5)
    vecs = clustered(np.random.default_rng(5), 60, DIM, 3)
    shard = VectorShard(0, str(tmp_path), DIM, MODEL, IndexConfig())
    fill(shard, rng, vecs, users=2, convs=1)
    everything = Query("", vecs[0], 100, "vector", 0.0, MODEL, -1.0, WEIGHT)
    assert {h.namespace.user_id for h in shard.search_app("app", "conv", everything).hits} == {"u0", "u1"}
    shard.drop("app", "u0")
    shard.delete([(h.namespace, h.doc_id) for h in shard.search_app("app", "conv", everything).hits[:5]])
    hits = shard.search_app("app", "conv", everything).hits
    assert {h.namespace.user_id for h in hits} == {"u1"} and len(hits) == 30 - 5
    view = shard._spaces.flats.view("app", "conv", [])
    assert len(view.vectors) == 25 and len(view.lexical) == 25
