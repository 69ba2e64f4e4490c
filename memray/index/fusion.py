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

Order: score descending, then recency descending (later messages/entries win ties), then
``doc_id`` ascending, then namespace: results are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable

from memray.index.base import ShardHit

__all__ = ["lexical_score", "vector_score", "hybrid_score", "neighbour_support", "hit_order", "top_hits"]


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
