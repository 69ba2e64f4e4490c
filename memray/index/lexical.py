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
namespace passes its label map) keeps, per term read, the posting's (label, tf, document length)
triples in one flat ``array('d')``, taken on first use, appended to by later adds and dropped
when a document holding the term is replaced or deleted. Small postings go to the kernel as
those entries, and it weighs every small posting of a batch of searches in one numpy expression
(:func:`weigh`); large ones as arrays with their BM25 weights cached per average length. On a
1,000-message namespace the arrays took the lexical part of a hybrid search from ~1.1 ms to
~0.05 ms (``benchmarks/search_micro.py``).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from memray.index.base import atomic_write_json, read_json
from memray.text import term_counts

__all__ = [
    "LexicalIndex",
    "Bm25Stats",
    "Postings",
    "RawPostings",
    "K1",
    "B",
    "FUSED_PER_TERM",
    "CHANGED_PER_TERM",
    "bm25_idf",
    "saturation",
    "weigh",
]

K1 = 0.9
B = 0.4
_FILE = "lexical.json"
#: :meth:`LexicalIndex.postings` hands the kernel a query's postings in one namespace as the
#: cached entries (weighed by the kernel with its batch's) while they hold at most this many
#: entries per query term that has one, or :data:`CHANGED_PER_TERM` when one of the postings
#: changed since it was last read; above, as per-term arrays with their weights cached per
#: average length. Read again unchanged, the arrays win from 40-80 entries a term
#: (``python -m benchmarks.lexical_micro --bounds 40,80,160,320,500,1000``, 5 terms, two runs:
#: 11.7-12.5 against 13.6-20.1 us a read at 40 entries, 26.1-29.7 against 15.1-18.7 at 80).
FUSED_PER_TERM = 40
#: The bound of a read that finds a posting changed, as every read in a simulation does (each
#: conversation gains documents before its next search): the arrays are then appended to and
#: reweighted, and the cached entries win up to 320-500 entries a term (the same runs, 2
#: documents added before each read: 82-99 against 111-127 us at 320, 137-161 against 126 at
#: 500, 260-283 against 140-156 at 1,000).
CHANGED_PER_TERM = 320


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


def saturation(tf: np.ndarray, lengths: np.ndarray, norm: Any) -> np.ndarray:
    """BM25 over idf of posting entries (term frequencies ``tf`` in documents of ``lengths``),
    ``norm`` being ``B / avgdl`` (a scalar, or one per entry)."""
    out: np.ndarray = (K1 + 1.0) * tf / (tf + K1 * ((1.0 - B) + norm * lengths))
    return out


class RawPostings(NamedTuple):
    """A query's small postings in one namespace, term by term, each posting in its order: the
    index's own cached entries, not copies, so read them before the index changes
    (:meth:`LexicalIndex.postings`; a shard runs one call at a time)."""

    terms: list[array[float]]  # per term: (label, tf, document length) of each entry, end to end
    idf: list[float]  # of each term
    norm: float  # B / avgdl under the statistics searched

    def labels(self) -> np.ndarray:
        return _entries(self.terms)[:, 0].astype(np.int64)


def _entries(terms: Iterable[array[float]]) -> np.ndarray:
    """Posting entries end to end, one (label, tf, length) row each."""
    flat = array("d")
    for entries in terms:
        flat += entries
    return np.frombuffer(flat, dtype=np.float64).reshape(-1, 3)


class Postings(NamedTuple):
    """What the scoring kernel reads of one namespace for one query: small postings as the
    cached entries (``raw``), or large ones as per-term arrays ``(labels, BM25 / idf, idf)``."""

    raw: RawPostings | None
    arrays: list[tuple[np.ndarray, np.ndarray, float]]


NO_POSTINGS = Postings(None, [])
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]  # a posting's labels, tf and document lengths


