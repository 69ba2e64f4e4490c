"""What a search ``score`` means, how the two retrievers are fused, and the one deterministic order.

A hit must be relevant on its own; rank alone never makes a hit. ``score`` is in [0, 1], 0 means
"not relevant", and ``min_score`` is compared with it directly. By default (``min_score=None``)
only hits scoring above 0 come back, so a query that matches nothing returns nothing;
``min_score=0`` lifts the floor and returns the best items in scope whatever they score.

- **lexical** ``L = min(1, bm25 / ideal)`` for a text sharing at least one index term (a content
  word, stemmed; see :func:`memray.text.index_terms`) with the query, else 0. BM25 uses the
  statistics of everything searched (:mod:`memray.index.lexical`); ``ideal`` is what a text
  holding every query term once would score (the sum of their idf,
  :func:`~memray.index.lexical.ideal_bm25`). So L is the idf-weighted share of the query a text
  covers: 1.0 when it holds all of it, 0.3 when it holds only a common word of a three-word
  query, whatever the size of the collection (a plain saturation of BM25 gave 0.1 to a perfect
  match in a small conversation). Within one query it ranks exactly as BM25 does.
- **vector** ``V = (cos - t) / (1 - t)`` clipped to [0, 1], where ``t`` is the embedder's
  calibrated *relevance threshold*: the cosine that 99% of unrelated text pairs stay below
  (:mod:`memray.embedding.calibration`). V = 0 means "no more similar than unrelated texts";
  1 means the same direction.
- **hybrid** (default) ``H = (1 - v) * L + v * V``: relevant when either part is. ``v``, the
  vector weight, is the embedder's own (:mod:`memray.embedding.calibration`): twice the share of
  related sentence pairs its similarity puts above its threshold, at most 0.5 — 0.03 for the
  hash embedder, whose similarity barely tells related text from unrelated, 0.42 for MiniLM.
  ``IndexConfig.vector_weight`` overrides it. On LoCoMo and the synthetic set
  (``benchmarks/retrieval_eval.py``; README "Retrieval quality") this weighting puts hybrid
  recall@10 at or above each part's, where any one fixed weight fell below one of them.

Then, for conversation messages, **neighbour support**: a message whose previous or next message
(by ``seq``, in the same conversation) is relevant too gains ``n * s_neighbour * (1 - s)`` with
``n = IndexConfig.neighbour_weight`` (0.2): an answer is often a reply to the turn that names the
topic. Only messages relevant on their own get it (their score stays above 0 only if it was), and
it stays within [0, 1].

**Filters** (:class:`memray.scoring.Window`) come first: an item outside the window is not a
candidate. ``after``/``before`` bound its simulation time (``after <= sim_time < before``; an
item without one is outside every simulation-time window), ``created_after``/``created_before``
its wall-clock creation time (an entry's ``timestamp``) the same way.

**Memory-stream scoring** (``Scoring.stream``; Park et al. 2023, "Generative Agents"). The
relevance ``R`` above must pass the relevance floor first (``R > 0``, or ``R >= min_score``):
recency and importance rank relevant items, they never make an irrelevant one a hit. Then::

    S = (w_rec * recency + w_imp * importance + w_rel * R) / (w_rec + w_imp + w_rel)
    recency = decay_per_hour ** max(0, (now - sim_time) / 3600)      (0 without a sim_time)
    importance = the item's importance in [0, 1]                     (0 without one)

``now`` is the query's simulation time and ``sim_time`` the item's, both in simulated seconds,
so ``decay_per_hour`` is per simulated hour (0.995 in the paper). S is in [0, 1]. Where the paper
min-max normalises each part over the candidates, memray keeps every part absolute (recency and
importance are already in [0, 1]), so scores of different shards, and of the read-your-writes
tail, compare directly. With ``min_score=0`` (no floor) every item in scope is a candidate with
its R (0 for most), which ranks a namespace by recency and importance alone. A shard scores its
own items (:func:`rank`, in :mod:`memray.index.search`), the caller the messages not yet indexed
(:mod:`memray.conversation.tail`): the same function, so both agree. In an HNSW namespace the
vector candidates are the nearest ``STREAM_DEPTH`` (200), not all of them: stream ranking there
is approximate for items relevant only by vector and beyond that depth.

Order: score descending, then recency descending (later messages/entries win ties), then
``doc_id`` ascending, then namespace: results are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from memray.index.base import ShardHit
from memray.scoring import SECONDS_PER_HOUR, Stream, Window

__all__ = [
    "lexical_score",
    "vector_score",
    "hybrid_score",
    "neighbour_support",
    "hit_order",
    "top_hits",
    "in_window",
    "stream_scores",
    "rank",
    "vector_scores",
    "fuse_arrays",
]


def lexical_score(bm25: float, ideal: float) -> float:
    """``min(1, bm25 / ideal)``: the idf-weighted share of the query a text covers."""
    if bm25 <= 0.0 or ideal <= 0.0:
        return 0.0
    return min(1.0, float(bm25) / ideal)


def vector_score(cosine: float, threshold: float) -> float:
    """How far above the relevance threshold ``cosine`` is, rescaled to [0, 1]."""
    if cosine <= threshold:
        return 0.0
    return min(1.0, (float(cosine) - threshold) / (1.0 - threshold))


def hybrid_score(lexical: float, vector: float, vector_weight: float) -> float:
    return (1.0 - vector_weight) * lexical + vector_weight * vector


def neighbour_support(score: float, neighbour: float, weight: float) -> float:
    """``score`` raised by its best neighbour's score (see the module docstring)."""
    if score <= 0.0 or neighbour <= 0.0:
        return score
    return score + weight * neighbour * (1.0 - score)


