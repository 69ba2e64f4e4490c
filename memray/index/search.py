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
from memray.index.fusion import hybrid_score, in_window, lexical_score, neighbour_support, rank
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


def vector_scores(sims: np.ndarray, threshold: float) -> np.ndarray:
    """:func:`memray.index.fusion.vector_score` over an array of cosines."""
    return np.clip((sims - threshold) / (1.0 - threshold), 0.0, 1.0)


def _vector_part(
    index: ExactIndex | HnswIndex,
    space: Space,
    vector: np.ndarray,
    threshold: float,
    also: list[str],
    depth: int,
    window: Window | None,
) -> dict[str, float]:
    """V of every item above the threshold (exact: all are compared; HNSW: the ``depth`` nearest,
    or, with a time ``window``, every item inside it, compared exactly), and of the lexical
    candidates ``also`` wherever they have a vector."""
    if isinstance(index, ExactIndex):
        labels, sims = index.scan(vector)
    elif window is not None:
        all_labels = np.fromiter(space.docs, dtype=np.int64, count=len(space.docs))
        inside = all_labels[in_window(space.columns.rows(all_labels), window)]
        labels = np.array([label for label in inside.tolist() if label in index], dtype=np.int64)
        sims = index.get(labels) @ vector if len(labels) else np.zeros(0, dtype=np.float32)
    else:
        found, found_sims = index.search(vector, max(depth, 1))
        wanted = [space.labels[d] for d in also if space.labels[d] in index]
        extra = index.get(np.array(wanted, dtype=np.int64)) @ vector if wanted else np.zeros(0, dtype=np.float32)
        labels = np.concatenate([found[0], np.array(wanted, dtype=np.int64)])
        sims = np.concatenate([found_sims[0], extra.astype(np.float32)])
    scores = vector_scores(sims, threshold)
    keep = set(also)
    return {
        space.docs[int(label)]: float(v)
        for label, v in zip(labels.tolist(), scores.tolist())
        if v > 0.0 or space.docs[int(label)] in keep
    }


def search_spaces(
    spaces: list[Space], query: Query, vector: np.ndarray | None, retired: bool, config: IndexConfig
) -> tuple[list[ShardHit], Bm25Stats]:
    """The best ``query.k`` hits over ``spaces`` and the BM25 statistics used (see module doc).
    ``vector`` is the L2-normalised query vector (None: no vector part); ``retired`` answers from
    the indexes of the model replaced by the last cutover."""
    mode = query.mode
    stream = None if query.stream is None else Stream(*query.stream)
    window = None if query.window is None else Window(*query.window)
    terms = list(dict.fromkeys(index_terms(query.text))) if mode != "vector" else []
    stats = Bm25Stats.merge(space.lexical.stats(terms) for space in spaces)
    ideal = ideal_bm25(terms, stats)
    depth = max(query.k, HYBRID_DEPTH if stream is None else STREAM_DEPTH)
    kept: list[tuple[float, float, str, Space]] = []
    for space in spaces:
        lexical = space.lexical.scores(terms, stats) if terms else {}
        vec: dict[str, float] = {}
        index = space.retired if retired else space.vectors
        if vector is not None and index is not None and len(index):
            vec = _vector_part(index, space, vector, query.threshold, list(lexical), depth, window)
        scores = _fuse(mode, lexical, vec, ideal, query.vector_weight)
        if space.by_recency is not None and config.neighbour_weight > 0.0:
            if vector is not None and isinstance(index, HnswIndex):  # neighbours beyond the HNSW depth
                scores.update(
                    _fuse(
                        mode,
                        {},
                        _neighbour_vectors(space, index, vector, query.threshold, scores),
                        ideal,
                        query.vector_weight,
                    )
                )
            scores = _with_neighbours(space, scores, config.neighbour_weight)
        if stream is None and window is None:
            kept.extend(_plain(space, scores, query))
        else:
            kept.extend(_ranked(space, scores, query, stream, window))
    best = heapq.nsmallest(max(0, query.k), kept, key=lambda t: (-t[0], -t[1], t[2], tuple(t[3].namespace)))
    hits = [
        ShardHit(space.namespace, doc, score, recency, space.payload.get(doc, ""))
        for score, recency, doc, space in best
    ]
    return hits, stats


