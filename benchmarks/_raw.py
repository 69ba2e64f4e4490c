"""Raw floors for the search benchmarks: what the machine does with the same data and no memray.

Each class is built from the very vectors (float32, L2-normalised) or texts a benchmark stored,
and answers a top-``k`` query with nothing but numpy, hnswlib or a dict of postings:

- :class:`RawExact`: one contiguous float32 matrix, ``M @ q``, ``argpartition``, sort the ``k``;
- :class:`RawHnsw`: one ``hnswlib.Index`` with the shard's parameters (M, ef_construction, ef,
  one thread), ``knn_query``;
- :class:`RawBm25`: BM25 (memray's k1, b and idf) with per-posting weights precomputed at build
  time (an impact index, as a search engine keeps), summed with one ``np.bincount``. It tokenises with
  :func:`memray.text.index_terms`, so it reads the same terms memray indexes: the floor is the
  scoring, not a cheaper tokeniser.

:func:`time_floor` times a callable per query like the benchmarks time memray (``perf_counter``
around each call), so the two are compared on equal terms in the same run.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks._harness import pct_ms, time_calls
from memray.index.lexical import K1, B
from memray.text import index_terms

__all__ = ["RawExact", "RawHnsw", "RawBm25", "time_floor", "raw_search_floors"]


class RawExact:
    """Exact top-k over one float32 matrix."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.mat = np.ascontiguousarray(vectors, dtype=np.float32)

    def topk(self, query: np.ndarray, k: int) -> np.ndarray:
        sims = self.mat @ query
        n = sims.shape[0]
        if n <= k:
            return np.argsort(-sims)
        top = np.argpartition(-sims, k - 1)[:k]
        return top[np.argsort(-sims[top])]


class RawHnsw:
    """hnswlib over the same vectors, with the given parameters and one thread."""

    def __init__(self, vectors: np.ndarray, m: int, ef_construction: int, ef: int) -> None:
        import hnswlib

        mat = np.ascontiguousarray(vectors, dtype=np.float32)
        self.index = hnswlib.Index(space="ip", dim=mat.shape[1])
        self.index.init_index(max_elements=max(1, len(mat)), M=m, ef_construction=ef_construction)
        self.index.set_num_threads(1)
        self.index.add_items(mat, np.arange(len(mat)))
        self.index.set_ef(ef)
        self.n = len(mat)

    def topk(self, query: np.ndarray, k: int) -> np.ndarray:
        labels, _ = self.index.knn_query(query, k=min(k, self.n))
        return np.asarray(labels[0])


class RawBm25:
    """BM25 top-k over a list of texts (see the module docstring)."""

    def __init__(self, texts: Sequence[str]) -> None:
        counts = [Counter(index_terms(t)) for t in texts]
        lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
        self.n = len(texts)
        avgdl = float(lengths.mean()) if self.n else 1.0
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for doc, tf in enumerate(counts):
            norm = K1 * (1.0 - B + B * lengths[doc] / (avgdl or 1.0))
            for term, n in tf.items():
                docs, weights = postings.setdefault(term, ([], []))
                docs.append(doc)
                weights.append(n * (K1 + 1.0) / (n + norm))
        self.postings = {
            term: (
                np.array(docs, dtype=np.int64),
                math.log(1.0 + (self.n - len(docs) + 0.5) / (len(docs) + 0.5)) * np.array(w),
            )
            for term, (docs, w) in postings.items()
        }

    def topk(self, text: str, k: int) -> np.ndarray:
        hits = [self.postings[t] for t in dict.fromkeys(index_terms(text)) if t in self.postings]
        if not hits:
            return np.zeros(0, dtype=np.int64)
        scores: np.ndarray
        if len(hits) == 1:
            scores = np.zeros(self.n)
            scores[hits[0][0]] = hits[0][1]
        else:
            docs = np.concatenate([h[0] for h in hits])
            scores = np.bincount(docs, np.concatenate([h[1] for h in hits]), minlength=self.n)
        found = np.flatnonzero(scores)
        if len(found) > k:
            found = found[np.argpartition(-scores[found], k - 1)[:k]]
        return found[np.argsort(-scores[found])]


def time_floor(calls: int, fn: Callable[[int], Any]) -> list[float]:
    """Latency (s) of each of ``calls`` sequential calls of ``fn(i)`` (:func:`time_calls`), after a
    short warm-up."""
    for i in range(min(10, calls)):
        fn(i)
    return time_calls(calls, fn)


def raw_search_floors(
    vectors: np.ndarray,
    texts: Sequence[str],
    conversation_of: Sequence[int],
    user_of: Sequence[str],
    embedder: Any,
    qs: list[tuple[int, str]],
    k: int,
) -> dict[str, Any]:
    """Raw floors of memray's searches over ``vectors`` (the stored ones) and ``texts``: item ``i``
    is in conversation ``conversation_of[i]``, conversation ``c`` belongs to ``user_of[c]``; a
    query ``(c, text)`` searches conversation ``c``, its user, and everything (numpy + BM25, and
    numpy alone), and ``embed_query`` times the embedder past its cache."""
    conv_of = np.array(conversation_of)
    groups: dict[str, dict[Any, np.ndarray]] = {"conv": {}, "user": {}}
    for c in sorted(set(conversation_of)):
        groups["conv"][c] = np.flatnonzero(conv_of == c)
    for u in sorted(set(user_of)):
        groups["user"][u] = np.flatnonzero(np.isin(conv_of, [c for c, x in enumerate(user_of) if x == u]))
    raw: dict[str, dict[Any, tuple[RawExact, RawBm25]]] = {
        kind: {key: (RawExact(vectors[m]), RawBm25([texts[i] for i in m])) for key, m in part.items()}
        for kind, part in groups.items()
    }
    everything = (RawExact(vectors), RawBm25(texts))
    qv = embedder.embed([q for _, q in qs])
    uncached = getattr(embedder, "embedder", embedder)  # past the LRU cache: the embedding itself

    def both(pair: tuple[RawExact, RawBm25], i: int) -> None:
        pair[0].topk(qv[i], k)
        pair[1].topk(qs[i][1], k)

    return {
        "search_conversation": pct_ms(time_floor(len(qs), lambda i: both(raw["conv"][qs[i][0]], i))),
        "search_user": pct_ms(time_floor(len(qs), lambda i: both(raw["user"][user_of[qs[i][0]]], i))),
        "search_app": pct_ms(time_floor(len(qs), lambda i: both(everything, i))),
        "search_app_numpy": pct_ms(time_floor(len(qs), lambda i: everything[0].topk(qv[i], k))),
        "embed_query": pct_ms(time_floor(len(qs), lambda i: uncached.embed([qs[i][1]]))),
    }
