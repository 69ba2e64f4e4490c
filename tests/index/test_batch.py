"""``VectorShard.search_many`` scores a batch of searches together (memray.index.scorer) on a shard
that went through a model cutover: every reply is the one its search gets on its own (hits,
scores, BM25 statistics, read-your-writes state and errors alike, in blocks of any size), and the
reference's (tests/support/scoring_reference.py) over the vectors of the model it asked."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import ray.cloudpickle as cp

from memray.config import IndexConfig
from memray.errors import ModelMismatchError
from memray.ids import Namespace
from memray.index import IndexItem, VectorShard, scorer, wire
from memray.index.hnsw import HnswIndex
from memray.index.search import AppSearch, NamespaceSearch, Query, ShardReply, ShardSearch, UserSearch
from memray.ranking import Stream
from memray.sim_time import Window
from memray.store.base import IndexRow
from tests.index.conftest import unit
from tests.index.test_scorer import robust, same
from tests.support import scoring_reference as ref

OLD, NEW = "old-16", "new-8"
WORDS = "apple river stone cloud music paper garden window winter violin hotel coffee".split()
SIZES = {"c0": 1, "c1": 6, "c2": 14, "c3": 27, "c4": 45}  # c4 crosses exact_threshold: HNSW
CONVS = [Namespace("app", f"u{min(i % 2 + i // 4 * 2, 2)}", "conv", name) for i, name in enumerate(SIZES)]  # c4: u2
ENTRIES = Namespace("app", "u0", "entry", "")
UNKNOWN = Namespace("app", "u9", "conv", "nowhere")


def _columns(rng: random.Random) -> tuple[float, float, float]:
    sim_time = float("nan") if rng.random() < 0.2 else rng.uniform(0.0, 7200.0)
    return (rng.uniform(0.0, 100.0), sim_time, rng.random())


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> VectorShard:
    """A shard that went through a cutover (OLD retired, NEW active), with conversations of
    several sizes (one HNSW), an entry namespace, duplicate vectors and texts, deleted items."""
    rng, nrng = random.Random(3), np.random.default_rng(3)
    path = tmp_path_factory.mktemp("batch")
    shard = VectorShard(0, str(path / "shard"), 16, OLD, IndexConfig(exact_threshold=30))
    shard.open()
    items = [(ns, f"{ns.scope}-m{i}") for ns in CONVS for i in range(SIZES[ns.scope])]
    items += [(ENTRIES, f"e{i}") for i in range(10)]
    old, new = unit(nrng, len(items), 16), unit(nrng, len(items), 8)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(2, 5))) for _ in items]
    old[5], new[5] = old[4], new[4]  # identical vectors: ties broken by recency, then doc id
    for i in range(7, 21):  # c3's first messages repeat c2's: equal score and recency, tied on doc id
        old[i + 14], new[i + 14], texts[i + 14] = old[i], new[i], texts[i]
    recency = [float(doc.rsplit("m", 1)[-1]) if ns.kind == "conv" else 1000.0 + i for i, (ns, doc) in enumerate(items)]
    columns = [_columns(rng) for _ in items]
    shard.upsert(
        [
            IndexItem(ns, doc, old[i], texts[i], recency[i], f'{{"d": "{doc}"}}', stamp=i, columns=columns[i])
            for i, (ns, doc) in enumerate(items)
        ],
        OLD,
    )
    assert shard.stage_begin(NEW, 8)
    rows = [IndexRow(ns, doc, new[i], texts[i], recency[i], columns[i]) for i, (ns, doc) in enumerate(items)]
    shard.stage_upsert(rows, NEW)
    assert shard.cutover(NEW)
    late = [IndexItem(CONVS[2], f"c2-m{14 + i}", v, "apple late", 14.0 + i) for i, v in enumerate(unit(nrng, 3, 8))]
    shard.upsert(late, NEW)  # active vectors the retired model never had
    gone = [(CONVS[1], "c1-m2"), (CONVS[2], "c2-m7"), (ENTRIES, "e3")]
    shard.delete(gone)  # holes in the labels
    assert isinstance(shard._spaces[CONVS[4]].vectors, HnswIndex)
    for model, vectors in ((OLD, old), (NEW, new)):
        held = [
            ref.Item(ns, doc, texts[i], tuple(vectors[i].tolist()), recency[i], *columns[i])
            for i, (ns, doc) in enumerate(items)
            if (ns, doc) not in gone
        ]
        held += [
            ref.Item(it.namespace, it.doc_id, it.text, None if model == OLD else tuple(it.vector.tolist()), it.recency)
            for it in late
        ]
        HELD[model] = held
    return shard


#: What the shard holds, as the reference sees it with each model's vectors.
HELD: dict[str, list[ref.Item]] = {}


def _request(rng: random.Random, nrng: np.random.Generator) -> ShardSearch:
    model, dim = rng.choice([(None, 8), (NEW, 8), (NEW, 8), (NEW, 8), (OLD, 16), (OLD, 16), (OLD, 16)])
    if rng.random() < 0.1:
        model, dim = rng.choice([("gone-4", 4), (NEW, 16)])  # ModelMismatchError
    vector = None if rng.random() < 0.1 else unit(nrng, 1, dim)[0]
    mode = rng.choice(["hybrid", "hybrid", "vector", "lexical", "fuzzy" if rng.random() < 0.1 else "hybrid"])
    text = " ".join(rng.choices(WORDS + ["zebra"], k=rng.randint(0, 4)))
    stream = Stream(7200.0, 0.99, 1.0, 1.0, 1.0) if rng.random() < 0.1 else None
    window = Window(after=rng.uniform(0.0, 3600.0)) if rng.random() < 0.1 else None
    watch = tuple((ns, tuple(rng.sample(range(30), 3))) for ns in rng.sample(CONVS + [UNKNOWN], rng.randint(0, 2)))
    query = Query(
        text,
        vector,
        rng.choice([0, 1, 3, 10, 10, 50]),
        mode,  # type: ignore[arg-type]
        rng.choice([None, None, None, 0.0, 0.05, 0.3]),
        model,
        rng.choice([0.0, 0.2, 0.5]),
        rng.choice([0.3, 0.7]),
        watch,
        stream,
        window,
    )
    kind = rng.random()
    if kind < 0.1:
        return AppSearch("app", "conv", query)
    if kind < 0.25:
        return UserSearch("app", rng.choice(["u0", "u1", "u2", "u9"]), rng.choice(["conv", "entry"]), query)
    namespaces = rng.sample(CONVS[:4] + [ENTRIES, UNKNOWN], rng.randint(0, 3))
    return NamespaceSearch(namespaces + ([CONVS[4]] if rng.random() < 0.1 else []), query)  # CONVS[4]: HNSW


def _alone(shard: VectorShard, request: ShardSearch) -> ShardReply | Exception:
    return shard.search_many([request])[0]


def _assert_same(got: ShardReply | Exception, want: ShardReply | Exception, where: Any) -> None:
    if isinstance(want, Exception):
        assert type(got) is type(want) and str(got) == str(want), where
        return
    assert isinstance(got, ShardReply), (where, got)
    assert [(h.namespace, h.doc_id, h.recency, h.payload) for h in got.hits] == [
        (h.namespace, h.doc_id, h.recency, h.payload) for h in want.hits
    ], where
    assert [h.score for h in got.hits] == pytest.approx([h.score for h in want.hits], abs=1e-6), where
    assert (got.stats, got.stamps, got.held) == (want.stats, want.stamps, want.held), where


def _in_scope(request: ShardSearch, item: ref.Item) -> bool:
    ns = item.namespace
    if isinstance(request, NamespaceSearch):
        return ns in request.namespaces
    if isinstance(request, UserSearch):
        return (ns.app, ns.user_id, ns.kind) == (request.app, request.user_id, request.kind)
    return (ns.app, ns.kind) == (request.app, request.kind)


def _reference(request: ShardSearch) -> tuple[list[ref.Item], ref.Ask] | None:
    """What the reference reads and asks for ``request`` (None: the HNSW namespace, whose
    candidates are approximate, is in scope)."""
    q = request.query
    pool = [item for item in HELD[q.model_id or NEW] if _in_scope(request, item)]
    if any(item.namespace == CONVS[4] for item in pool):
        return None
    vector = None if q.vector is None else tuple(float(x) for x in q.vector)
    return pool, ref.Ask(q.text, vector, q.k, q.mode, q.min_score, q.threshold, q.vector_weight, q.stream, q.window)


@pytest.mark.parametrize("block_items", [scorer.BLOCK_ITEMS, 40])
@pytest.mark.parametrize("seed", range(4))
def test_a_batch_answers_each_search_as_it_is_answered_alone_and_as_the_reference(
    shard: VectorShard, seed: int, block_items: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scorer, "BLOCK_ITEMS", block_items)  # small blocks: a batch split in several
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    requests = [_request(rng, nrng) for _ in range(60)]
    replies = shard.search_many(requests)
    assert len(replies) == len(requests)
    checked = 0
    for i, (request, got) in enumerate(zip(requests, replies)):
        _assert_same(got, _alone(shard, request), (seed, i, request))
        asked = None if isinstance(got, Exception) or request.query.mode == "fuzzy" else _reference(request)
        if asked is not None and robust(*asked, 0.2):
            assert not isinstance(got, Exception)
            same(got.hits, ref.search(*asked, 0.2), (seed, i, request))
            checked += 1
    found = [r for r in replies if isinstance(r, ShardReply) and r.hits]
    assert len(found) >= 15 and any(isinstance(r, Exception) for r in replies)  # the batch tested something
    assert checked >= 20


def test_a_batch_of_replies_crosses_the_wire_as_it_was_sent(shard: VectorShard) -> None:
    """What a shard answers pickles with the standard library's pickler (no hook in Python per
    object, as Ray's cloudpickle has) and comes back the same, its errors too."""
    rng, nrng = random.Random(11), np.random.default_rng(11)
    replies = shard.search_many([_request(rng, nrng) for _ in range(60)])
    assert isinstance(replies, wire.ReplyBatch) and replies.__reduce__()[0] is wire._replies
    back = cp.loads(cp.dumps(replies, protocol=5))
    assert isinstance(back, wire.ReplyBatch) and len(back) == len(replies)
    for got, sent in zip(back, replies):
        if isinstance(sent, Exception):
            assert type(got) is type(sent) and str(got) == str(sent)
        else:
            assert got == sent and all(type(h.namespace) is Namespace for h in got.hits)
    assert (
        any(isinstance(r, Exception) for r in back)
        and sum(bool(r.hits) for r in back if isinstance(r, ShardReply)) > 10
    )


