"""`LexicalIndex`: incremental BM25 over one namespace's texts.

Texts are reduced to :func:`memray.text.index_terms` (tokenised, English function words dropped,
Latin words stemmed). A query is plain text reduced the same way: there is no query syntax, so
quotes, ``?``, ``-`` and the like are just separators, and a query with no content terms
("what is it?") matches nothing (never an error).

Scoring is Okapi BM25 with ``k1 = 0.9``, ``b = 0.4`` and the non-negative Lucene idf
``log(1 + (N - df + 0.5) / (df + 0.5))``; each distinct query term counts once. ``b`` is lower
than the textbook 0.75 because conversation turns are short and of similar length: on LoCoMo
(``benchmarks/retrieval_eval.py``) b = 0.4 gave recall@10 0.64 against 0.63 at 0.75, and k1
mattered less (0.6–1.5 within 0.01).

Collection statistics (``N``, the total length, ``df`` per term) can come from outside: a search
over many namespaces of one user scores every namespace with the statistics of all of them
(:class:`Bm25Stats` summed over them), which is exactly BM25 over their union. Per-namespace
idf would rank a term rare in one short conversation above one rare across the user's history.

State: a forward index ``doc -> {term: tf}`` (what an upsert or delete must undo), postings
``term -> {doc: tf}``, and the running total of document lengths. Persistence writes the
forward index only (JSON); postings are rebuilt on load.

Scoring without a Python object per hit (:meth:`LexicalIndex.postings`, read by the scoring
kernel, :mod:`memray.index.scorer`): an index made with a ``key`` (doc id -> int label; a shard's
namespace passes its label map) keeps, per term, the posting as numpy arrays (labels, tf,
document lengths), built on first use and dropped when a document holding the term changes; a
query is then a few array expressions per term and one ``bincount``. On a 1,000-message
namespace this took the lexical part of a hybrid search from ~1.1 ms to ~0.05 ms
(``benchmarks/search_micro.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from memray.index.base import atomic_write_json, read_json
from memray.text import term_counts

__all__ = ["LexicalIndex", "Bm25Stats", "K1", "B", "bm25_idf"]

K1 = 0.9
B = 0.4
_FILE = "lexical.json"
#: :meth:`LexicalIndex.postings` scores a query in plain Python, as one fused entry, while its
#: postings hold at most this many entries per query term that has one; above, per-term numpy
#: arrays (cached) win. A search in plain Python costs ~0.5 us an entry, the arrays ~20 us a term
#: (appended to and reweighted at every search in a simulation, as every tick adds documents):
#: they cross at 36-42 entries a term (``benchmarks/lexical_micro.py --ticks 160``).
FUSED_PER_TERM = 40


class Bm25Stats(NamedTuple):
    """Collection statistics of one or more namespaces, for the terms of one query."""

    docs: int
    total_len: int
    df: dict[str, int]

    @classmethod
    def merge(cls, parts: Iterable[Bm25Stats]) -> Bm25Stats:
        docs = total = 0
        df: Counter[str] = Counter()
        for part in parts:
            docs += part.docs
            total += part.total_len
            df.update(part.df)
        return cls(docs, total, dict(df))

    def with_docs(self, counts: Iterable[dict[str, int]], terms: Iterable[str]) -> Bm25Stats:
        """These statistics with more documents (given by their term counts) added, for the
        query ``terms``."""
        wanted = set(terms)
        docs, total, df = self.docs, self.total_len, Counter(self.df)
        for tf in counts:
            docs += 1
            total += sum(tf.values())
            df.update(t for t in tf if t in wanted)
        return Bm25Stats(docs, total, dict(df))


def bm25_idf(docs: int, df: int) -> float:
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


class LexicalIndex:
    """BM25 over the documents of one namespace; doc ids are strings."""

    def __init__(self, key: Callable[[str], int] | None = None) -> None:
        self._docs: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._postings: dict[str, dict[str, int]] = {}
        self._total_len = 0
        self._key = key
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # term -> labels, tf, lengths
        self._fresh: dict[str, list[str]] = {}  # term -> docs added since its arrays were built
        self.rebuilt = 0  # posting entries turned into arrays so far (a test counts them)
        self._weights: dict[str, tuple[float, np.ndarray]] = {}  # term -> (avgdl, BM25 / idf of each posting)

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    @property
    def avgdl(self) -> float:
        return self._total_len / len(self._docs) if self._docs else 0.0

    def terms(self, doc_id: str) -> dict[str, int] | None:
        """The term frequencies indexed for ``doc_id`` (None when absent)."""
        return self._docs.get(doc_id)

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` as ``doc_id``, replacing what was indexed under that id (upsert)."""
        self._put(doc_id, term_counts(text))

    def add_terms(self, doc_id: str, tf: dict[str, int]) -> None:
        """Index already-counted terms (as :meth:`terms` returns them) under ``doc_id``."""
        self._put(doc_id, dict(tf))

    def _put(self, doc_id: str, tf: dict[str, int]) -> None:
        self.delete(doc_id)
        self._docs[doc_id] = tf
        length = sum(tf.values())
        self._lengths[doc_id] = length
        self._total_len += length
        arrays, fresh = self._arrays, self._fresh
        for term, count in tf.items():
            self._postings.setdefault(term, {})[doc_id] = count
            if term in arrays:  # a new doc goes after the term's others: append it when next read
                fresh.setdefault(term, []).append(doc_id)
                self._weights.pop(term, None)

    def delete(self, doc_id: str) -> bool:
        tf = self._docs.pop(doc_id, None)
        if tf is None:
            return False
        self._total_len -= self._lengths.pop(doc_id)
        for term in tf:
            self._arrays.pop(term, None)
            self._fresh.pop(term, None)
            self._weights.pop(term, None)
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]
        return True

    def stats(self, terms: Iterable[str]) -> Bm25Stats:
        """This namespace's statistics for the query ``terms``."""
        df = {t: len(self._postings[t]) for t in terms if t in self._postings}
        return Bm25Stats(len(self._docs), self._total_len, df)

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The term's posting as arrays in the posting's order. Documents added since they were
        built are appended (a delete drops them instead), so a read after an add costs the new
        documents, not the whole posting: a conversation's per-tick cost does not grow with its
        history."""
        arrays = self._arrays.get(term)
        fresh = self._fresh.pop(term, None)
        if arrays is not None and not fresh:
            return arrays
        posting = self._postings.get(term)
        if not posting or self._key is None:
            return None
        if arrays is not None and fresh:
            (labels, tf, lengths), (more_labels, more_tf, more_lengths) = arrays, self._arrays_of(posting, fresh)
            arrays = (
                np.concatenate((labels, more_labels)),
                np.concatenate((tf, more_tf)),
                np.concatenate((lengths, more_lengths)),
            )
        else:
            arrays = self._arrays_of(posting, list(posting))
        self._arrays[term] = arrays
        return arrays

    def _arrays_of(self, posting: dict[str, int], docs: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        assert self._key is not None
        key, lengths, n = self._key, self._lengths, len(docs)
        self.rebuilt += n
        return (
            np.fromiter((key(d) for d in docs), dtype=np.int64, count=n),
            np.fromiter((posting[d] for d in docs), dtype=np.float64, count=n),
            np.fromiter((lengths[d] for d in docs), dtype=np.float64, count=n),
        )

    def postings(
        self, terms: list[str], stats: Bm25Stats | None, idf: list[float] | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Per query term with a posting: its labels, their BM25 contributions divided by the
        term's idf (cached per avgdl), and that idf, under ``stats`` (default: this namespace's);
        ``idf``: the terms' idf under ``stats``, when the caller has them already."""
        if self._key is None:
            raise ValueError("label scores need a LexicalIndex made with a key")
        stats = stats or self.stats(terms)
        avgdl = (stats.total_len / stats.docs if stats.docs else 1.0) or 1.0
        found = [(n, posting) for n, term in enumerate(terms) if (posting := self._postings.get(term))]
        if sum(len(posting) for _, posting in found) <= FUSED_PER_TERM * len(found):
            return self._fused(terms, found, stats, avgdl, idf)
        out: list[tuple[np.ndarray, np.ndarray, float]] = []
        for n, term in enumerate(terms):
            arrays = self._posting(term)
            if arrays is None:
                continue
            labs, tf, lengths = arrays
            cached = self._weights.get(term)
            if cached is None or cached[0] != avgdl:  # (avgdl changes with the statistics used)
                cached = (avgdl, (K1 + 1.0) * tf / (tf + K1 * (1.0 - B + B / avgdl * lengths)))
                self._weights[term] = cached
            out.append((labs, cached[1], idf[n] if idf else bm25_idf(stats.docs, stats.df.get(term, len(labs)))))
        return out

    def _fused(
        self,
        terms: list[str],
        found: list[tuple[int, dict[str, int]]],
        stats: Bm25Stats,
        avgdl: float,
        idf: list[float] | None,
    ) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """:meth:`postings` of a few documents as one entry with the idf applied (idf 1.0), in
        plain Python: the same floats, operation for operation, in the same order (term by term,
        each posting in its order), so the kernel's sums are bit for bit the same."""
        if not found:
            return []
        key, lengths = self._key, self._lengths
        assert key is not None
        k1p, norm, flat = K1 + 1.0, B / avgdl, 1.0 - B
        labels: list[int] = []
        weights: list[float] = []
        for n, posting in found:
            w = idf[n] if idf else bm25_idf(stats.docs, stats.df.get(terms[n], len(posting)))
            for doc, tf in posting.items():
                labels.append(key(doc))
                weights.append(w * (k1p * tf / (tf + K1 * (flat + norm * lengths[doc]))))
        return [(np.array(labels, dtype=np.int64), np.array(weights, dtype=np.float64), 1.0)]

    # -- persistence ------------------------------------------------------------------------

    def save(self, directory: str) -> None:
        """Write ``lexical.json`` (the forward index) atomically: temp file, fsync, os.replace.
        Durable when it returns."""
        Path(directory).mkdir(parents=True, exist_ok=True)
        atomic_write_json(Path(directory) / _FILE, {"version": 2, "docs": self._docs})

    @classmethod
    def load(cls, directory: str) -> LexicalIndex:
        data = read_json(Path(directory) / _FILE)
        index = cls()
        for doc_id, tf in data["docs"].items():
            index._put(doc_id, {str(t): int(c) for t, c in tf.items()})
        return index
