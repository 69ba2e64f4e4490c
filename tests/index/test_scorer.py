"""The scoring kernel (memray.index.scorer) against the plain reference of the rule
(tests/support/scoring_reference.py): every search path of a shard — one namespace or several, a
user, an app's flat view (exact and HNSW), a batch or one search at a time — and the
read-your-writes tail give the reference's hits, in its order, with its scores to 1e-6, across
modes, k, floors, neighbour weights, windows, stream scoring, deletes and degenerate vectors."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memray.config import IndexConfig
from memray.conversation.read_your_writes import TailSearch, score_tails
from memray.ids import Namespace
from memray.index import IndexItem, VectorShard, scorer
from memray.index.base import ShardHit, normalise
from memray.index.scorer import SPARSE_ABOVE, Search, hit_order, score
from memray.index.search import AppSearch, NamespaceSearch, Query, ShardSearch, UserSearch
from memray.models import Message
from memray.ranking import Stream
from memray.sim_time import Window
from tests.support import scoring_reference as ref

DIM = 6
NAN = math.nan
MODEL = "m"
WORDS = ["apple", "river", "stone", "cloud", "music", "garden", "winter", "violin"]
_rng = np.random.default_rng(11)
_queries = _rng.standard_normal((4, DIM))
#: Item vectors: some near a query vector (relevant by vector at most thresholds), some anywhere
POOL: list[tuple[float, ...] | None] = [
    tuple(float(x) for x in v)
    for v in (*(_queries[:3] + 0.4 * _rng.standard_normal((3, DIM))), *_rng.standard_normal((4, DIM)))
]
POOL += [POOL[0], tuple(0.0 for _ in range(DIM)), None]  # a duplicate, a zero vector, no vector
#: Query vectors: never an item's (a cosine of 1 is where float32 and float64 disagree about ties)
QUERIES: list[tuple[float, ...] | None] = [tuple(float(x) for x in v) for v in _queries]
QUERIES += [tuple(0.0 for _ in range(DIM)), tuple(NAN for _ in range(DIM)), None]
NAMESPACES = [
    Namespace("app", "u0", "conv", "c0"),
    Namespace("app", "u0", "conv", "c1"),
    Namespace("app", "u1", "conv", "c2"),
    Namespace("app", "u0", "entry", ""),
    Namespace("else", "u0", "conv", "c0"),  # another app: never in an "app" app-wide search
]


# -- data ---------------------------------------------------------------------------------------


@st.composite
def items(draw: Any, ns: Namespace) -> list[ref.Item]:
    n = draw(st.integers(0, 12))
    if ns.kind == "conv":  # seqs, with gaps: some messages have no neighbour
        recency = sorted(draw(st.sets(st.integers(1, 20), min_size=n, max_size=n)))
    else:  # timestamps, with ties
        recency = [draw(st.sampled_from([1.0, 2.0, 3.0])) for _ in range(n)]
    out = []
    for j, rec in enumerate(recency):
        out.append(
            ref.Item(
                ns,
                f"{ns.app}-{ns.scope or 'e'}-{j}",
                " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=4))),
                draw(st.sampled_from(POOL)),
                float(rec),
                draw(st.sampled_from([NAN, 10.0, 20.0])),
                draw(st.sampled_from([NAN, 0.0, 0.0, 3600.0, 7200.0])),
                draw(st.sampled_from([NAN, 0.0, 0.5, 1.0])),
            )
        )
    return out


@st.composite
def asks(draw: Any) -> ref.Ask:
    vector = draw(st.sampled_from(QUERIES))
    stream = None
    if draw(st.booleans()) and draw(st.booleans()):
        stream = Stream(7200.0, draw(st.sampled_from([0.5, 1.0])), *draw(st.sampled_from([(1, 1, 1), (0, 1, 2)])))
    window = draw(
        st.sampled_from(
            [
                *(None,) * 4,
                Window(after=0.0),
                Window(after=0.0, before=7200.0),
                Window(created_after=15.0),
                Window(before=3600.0),
            ]
        )
    )
    return ref.Ask(
        " ".join(draw(st.lists(st.sampled_from(WORDS + ["zebra"]), max_size=3))),
        vector,
        draw(st.sampled_from([0, 1, 3, 10, 50])),
        draw(st.sampled_from(["hybrid", "hybrid", "lexical", "vector"])),
        draw(st.sampled_from([None, None, 0.0, 0.05, 0.3])),
        draw(st.sampled_from([-0.2, 0.0, 0.3, 0.9, 1.0])),
        draw(st.sampled_from([0.0, 0.3, 1.0])),
        stream,
        window,
        draw(st.booleans()),
    )


def query(ask: ref.Ask) -> Query:
    vector = None if ask.vector is None else np.array(ask.vector, dtype=np.float32)
    return Query(
        ask.text,
        vector,
        ask.k,
        ask.mode,  # type: ignore[arg-type]
        ask.min_score,
        MODEL,
        ask.threshold,
        ask.vector_weight,
        (),
        ask.stream,
        ask.window,
        ask.distinct,
    )


def index_item(item: ref.Item) -> IndexItem:
    vector = None if item.vector is None else np.array(item.vector, dtype=np.float32)
    columns = (item.created_at, item.sim_time, item.importance)
    return IndexItem(item.namespace, item.doc_id, vector, item.text, item.recency, f'"{item.doc_id}"', 0, columns)


def robust(pool: Sequence[ref.Item], ask: ref.Ask, neighbour_weight: float) -> bool:
    """Whether the reference's answer is far from every boundary where float32 and float64 can
    disagree: no cosine within 1e-5 of the threshold or of 1, no relevance within 1e-5 of the
    floor, and no two scores within 1e-5 of each other, unless they are equal and owe nothing to a
    vector (a float32 cosine of one vector may differ in its last bit from one namespace's matrix
    to another's: a tie by vector is a tie only up to that)."""
    by_vector: set[str] = set()
    if ask.mode != "lexical" and ref.usable(ask.vector) and ask.threshold < 1.0:
        assert ask.vector is not None
        for item in pool:
            cos = ref.cosine(ask.vector, item.vector) if item.vector is not None else 0.0
            if abs(cos - ask.threshold) < 1e-5 or cos > 1.0 - 1e-5:
                return False
            if cos > ask.threshold:
                by_vector.add(item.doc_id)
                by_vector.update(nb.doc_id for nb in ref.neighbours(item, pool) if neighbour_weight > 0.0)
    everything = ref.search(pool, ref.Ask(**{**ask.__dict__, "k": 10_000, "min_score": -1.0}), neighbour_weight)
    for a, b in zip(everything, everything[1:]):
        if abs(a.score - b.score) < 1e-5 and (a.score != b.score or {a.doc_id, b.doc_id} & by_vector):
            return False
    floor = ask.min_score if ask.min_score is not None else 0.0
    plain = ref.Ask(**{**ask.__dict__, "k": 10_000, "min_score": -1.0, "stream": None})
    return all(
        hit.score == floor == 0.0 or abs(hit.score - floor) > 1e-5 for hit in ref.search(pool, plain, neighbour_weight)
    )


def same(got: Sequence[ShardHit], want: Sequence[ref.Found], where: Any) -> None:
    assert [(Namespace(*h.namespace), h.doc_id, h.recency) for h in got] == [
        (f.namespace, f.doc_id, f.recency) for f in want
    ], (where, [(h.doc_id, h.score) for h in got], [(f.doc_id, f.score) for f in want])
    # float32 cosines (hnswlib, the exact index) are good to ~1e-7 and a vector score divides by
    # 1 - threshold (0.1 at threshold 0.9): 1e-6 was met only by chance
    assert [h.score for h in got] == pytest.approx([f.score for f in want], abs=1e-5, rel=0), where


# -- the shard's search paths -------------------------------------------------------------------


def scope(request: ShardSearch, live: Sequence[ref.Item]) -> list[ref.Item]:
    """The items a request reads."""
    if isinstance(request, NamespaceSearch):
        return [item for item in live if item.namespace in request.namespaces]
    if isinstance(request, UserSearch):
        return [
            i
            for i in live
            if (i.namespace.app, i.namespace.user_id, i.namespace.kind) == (request.app, request.user_id, request.kind)
        ]
    return [i for i in live if (i.namespace.app, i.namespace.kind) == (request.app, request.kind)]


@st.composite
def requests(draw: Any) -> tuple[ShardSearch, ref.Ask]:
    ask = draw(asks())
    kind = draw(st.sampled_from(["ns", "ns", "user", "app"]))
    if kind == "ns":
        request: ShardSearch = NamespaceSearch(draw(st.lists(st.sampled_from(NAMESPACES), max_size=3)), query(ask))
    elif kind == "user":
        request = UserSearch(
            "app", draw(st.sampled_from(["u0", "u1"])), draw(st.sampled_from(["conv", "entry"])), query(ask)
        )
    else:
        request = AppSearch("app", draw(st.sampled_from(["conv", "entry"])), query(ask))
    return request, ask


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    corpus=st.tuples(*(items(ns) for ns in NAMESPACES)),
    deleted=st.sets(st.integers(0, 60), max_size=8),
    searches=st.lists(requests(), min_size=1, max_size=6),
    hnsw=st.booleans(),
    flat_hnsw=st.booleans(),
    sparse=st.booleans(),
    neighbour_weight=st.sampled_from([0.0, 0.2, 0.6]),
)
def test_every_shard_search_path_scores_as_the_reference(
    corpus: tuple[list[ref.Item], ...],
    deleted: set[int],
    searches: list[tuple[ShardSearch, ref.Ask]],
    hnsw: bool,
    flat_hnsw: bool,
    sparse: bool,
    neighbour_weight: float,
) -> None:
    everything = [item for part in corpus for item in part]
    live = [item for n, item in enumerate(everything) if n not in deleted]
    for request, ask in searches:
        assume(robust(scope(request, live), ask, neighbour_weight))
    config = IndexConfig(
        exact_threshold=3 if hnsw else 1000,  # HNSW small enough that its candidates are every item
        app_exact_threshold=3 if flat_hnsw else 1000,
        neighbour_weight=neighbour_weight,
    )
    shard = VectorShard(0, tempfile.gettempdir(), DIM, MODEL, config)
    if everything:
        shard.upsert([index_item(item) for item in everything], MODEL)
    for request, _ in searches:  # app-wide views are built before the deletes, kept in step after
        if isinstance(request, AppSearch):
            shard.search_app(request.app, request.kind, Query("", k=1))
    gone = [(item.namespace, item.doc_id) for n, item in enumerate(everything) if n in deleted]
    if gone:
        shard.delete(gone)
    if sparse:  # every source searched without a vector part scored over its candidates
        scorer.SPARSE_ABOVE = 0
    try:
        batch = shard.search_many([request for request, _ in searches])
        alone = [shard.search_many([request])[0] for request, _ in searches]
    finally:
        scorer.SPARSE_ABOVE = SPARSE_ABOVE
    for (request, ask), together, one in zip(searches, batch, alone):
        want = ref.search(scope(request, live), ask, neighbour_weight)
        assert not isinstance(together, Exception) and not isinstance(one, Exception)
        same(together.hits, want, (request, "batch"))
        same(one.hits, want, (request, "alone"))
        assert all(h.payload == f'"{h.doc_id}"' for h in one.hits)


