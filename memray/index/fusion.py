"""What a search ``score`` means, how ranked lists are fused, and the one deterministic order.

``score`` is always in [0, 1], higher is better, and ``min_score`` is compared with it directly.
Its meaning depends on the retrieval mode:

- **vector**: the cosine similarity of the (L2-normalised) query and item vectors, clipped to
  [0, 1] (negative cosines score 0). ``min_score=0.7`` therefore means *cosine >= 0.7*. memray does
  **not** use the seed's ``(cos + 1) / 2`` mapping, under which 0.7 would mean cosine >= 0.4.
- **lexical**: ``bm25 / (bm25 + LEXICAL_K_NORM)`` with ``LEXICAL_K_NORM = 4.0``: a saturating,
  monotone map of the raw BM25 score (see :mod:`memray.index.lexical`), so 0.5 means bm25 = 4
  (roughly one rare query term matched), and a score does not depend on what else was returned.
  Because it is absolute (not divided by the best hit's score), hits from different namespaces and
  shards merge by it directly. (BM25 idf is computed per namespace, so across namespaces the
  merge is an approximation: the same text can score differently in a small and a large one.)
- **hybrid**: reciprocal rank fusion (``k = 60``) of the vector and the lexical ranked lists,
  divided by its maximum ``n_lists / (60 + 1)``: a document ranked 1st in every list that took
  part scores 1.0, one ranked 1st in only one of two lists scores 0.5. When the query has no vector
  (no embedder), only the lexical list takes part, so its first hit still scores 1.0. Across
  shards, each shard fuses its own lists and the router merges by these normalised scores, which
  approximates fusing the global lists (exact when all hits come from one shard, as every
  user-scoped search does).

Order: score descending, then recency descending (later messages/entries win ties), then
``doc_id`` ascending, then namespace: results are deterministic.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

from memray.index.base import ShardHit

__all__ = [
    "RRF_K",
    "LEXICAL_K_NORM",
    "vector_score",
    "lexical_score",
    "rrf",
    "hybrid_scores",
    "hit_order",
    "top_hits",
]

RRF_K = 60
LEXICAL_K_NORM = 4.0

K = TypeVar("K", bound=Hashable)


def vector_score(cosine: float) -> float:
    """Cosine clipped to [0, 1]."""
    return min(1.0, max(0.0, float(cosine)))


def lexical_score(bm25: float) -> float:
    """``bm25 / (bm25 + LEXICAL_K_NORM)``, in [0, 1)."""
    bm25 = max(0.0, float(bm25))
    return bm25 / (bm25 + LEXICAL_K_NORM)


def rrf(ranked_lists: Sequence[Sequence[K]], k: int = RRF_K) -> dict[K, float]:
    """Raw reciprocal rank fusion: ``sum over lists of 1 / (k + rank)``, ranks from 1. A key
    repeated inside one list counts at its best rank only."""
    fused: dict[K, float] = {}
    for ranked in ranked_lists:
        seen: set[K] = set()
        for rank, key in enumerate(ranked, start=1):
            if key in seen:
                continue
            seen.add(key)
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def hybrid_scores(ranked_lists: Sequence[Sequence[K]], k: int = RRF_K) -> dict[K, float]:
    """RRF normalised to [0, 1]: 1.0 for a key ranked 1st in every one of ``ranked_lists``."""
    if not ranked_lists:
        return {}
    best = len(ranked_lists) / (k + 1)
    return {key: min(1.0, value / best) for key, value in rrf(ranked_lists, k).items()}


def hit_order(hit: ShardHit) -> tuple[float, float, str, tuple[str, ...]]:
    """Sort key: score desc, recency desc, doc_id asc, namespace asc."""
    return (-hit.score, -hit.recency, hit.doc_id, tuple(hit.namespace))


def top_hits(hits: Iterable[ShardHit], k: int, min_score: float | None = None) -> list[ShardHit]:
    """The ``k`` best hits in the deterministic order, dropping those below ``min_score``."""
    kept = [h for h in hits if min_score is None or h.score >= min_score]
    kept.sort(key=hit_order)
    return kept[: max(0, k)]