def weigh(parts: Sequence[RawPostings]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The labels and BM25 weights (idf applied) of every entry of ``parts``, end to end, and the
    entries of each part: a batch of searches weighed in one expression, each entry the very
    float :func:`saturation` times its idf gives it alone."""
    counts = [len(entries) // 3 for part in parts for entries in part.terms]  # of each term
    sizes = [sum(len(entries) for entries in part.terms) // 3 for part in parts]  # of each part
    rows = _entries(entries for part in parts for entries in part.terms)
    idf = np.repeat(np.array([w for part in parts for w in part.idf]), counts)
    norm = np.repeat(np.array([part.norm for part in parts]), sizes)
    weights: np.ndarray = idf * saturation(rows[:, 1], rows[:, 2], norm)
    return rows[:, 0].astype(np.int64), weights, sizes


class LexicalIndex:
    """BM25 over the documents of one namespace; doc ids are strings."""

    def __init__(self, key: Callable[[str], int] | None = None) -> None:
        self._docs: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._postings: dict[str, dict[str, int]] = {}
        self._total_len = 0
        self._key = key
        # per term read: its posting's (label, tf, document length) triples, in the posting's order
        self._entries: dict[str, array[float]] = {}
        self._grown: set[str] = set()  # terms whose entries were built or appended to since their last read
        self.cached_entries = 0  # posting entries cached so far: at a term's first read, and by later adds
        self._arrays: dict[str, Arrays] = {}  # a large posting's entries as arrays
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
        taken, label = self._entries, None
        for term, count in tf.items():
            self._postings.setdefault(term, {})[doc_id] = count
            entries = taken.get(term)
            if entries is not None:  # a term read before: the new doc goes after its others
                if label is None:
                    assert self._key is not None  # (entries are cached only with a key)
                    label = self._key(doc_id)
                entries.extend((label, count, length))
                self.cached_entries += 1
                self._grown.add(term)
                self._weights.pop(term, None)

    def delete(self, doc_id: str) -> bool:
        tf = self._docs.pop(doc_id, None)
        if tf is None:
            return False
        self._total_len -= self._lengths.pop(doc_id)
        for term in tf:
            self._entries.pop(term, None)
            self._arrays.pop(term, None)
            self._grown.discard(term)
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

    def _posting(self, term: str) -> array[float] | None:
        """The term's posting as (label, tf, document length) triples end to end, in the
        posting's order (None: no posting), cached at its first read. An add appends its entry
        to the cached ones (a delete drops them instead), so the entries cost each document once,
        not a read: a conversation's per-tick cost does not grow with its history."""
        entries = self._entries.get(term)
        if entries is not None:
            return entries
        posting = self._postings.get(term)
        if not posting or self._key is None:
            return None
        self.cached_entries += len(posting)
        self._grown.add(term)
        rows = zip(map(self._key, posting), posting.values(), map(self._lengths.__getitem__, posting))
        entries = self._entries[term] = array("d", chain.from_iterable(rows))
        return entries

    def _arrays_of(self, term: str, entries: array[float]) -> Arrays:
        """A large posting's ``entries`` as arrays, cached; what was appended to them since, appended."""
        arrays = self._arrays.get(term)
        start = 0 if arrays is None else len(arrays[0])
        if arrays is not None and 3 * start == len(entries):
            return arrays
        rows = np.frombuffer(entries[3 * start :], dtype=np.float64).reshape(-1, 3)  # (the slice is a copy)
        more = (rows[:, 0].astype(np.int64), rows[:, 1].copy(), rows[:, 2].copy())
        if arrays is not None:
            more = (
                np.concatenate((arrays[0], more[0])),
                np.concatenate((arrays[1], more[1])),
                np.concatenate((arrays[2], more[2])),
            )
        self._arrays[term] = more
        return more

    def postings(self, terms: list[str], stats: Bm25Stats | None, idf: list[float] | None = None) -> Postings:
        """The postings of the query ``terms`` that have one, for the scoring kernel, under
        ``stats`` (default: this namespace's); ``idf``: the terms' idf under ``stats``, when the
        caller has them already. Up to :data:`FUSED_PER_TERM` entries a term (:data:`CHANGED_PER_TERM`
        when a posting changed since it was last read), as the cached entries (:class:`RawPostings`:
        the kernel weighs a batch's in one expression); above, as per-term arrays with their BM25 /
        idf weights, cached per average length. Either form gives each entry the same float, and
        a namespace's entries are summed term by term in both."""
        if self._key is None:
            raise ValueError("label scores need a LexicalIndex made with a key")
        found = [(n, entries) for n, term in enumerate(terms) if (entries := self._posting(term)) is not None]
        if not found:
            return NO_POSTINGS
        grown, changed = self._grown, False  # (entries built by this read, or appended by an add since the last)
        if grown:
            changed = any([terms[n] in grown for n, _ in found])
            grown.difference_update(terms)
        bound = CHANGED_PER_TERM if changed else FUSED_PER_TERM
        stats = stats or self.stats(terms)
        avgdl = (stats.total_len / stats.docs if stats.docs else 1.0) or 1.0
        idfs = [idf[n] if idf else bm25_idf(stats.docs, stats.df.get(terms[n], len(e) // 3)) for n, e in found]
        if sum(len(entries) for _, entries in found) <= 3 * bound * len(found):
            return Postings(RawPostings([entries for _, entries in found], idfs, B / avgdl), [])
        out: list[tuple[np.ndarray, np.ndarray, float]] = []
        for (n, entries), term_idf in zip(found, idfs):
            term = terms[n]
            labs, tf, lengths = self._arrays_of(term, entries)
            cached = self._weights.get(term)
            if cached is None or cached[0] != avgdl:  # (avgdl changes with the statistics used)
                cached = (avgdl, saturation(tf, lengths, B / avgdl))
                self._weights[term] = cached
            out.append((labs, cached[1], term_idf))
        return Postings(None, out)

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