# -- the read-your-writes tail ------------------------------------------------------------------


def message(item: ref.Item) -> Message:
    return Message(
        id=item.doc_id,
        role="user",
        parts=[{"type": "text", "text": item.text}],  # type: ignore[list-item]
        seq=int(item.recency),
        created_at=item.created_at,
        sim_time=None if math.isnan(item.sim_time) else item.sim_time,
        importance=None if math.isnan(item.importance) else item.importance,
    )


@st.composite
def tails(draw: Any) -> tuple[list[ref.Item], list[ref.Item]]:
    """Two conversations of one user: what the shard holds, and the tail (the newest messages, and
    maybe a newer version of a held one)."""
    indexed: list[ref.Item] = []
    tail: list[ref.Item] = []
    for ns in NAMESPACES[:2]:
        msgs = draw(items(ns))
        msgs = [
            ref.Item(**{**m.__dict__, "created_at": 0.0 if math.isnan(m.created_at) else m.created_at}) for m in msgs
        ]  # a message always has one
        cut = draw(st.integers(0, len(msgs)))
        indexed += msgs[:cut]
        tail += msgs[cut:]
        if cut and draw(st.booleans()):  # a held message edited: its tail version replaces it
            old = msgs[draw(st.integers(0, cut - 1))]
            tail.append(
                ref.Item(**{**old.__dict__, "text": " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=3)))})
            )
    return indexed, tail


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(
    data=tails(),
    ask=asks(),
    user_wide=st.booleans(),
    lexical_only=st.booleans(),
    neighbour_weight=st.sampled_from([0.0, 0.2, 0.6]),
)
def test_the_tail_is_scored_as_the_reference(
    data: tuple[list[ref.Item], list[ref.Item]],
    ask: ref.Ask,
    user_wide: bool,
    lexical_only: bool,
    neighbour_weight: float,
) -> None:
    indexed, tail = data
    # the caller embeds every tail message with a recomputable embedder; with another, none
    tail = [ref.Item(**{**t.__dict__, "vector": None if lexical_only else (t.vector or POOL[1])}) for t in tail]
    replaced = {(t.namespace, t.doc_id) for t in tail}
    pool = [i for i in indexed if (i.namespace, i.doc_id) not in replaced] + tail
    assume(robust(indexed, ask, neighbour_weight) and robust(pool, ask, neighbour_weight))
    shard = VectorShard(0, tempfile.gettempdir(), DIM, MODEL, IndexConfig(neighbour_weight=neighbour_weight))
    if indexed:
        shard.upsert([index_item(item) for item in indexed], MODEL)
    q = query(ask)
    reply = shard.search_user("app", "u0", "conv", q) if user_wide else shard.search(NAMESPACES[:2], q)
    by_ns = [(ns, [t for t in tail if t.namespace == ns]) for ns in NAMESPACES[:2]]
    ordered = [t for _, part in by_ns for t in part]
    vectors = None
    if not lexical_only and ordered:
        vectors = normalise(np.array([t.vector for t in ordered], dtype=np.float32), DIM)
    tails = [(ns, [message(t) for t in part]) for ns, part in by_ns if part]
    got = score_tails([TailSearch(q, reply.stats, reply.hits, tails, vectors)], neighbour_weight)[0]
    shard_want, want = ref.search_with_tail(indexed, tail, ask, neighbour_weight)
    same(reply.hits, shard_want, "shard")
    same(got, want, "with the tail")


# -- degenerate values --------------------------------------------------------------------------


class Rows:
    """A source of a few items for the kernel alone (the Source protocol, nothing else)."""

    linked = False

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        from memray.index.exact import ExactIndex
        from memray.index.lexical import LexicalIndex

        self.rec = np.arange(len(texts), dtype=np.float64)
        self.lexical = LexicalIndex(int)
        for n, text in enumerate(texts):
            self.lexical.add(str(n), text)
        self._vectors = ExactIndex.of(vectors)

    def adjacent(self) -> tuple[np.ndarray, np.ndarray]:
        none = np.full(len(self.rec), -1, dtype=np.int64)
        return none, none.copy()

    def vectors_of(self, retired: bool) -> Any:
        return self._vectors

    def columns_of(self, labels: np.ndarray) -> np.ndarray:
        return np.full((len(labels), 3), np.nan)

    def text_ids(self, labels: np.ndarray) -> np.ndarray:
        return np.zeros(len(labels), dtype=np.int64)

    def hit(self, label: int, score: float, recency: float) -> ShardHit:
        return ShardHit(Namespace("a", "u", "entry", ""), f"d{label}", score, recency)


@pytest.mark.parametrize("threshold", [1.0, 1.5, NAN, 0.5])
@pytest.mark.parametrize("vector", ["same", "nan", "inf", "zero"])
def test_a_broken_vector_part_never_removes_a_lexical_hit(threshold: float, vector: str) -> None:
    """What a degenerate embedder gives — a threshold of 1 or above (or NaN), a query vector of
    NaN, infinities or zeros, a stored NaN vector — scores 0 by vector and leaves the lexical hit
    as it is, with no numpy warning."""
    stored = np.zeros((2, DIM), dtype=np.float32)
    stored[:, 0] = 1.0
    stored[1, 0] = NAN  # "the dog barks": a NaN vector stored
    same_direction = np.eye(DIM, dtype=np.float32)[0]
    qvec = {"same": same_direction, "nan": np.full(DIM, NAN), "inf": np.full(DIM, np.inf)}.get(vector, np.zeros(DIM))
    source = Rows(["a cat sleeps", "the dog barks"], stored)
    with np.errstate(all="raise"):
        ((hits, _),) = score([Search(Query("cat", qvec, 5, "hybrid", None, MODEL, threshold, 0.5), [source])], 0.2)
    assert [h.doc_id for h in hits] == ["d0"]
    vector_part = 0.5 if vector == "same" and threshold == 0.5 else 0.0  # only a sound vector scores
    assert hits[0].score == pytest.approx(0.5 + vector_part)


@pytest.mark.parametrize("flat_hnsw", [False, True])
def test_with_no_floor_the_best_of_many_tied_items_are_the_reference_s(flat_hnsw: bool) -> None:
    """``min_score=0`` over hundreds of items, most scoring 0 and many of one recency: the kernel
    narrows them to the few that can make the ``k`` (ties with the ``k``-th kept for the doc ids)."""
    rng = np.random.default_rng(5)
    entries = Namespace("app", "u0", "entry", "")
    pool = [
        ref.Item(entries, f"e{n:03d}", " ".join(rng.choice(WORDS, 2)) if n % 7 == 0 else "", POOL[n % 3], float(n % 4))
        for n in range(300)
    ]
    pool += [
        ref.Item(NAMESPACES[0], f"m{n:03d}", "river" if n % 5 == 0 else "", POOL[n % 4], float(n)) for n in range(120)
    ]
    config = IndexConfig(neighbour_weight=0.2, app_exact_threshold=3 if flat_hnsw else 1000)
    shard = VectorShard(0, tempfile.gettempdir(), DIM, MODEL, config)
    shard.upsert([index_item(item) for item in pool], MODEL)
    checked = 0
    for k in (1, 3, 10):
        for mode in ("lexical", "hybrid"):
            for text in ("river", "apple stone", "zebra"):
                ask = ref.Ask(text, QUERIES[1], k, mode, 0.0, 0.5, 0.3)
                for request in (
                    NamespaceSearch([entries], query(ask)),
                    AppSearch("app", "entry", query(ask)),
                    NamespaceSearch([NAMESPACES[0]], query(ask)),
                ):
                    scope_items = scope(request, pool)
                    if robust(scope_items, ask, 0.2):
                        same(shard.search_many([request])[0].hits, ref.search(scope_items, ask, 0.2), request)  # type: ignore[union-attr]
                        checked += 1
    assert checked >= 20


def test_scores_a_last_bit_apart_are_a_tie_broken_by_recency() -> None:
    """A shard's hit and a tail's hit whose scores are equal in exact arithmetic but summed in
    another order (0.8923996584116141 and ...142, from a failing Hypothesis example) order as the
    tie they are: the newer first."""
    ns = Namespace("app", "u0", "conv", "c0")
    older = ShardHit(ns, "a", 0.8923996584116142, 8.0)
    newer = ShardHit(ns, "b", 0.8923996584116141, 9.0)
    assert [h.doc_id for h in sorted([older, newer], key=hit_order)] == ["b", "a"]
