"""`LexicalIndex`: incremental BM25 over one namespace's texts.

Texts are tokenised by :func:`memray.text.tokenize` (lowercase, Unicode words, punctuation splits
words, CJK as character unigrams + bigrams). A query is plain text tokenised the same way: there
is no query syntax, so quotes, ``?``, ``-`` and the like are just separators, and a query with no
tokens returns nothing (never an error).

Scoring is Okapi BM25 with ``k1 = 1.2``, ``b = 0.75`` and the non-negative Lucene idf
``log(1 + (N - df + 0.5) / (df + 0.5))``. Each distinct query term counts once. Raw BM25 is
unbounded; :func:`memray.index.fusion.lexical_score` maps it into [0, 1].

State: a forward index ``doc -> {term: tf}`` (what an upsert or delete must undo), postings
``term -> {doc: tf}``, and the running total of document lengths (for ``avgdl``). Persistence
writes the forward index only (JSON); postings are rebuilt on load.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from memray.index.base import atomic_write_json, read_json
from memray.text import tokenize

__all__ = ["LexicalIndex", "K1", "B"]

K1 = 1.2
B = 0.75
_FILE = "lexical.json"


class LexicalIndex:
    """BM25 over the documents of one namespace; doc ids are strings."""

    def __init__(self) -> None:
        self._docs: dict[str, dict[str, int]] = {}
        self._lengths: dict[str, int] = {}
        self._postings: dict[str, dict[str, int]] = {}
        self._total_len = 0

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
        self._put(doc_id, dict(Counter(tokenize(text))))

    def add_terms(self, doc_id: str, tf: dict[str, int]) -> None:
        """Index already-counted terms (as :meth:`terms` returns them) under ``doc_id``."""
        self._put(doc_id, dict(tf))

    def _put(self, doc_id: str, tf: dict[str, int]) -> None:
        self.delete(doc_id)
        self._docs[doc_id] = tf
        length = sum(tf.values())
        self._lengths[doc_id] = length
        self._total_len += length
        for term, count in tf.items():
            self._postings.setdefault(term, {})[doc_id] = count

    def delete(self, doc_id: str) -> bool:
        tf = self._docs.pop(doc_id, None)
        if tf is None:
            return False
        self._total_len -= self._lengths.pop(doc_id)
        for term in tf:
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]
        return True

    def search(self, text: str, k: int) -> list[tuple[str, float]]:
        """The ``k`` best (doc_id, bm25) for ``text``, best first (ties: doc_id ascending).
        Documents sharing no term with the query are not returned."""
        if k <= 0 or not self._docs:
            return []
        n = len(self._docs)
        avgdl = self.avgdl or 1.0
        scores: dict[str, float] = {}
        for term in set(tokenize(text)):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1.0 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for doc_id, tf in posting.items():
                norm = tf + K1 * (1.0 - B + B * self._lengths[doc_id] / avgdl)
                scores[doc_id] = scores.get(doc_id, 0.0) + idf * tf * (K1 + 1.0) / norm
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return ranked[:k]

    # -- persistence ------------------------------------------------------------------------

    def save(self, directory: str) -> None:
        """Write ``lexical.json`` (the forward index) atomically: temp file, fsync, os.replace.
        Durable when it returns."""
        Path(directory).mkdir(parents=True, exist_ok=True)
        atomic_write_json(Path(directory) / _FILE, {"version": 1, "docs": self._docs})

    @classmethod
    def load(cls, directory: str) -> LexicalIndex:
        data = read_json(Path(directory) / _FILE)
        index = cls()
        for doc_id, tf in data["docs"].items():
            index._put(doc_id, {str(t): int(c) for t, c in tf.items()})
        return index
