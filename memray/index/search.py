"""Scoring a query against a shard's namespaces: the rules of :mod:`memray.index.fusion`, run.

:func:`search_spaces` scores every item of the given namespaces that is relevant on its own
(shares an index term with the query, or is more similar to it than the model's relevance
threshold), fuses the two scores by mode, adds neighbour support, and returns the best ``k``.
BM25 uses the statistics of all the namespaces searched together, so a user-wide search ranks
as one BM25 over the user's whole history; the statistics go back with the reply
(:class:`ShardReply`), so a caller can score texts the shard has not indexed yet the same way
(read-your-writes, :mod:`memray.conversation.tail`).
"""

from __future__ import annotations

import heapq
from typing import Any, Literal, NamedTuple

import numpy as np

from memray.config import IndexConfig
from memray.ids import Namespace
from memray.index.base import ShardHit
from memray.index.exact import ExactIndex
from memray.index.fusion import fuse_arrays, in_window, rank, vector_scores
from memray.index.hnsw import HnswIndex
from memray.index.lexical import Bm25Stats, ideal_bm25
from memray.index.space import Space
from memray.scoring import Stream, Window
from memray.text import index_terms

__all__ = [
    "Mode",
    "Query",
    "ShardReply",
    "NamespaceSearch",
    "UserSearch",
    "AppSearch",
    "ShardSearch",
    "HYBRID_DEPTH",
    "STREAM_DEPTH",
    "search_spaces",
    "query_terms",
    "query_stats",
    "DENSE_MAX",
    "vector_scores",
]

Mode = Literal["vector", "lexical", "hybrid"]
#: How many nearest neighbours an HNSW namespace contributes before thresholding (at least ``k``).
HYBRID_DEPTH = 50
#: The same under stream scoring, where recency and importance may lift a less similar item.
STREAM_DEPTH = 200


class Query(NamedTuple):
    """One search as a caller sends it to a shard."""

    text: str
    vector: Any = None  # float32[dim] of ``model_id`` (None: no vector part)
    k: int = 10
    mode: Mode = "hybrid"
    min_score: float | None = None  # None: relevant hits only (score > 0); 0: no floor
    model_id: str | None = None
    threshold: float = 1.0  # the relevance threshold of ``model_id`` (memray.embedding.calibration)
    vector_weight: float = 0.0  # the share of the vector score in a hybrid score
    # conversations whose read-your-writes state the reply carries: (namespace, seqs the caller
    # wrote there and has not seen indexed yet) — see memray.conversation.tail
    watch: tuple[tuple[Namespace, tuple[int, ...]], ...] = ()
    stream: Stream | None = None  # memory-stream scoring (memray.scoring); None: by relevance
    window: Window | None = None  # simulation / creation time bounds; None: all


class ShardReply(NamedTuple):
    hits: list[ShardHit]
    stats: Bm25Stats  # of everything searched, for the query's index terms
    stamps: dict[Namespace, int]  # the indexing stamp of each watched namespace (0: none)
    held: dict[Namespace, list[int]]  # of each watched namespace's seqs, those indexed here


class NamespaceSearch(NamedTuple):
    """A search of these namespaces (``VectorShard.search``), in a batch (``search_many``)."""

    namespaces: list[Namespace]
    query: Query


class UserSearch(NamedTuple):
    """A search of every namespace of one user and ``kind`` (``VectorShard.search_user``)."""

    app: str
    user_id: str
    kind: str
    query: Query


class AppSearch(NamedTuple):
    """A search of every namespace of ``app`` and ``kind`` on a shard (``VectorShard.search_app``)."""

    app: str
    kind: str
    query: Query


#: One search of a batch: callers batch the searches of many concurrent agents into one call.
ShardSearch = NamespaceSearch | UserSearch | AppSearch


#: Namespaces with at most this many labels (and an exact index) are scored densely.
DENSE_MAX = 1 << 16
_NO_LABELS = np.zeros(0, dtype=np.int64)
_NO_VALUES = np.zeros(0)