def test_a_failing_search_fails_alone_and_batched_searches_see_their_own_models(shard: VectorShard) -> None:
    nrng = np.random.default_rng(9)
    new, old = unit(nrng, 1, 8)[0], unit(nrng, 1, 16)[0]
    ns = [CONVS[2], CONVS[3]]
    requests: list[ShardSearch] = [
        NamespaceSearch(ns, Query("apple", new, 5, "hybrid", None, NEW, 0.0, 0.5)),
        NamespaceSearch(ns, Query("apple", new, 5, "hybrid", None, "gone-4", 0.0, 0.5)),
        NamespaceSearch(ns, Query("apple", old, 5, "vector", 0.05, OLD, 0.0, 0.5)),
        UserSearch("app", "u0", "conv", Query("river stone", new, 5, "hybrid", None, NEW, 0.0, 0.5)),
    ]
    replies = shard.search_many(requests)
    assert isinstance(replies[1], ModelMismatchError)
    for request, got in zip(requests, replies):
        _assert_same(got, _alone(shard, request), request)
    assert all(isinstance(r, ShardReply) and r.hits for r in (replies[0], replies[2], replies[3]))
    first, retired = replies[0], replies[2]
    assert isinstance(first, ShardReply) and isinstance(retired, ShardReply)
    assert [h.doc_id for h in first.hits] != [h.doc_id for h in retired.hits]  # two models, two rankings