def _plain(space: Space, scores: dict[str, float], query: Query) -> list[tuple[float, float, str, Space]]:
    """Relevance scoring: the items over the floor (with no floor, the ``k`` newest others at 0)."""
    floor = query.min_score
    out = [
        (s, space.recency[doc], doc, space) for doc, s in scores.items() if (s > 0.0 if floor is None else s >= floor)
    ]
    if floor is not None and floor <= 0.0:  # no floor: the rest score 0
        rest = heapq.nlargest(
            query.k, (doc for doc in space.labels if doc not in scores), key=space.recency.__getitem__
        )
        out.extend((0.0, space.recency[doc], doc, space) for doc in rest)
    return out


def _ranked(
    space: Space, scores: dict[str, float], query: Query, stream: Stream | None, window: Window | None
) -> list[tuple[float, float, str, Space]]:
    """Stream scoring and/or a time window over one namespace, vectorised
    (:func:`memray.index.fusion.rank`). With no floor every item of the namespace is a candidate
    (relevance 0 unless scored): stream scoring ranks them all; relevance keeps the ``k`` newest."""
    docs = list(scores)
    relevance = [scores[d] for d in docs]
    if query.min_score is not None and query.min_score <= 0.0:
        rest = [doc for doc in space.labels if doc not in scores]
        if stream is None and rest:
            cols = space.columns.rows(np.array([space.labels[d] for d in rest], dtype=np.int64))
            inside = [d for d, ok in zip(rest, in_window(cols, window).tolist()) if ok]
            rest = heapq.nlargest(query.k, inside, key=space.recency.__getitem__)
        docs += rest
        relevance += [0.0] * len(rest)
    if not docs:
        return []
    labels = np.array([space.labels[d] for d in docs], dtype=np.int64)
    final = rank(np.array(relevance), space.columns.rows(labels), query.min_score, stream, window)
    return [(score, space.recency[doc], doc, space) for doc, score in zip(docs, final.tolist()) if score == score]


def _fuse(
    mode: Mode, lexical: dict[str, float], vec: dict[str, float], ideal: float, vector_weight: float
) -> dict[str, float]:
    """Scores by mode from BM25 values and vector scores (memray.index.fusion)."""
    if mode == "lexical":
        return {doc: lexical_score(b, ideal) for doc, b in lexical.items()}
    if mode == "vector":
        return dict(vec)
    return {
        doc: hybrid_score(lexical_score(lexical.get(doc, 0.0), ideal), vec.get(doc, 0.0), vector_weight)
        for doc in lexical.keys() | vec.keys()
    }


def _neighbour_vectors(
    space: Space, index: HnswIndex, vector: np.ndarray, threshold: float, scores: dict[str, float]
) -> dict[str, float]:
    """V of the neighbours of scored items that an HNSW search did not reach (an exact namespace
    compares every item, so there they are known: 0)."""
    missing = {n for doc in scores for n in space.neighbours(doc) if n is not None and n not in scores}
    labels = [space.labels[d] for d in missing if space.labels[d] in index]
    if not labels:
        return {}
    sims = index.get(np.array(labels, dtype=np.int64)) @ vector
    return {space.docs[label]: float(v) for label, v in zip(labels, vector_scores(sims, threshold).tolist()) if v > 0.0}


def _with_neighbours(space: Space, scores: dict[str, float], weight: float) -> dict[str, float]:
    out = {}
    for doc, score in scores.items():
        before, after = space.neighbours(doc)
        support = max(scores.get(before, 0.0) if before else 0.0, scores.get(after, 0.0) if after else 0.0)
        out[doc] = neighbour_support(score, support, weight)
    return out