class _Scored(NamedTuple):
    """One namespace's candidates: labels (ascending, unique) and their fused scores."""

    labels: np.ndarray
    scores: np.ndarray


def _vector_part(
    index: ExactIndex | HnswIndex,
    space: Space,
    vector: np.ndarray,
    threshold: float,
    also: np.ndarray,
    depth: int,
    window: Window | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(labels, V) of every item above the threshold (exact: all are compared; HNSW: the
    ``depth`` nearest, or, with a time ``window``, every item inside it, compared exactly), and of
    the lexical candidates ``also`` (labels) wherever they have a vector."""
    if isinstance(index, ExactIndex):
        labels, sims = index.scan(vector)
    elif window is not None:
        inside = space.live_labels()
        inside = inside[in_window(space.columns.rows(inside), window)]
        labels = np.array([label for label in inside.tolist() if label in index], dtype=np.int64)
        sims = index.get(labels) @ vector if len(labels) else np.zeros(0, dtype=np.float32)
    else:
        found, found_sims = index.search(vector, max(depth, 1))
        wanted = np.array([label for label in also.tolist() if label in index], dtype=np.int64)
        extra = index.get(wanted) @ vector if len(wanted) else np.zeros(0, dtype=np.float32)
        labels, first = np.unique(np.concatenate([found[0], wanted]), return_index=True)
        sims = np.concatenate([found_sims[0], extra.astype(np.float32)])[first]
    scores = vector_scores(sims, threshold)
    keep = scores > 0.0
    if len(also):
        keep |= np.isin(labels, also, assume_unique=True)
    return labels[keep], scores[keep]


def _union(a: np.ndarray, av: np.ndarray, b: np.ndarray, bv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The labels of ``a`` and ``b`` (ascending) with each side's values, 0 where it has none."""
    labels = np.union1d(a, b)
    left = np.zeros(len(labels))
    right = np.zeros(len(labels))
    left[np.searchsorted(labels, a)] = av
    right[np.searchsorted(labels, b)] = bv
    return labels, left, right


def _score_space(
    space: Space,
    index: ExactIndex | HnswIndex | None,
    query: Query,
    vector: np.ndarray | None,
    terms: list[str],
    stats: Bm25Stats,
    ideal: float,
    depth: int,
    window: Window | None,
    config: IndexConfig,
) -> _Scored:
    """Every item of ``space`` relevant on its own, with its fused score and neighbour support
    (module docstring), as arrays: no Python object per item."""
    if not isinstance(index, HnswIndex) and len(space.rec) <= DENSE_MAX:
        return _score_dense(space, index, query, vector, terms, stats, ideal, config)
    mode = query.mode
    lex_l, lex_b = space.lexical.label_scores(terms, stats) if terms else (_NO_LABELS, _NO_VALUES)
    if vector is not None and index is not None and len(index):
        vec_l, vec_v = _vector_part(index, space, vector, query.threshold, lex_l, depth, window)
    else:
        vec_l, vec_v = _NO_LABELS, _NO_VALUES
    if mode == "lexical":
        labels, lexical, vec = lex_l, lex_b, np.zeros(len(lex_l))
    elif mode == "vector":
        order = np.argsort(vec_l)
        labels, lexical, vec = vec_l[order], np.zeros(len(vec_l)), vec_v[order]
    else:
        labels, lexical, vec = _union(lex_l, lex_b, vec_l, vec_v)
    scores = fuse_arrays(mode, lexical, vec, ideal, query.vector_weight)
    if space.by_recency is None or config.neighbour_weight <= 0.0 or not len(labels):
        return _Scored(labels, scores)
    before, after = space.neighbour_labels(labels)
    if vector is not None and isinstance(index, HnswIndex) and mode != "lexical":
        # neighbours beyond the HNSW depth: their V (an exact namespace compared every item: 0)
        near = np.unique(np.concatenate([before, after]))
        near = near[(near >= 0) & ~np.isin(near, labels)]
        near = np.array([label for label in near.tolist() if label in index], dtype=np.int64)
        if len(near):
            v = vector_scores(index.get(near) @ vector, query.threshold)
            near, v = near[v > 0.0], v[v > 0.0]
            extra = fuse_arrays(mode, np.zeros(len(near)), v, ideal, query.vector_weight)
            labels, scores, added = _union(labels, scores, near, extra)
            scores += added
            before, after = space.neighbour_labels(labels)
    support = np.maximum(_lookup(labels, scores, before), _lookup(labels, scores, after))
    boost = (scores > 0.0) & (support > 0.0)
    scores = np.where(boost, scores + config.neighbour_weight * support * (1.0 - scores), scores)
    return _Scored(labels, scores)


def _score_dense(
    space: Space,
    index: ExactIndex | None,
    query: Query,
    vector: np.ndarray | None,
    terms: list[str],
    stats: Bm25Stats,
    ideal: float,
    config: IndexConfig,
) -> _Scored:
    """:func:`_score_space` of an exact namespace, over arrays indexed by label: every item is
    compared anyway, so one array per part costs less than matching candidate lists."""
    size = len(space.rec)
    mode = query.mode
    lexical = space.lexical.dense_scores(terms, stats, size) if terms else np.zeros(size)
    size = len(lexical)
    vec = np.zeros(size)
    if vector is not None and index is not None and len(index):
        labels, sims = index.scan_many(vector[None])  # normalised already: no checks, no copy
        vec[labels] = vector_scores(sims[0], query.threshold)
    candidate = (
        lexical > 0.0 if mode == "lexical" else (vec > 0.0 if mode == "vector" else (lexical > 0.0) | (vec > 0.0))
    )
    scores = fuse_arrays(mode, lexical, vec, ideal, query.vector_weight)
    if space.by_recency is not None and config.neighbour_weight > 0.0:
        before, after = space.adjacent()
        padded = np.append(np.where(candidate, scores, 0.0), 0.0)  # label -1 reads the 0 at the end
        support = np.maximum(padded[before], padded[after])
        boost = candidate & (scores > 0.0) & (support > 0.0)
        scores = np.where(boost, scores + config.neighbour_weight * support * (1.0 - scores), scores)
    labels = np.flatnonzero(candidate)
    return _Scored(labels, scores[labels])


def _lookup(labels: np.ndarray, scores: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The score of each label of ``wanted`` among ``labels`` (ascending), 0 where absent or -1."""
    pos = np.minimum(np.searchsorted(labels, wanted), len(labels) - 1)
    return np.where((wanted >= 0) & (labels[pos] == wanted), scores[pos], 0.0)


def query_terms(query: Query) -> list[str]:
    """The distinct index terms of ``query`` (none in vector mode)."""
    return list(dict.fromkeys(index_terms(query.text))) if query.mode != "vector" else []


def query_stats(spaces: list[Space], terms: list[str]) -> Bm25Stats:
    """The BM25 statistics of ``spaces`` searched together, for the query ``terms``."""
    if len(spaces) == 1:
        return spaces[0].lexical.stats(terms)
    return Bm25Stats.merge(space.lexical.stats(terms) for space in spaces)


def search_spaces(
    spaces: list[Space], query: Query, vector: np.ndarray | None, retired: bool, config: IndexConfig
) -> tuple[list[ShardHit], Bm25Stats]:
    """The best ``query.k`` hits over ``spaces`` and the BM25 statistics used (see module doc).
    ``vector`` is the L2-normalised query vector (None: no vector part); ``retired`` answers from
    the indexes of the model replaced by the last cutover."""
    stream = None if query.stream is None else Stream(*query.stream)
    window = None if query.window is None else Window(*query.window)
    terms = query_terms(query)
    stats = query_stats(spaces, terms)
    ideal = ideal_bm25(terms, stats)
    depth = max(query.k, HYBRID_DEPTH if stream is None else STREAM_DEPTH)
    kept: list[tuple[float, float, str, Space]] = []
    for space in spaces:
        index = space.retired if retired else space.vectors
        scored = _score_space(space, index, query, vector, terms, stats, ideal, depth, window, config)
        if stream is None and window is None:
            labels, final = _plain(space, scored, query)
        else:
            labels, final = _ranked(space, scored, query, stream, window)
        kept.extend(_best(space, labels, final, query.k))
    best = heapq.nsmallest(max(0, query.k), kept, key=lambda t: (-t[0], -t[1], t[2], tuple(t[3].namespace)))
    hits = [
        ShardHit(space.namespace, doc, score, recency, space.payload.get(doc, ""))
        for score, recency, doc, space in best
    ]
    return hits, stats


def _best(space: Space, labels: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[float, float, str, Space]]:
    """The ``k`` best of one namespace by (score, recency), with every item tied with the last
    (the final order breaks those ties by doc id), as (score, recency, doc_id, space)."""
    if k <= 0 or not len(labels):
        return []
    if len(labels) > k:  # those scoring at least the k-th score, then by recency among them
        top = np.flatnonzero(scores >= np.partition(scores, len(scores) - k)[len(scores) - k])
        labels, scores = labels[top], scores[top]
    recency = space.rec[labels]
    if len(labels) > k:
        order = np.lexsort((-recency, -scores))
        last = order[k - 1]
        tied = (scores == scores[last]) & (recency == recency[last])
        take = np.union1d(order[:k], np.flatnonzero(tied))
        labels, scores, recency = labels[take], scores[take], recency[take]
    docs = space.docs
    return [(s, r, docs[label], space) for label, s, r in zip(labels.tolist(), scores.tolist(), recency.tolist())]


def _others(space: Space, scored: np.ndarray, k: int, window: Window | None = None) -> np.ndarray:
    """The ``k`` newest labels of ``space`` not in ``scored`` (inside ``window`` if given)."""
    rest = np.setdiff1d(space.live_labels(), scored, assume_unique=True)
    if window is not None and len(rest):
        rest = rest[in_window(space.columns.rows(rest), window)]
    if len(rest) > k:
        rest = rest[np.argpartition(-space.rec[rest], k - 1)[:k]]
    return rest


def _plain(space: Space, scored: _Scored, query: Query) -> tuple[np.ndarray, np.ndarray]:
    """Relevance scoring: the items over the floor (with no floor, the ``k`` newest others at 0)."""
    floor = query.min_score
    keep = scored.scores > 0.0 if floor is None else scored.scores >= floor
    labels, scores = scored.labels[keep], scored.scores[keep]
    if floor is not None and floor <= 0.0:  # no floor: the rest score 0
        rest = _others(space, scored.labels, query.k)
        labels, scores = np.concatenate([labels, rest]), np.concatenate([scores, np.zeros(len(rest))])
    return labels, scores


def _ranked(
    space: Space, scored: _Scored, query: Query, stream: Stream | None, window: Window | None
) -> tuple[np.ndarray, np.ndarray]:
    """Stream scoring and/or a time window over one namespace, vectorised
    (:func:`memray.index.fusion.rank`). With no floor every item of the namespace is a candidate
    (relevance 0 unless scored): stream scoring ranks them all; relevance keeps the ``k`` newest."""
    labels, relevance = scored.labels, scored.scores
    if query.min_score is not None and query.min_score <= 0.0:
        if stream is None:
            rest = _others(space, labels, query.k, window)
        else:
            rest = np.setdiff1d(space.live_labels(), labels, assume_unique=True)
        labels, relevance = np.concatenate([labels, rest]), np.concatenate([relevance, np.zeros(len(rest))])
    if not len(labels):
        return labels, relevance
    final = rank(relevance, space.columns.rows(labels), query.min_score, stream, window)
    keep = final == final
    return labels[keep], final[keep]