def hit_order(hit: ShardHit) -> tuple[float, float, str, tuple[str, ...]]:
    """Sort key: score desc, recency desc, doc_id asc, namespace asc."""
    return (-hit.score, -hit.recency, hit.doc_id, tuple(hit.namespace))


def top_hits(hits: Iterable[ShardHit], k: int, min_score: float | None = None) -> list[ShardHit]:
    """The ``k`` best hits in the deterministic order: those above 0 (the relevance floor), or
    with ``min_score`` those at or above it."""
    if min_score is None:
        kept = [h for h in hits if h.score > 0.0]
    else:
        kept = [h for h in hits if h.score >= min_score]
    kept.sort(key=hit_order)
    return kept[: max(0, k)]


def in_window(columns: np.ndarray, window: Window | None) -> np.ndarray:
    """Which rows of ``columns`` (``float64[n, 3]``: created_at, sim_time, importance) lie in
    ``window`` (see the module docstring); NaN compares false, so a missing time is outside."""
    keep = np.ones(len(columns), dtype=bool)
    if window is None:
        return keep
    after, before, created_after, created_before = window
    for col, lo, hi in ((1, after, before), (0, created_after, created_before)):
        values = columns[:, col]
        if lo is not None:
            keep &= values >= lo
        if hi is not None:
            keep &= values < hi
    return keep


def stream_scores(relevance: np.ndarray, columns: np.ndarray, stream: Stream) -> np.ndarray:
    """The memory-stream score S of each item (module docstring)."""
    now, decay, w_rec, w_imp, w_rel = stream
    sim = columns[:, 1]
    hours = np.maximum(0.0, (now - np.nan_to_num(sim, nan=now)) / SECONDS_PER_HOUR)
    recency = np.where(np.isnan(sim), 0.0, np.power(decay, hours))
    importance = np.nan_to_num(columns[:, 2], nan=0.0)
    scores: np.ndarray = (w_rec * recency + w_imp * importance + w_rel * relevance) / (w_rec + w_imp + w_rel)
    return scores


def rank(
    relevance: np.ndarray, columns: np.ndarray, min_score: float | None, stream: Stream | None, window: Window | None
) -> np.ndarray:
    """The final score of each item: its relevance (or stream score), NaN where it is not a hit
    (outside ``window``, or under the relevance floor: ``R > 0``, or ``R >= min_score``)."""
    rel = np.asarray(relevance, dtype=np.float64)
    ok = in_window(columns, window) & ((rel > 0.0) if min_score is None else (rel >= min_score))
    score = rel if stream is None else stream_scores(rel, columns, stream)
    return np.where(ok, score, np.nan)


def vector_scores(sims: np.ndarray, threshold: float) -> np.ndarray:
    """:func:`vector_score` over an array of cosines."""
    return np.clip((sims - threshold) / (1.0 - threshold), 0.0, 1.0)


def fuse_arrays(mode: str, lexical: np.ndarray, vec: np.ndarray, ideal: float, vector_weight: float) -> np.ndarray:
    """Scores by mode from BM25 values and vector scores (memray.index.fusion), elementwise."""
    lex = np.minimum(1.0, lexical / ideal) if ideal > 0.0 else np.zeros(len(lexical))
    lex = np.where(lexical > 0.0, lex, 0.0)
    if mode == "lexical":
        return lex
    if mode == "vector":
        return vec
    return (1.0 - vector_weight) * lex + vector_weight * vec
