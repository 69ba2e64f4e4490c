"""`HashEmbedder`: signed feature hashing of tokens, word bigrams and character 3-grams.

No model, no dependency beyond numpy, deterministic across processes and machines (hashes are
keyed BLAKE2b, never Python's salted ``hash()``), and fast enough for the ingest hot path.

Features of a text (tokens from :func:`memray.text.tokenize`):

* each distinct token, weight ``1 + ln(tf)`` (sublinear term frequency), times
  ``STOPWORD_WEIGHT`` for a short list of English function words (no corpus statistics exist
  here, and without it two unrelated sentences sharing "the", "is", "my" look alike);
* the character 3-grams of each Latin-script token of 4+ characters, padded ``<token>``: they
  let ``running``/``runs`` or typos share mass; a token's 3-grams together weigh
  ``NGRAM_WEIGHT`` times the token itself (each ``NGRAM_WEIGHT / sqrt(n)``), times its tf weight;
* each distinct pair of adjacent tokens, weight ``BIGRAM_WEIGHT * (1 + ln(tf))``.

Each feature hashes to a bucket in ``[0, dim)`` and a sign, the signed weights are summed per
bucket and the row is L2-normalised. A text with no features (empty, only punctuation) gets the
one-hot vector of a hash of its raw text, so every row has unit norm.

Speed: the features of a token (its hash, bucket and 3-grams) are computed once and kept in a
per-instance table; a batch is then a handful of vectorised numpy operations over all texts at
once (see ``benchmarks/hash_embedder.py`` for the variants that were measured: ~30k texts/s of
64 tokens at dim 256 in batches of 32+ on one core; a batch of one costs ~0.1 ms, so batch).
The table is
bounded: when it holds ``max_vocab`` tokens it is cleared and refilled, which changes nothing in
the output.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from typing import cast

import numpy as np
import numpy.typing as npt

from memray.errors import ValidationError
from memray.text import CJK_RANGES, tokenize

__all__ = ["HashEmbedder", "NGRAM_WEIGHT", "BIGRAM_WEIGHT", "STOPWORD_WEIGHT", "STOPWORDS"]

NGRAM_WEIGHT = 1.0
BIGRAM_WEIGHT = 0.3
STOPWORD_WEIGHT = 0.25
#: Function words of English that carry no topic; they weigh ``STOPWORD_WEIGHT`` so two unrelated
#: sentences that share only "the", "is" and "my" stay near cosine 0.
STOPWORDS = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her his i"
    " if in into is it its me my no not of on or our she so than that the their them then there"
    " these they this to too us was we were what when where which who will with would you your"
    " s t m d ll re ve".split()
)
_PERSON = b"memray-hash-v1"
_U64 = np.uint64
_MIX1 = _U64(0x9E3779B97F4A7C15)
_MIX2 = _U64(0xBF58476D1CE4E5B9)
_MIX3 = _U64(0x94D049BB133111EB)
_MAX_ROWS = 1 << 20
_HAS_CJK = re.compile("[" + CJK_RANGES + "]")


def _hash64(kind: bytes, text: str) -> int:
    digest = hashlib.blake2b(kind + text.encode("utf-8"), digest_size=8, person=_PERSON).digest()
    return int.from_bytes(digest, "little")


class _FeatureTable:
    """Token → id, and per id: its 64-bit hash and its (bucket, signed weight) features (CSR)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.ids: dict[str, int] = {}
        self.hashes = np.zeros(1024, dtype=np.uint64)
        self.starts = np.zeros(1024, dtype=np.int64)
        self.lengths = np.zeros(1024, dtype=np.int64)
        self.buckets = np.zeros(4096, dtype=np.int64)
        self.weights = np.zeros(4096, dtype=np.float32)
        self.n_features = 0

    def add(self, token: str) -> int:
        tid = len(self.ids)
        h = _hash64(b"t", token)
        unit = STOPWORD_WEIGHT if token in STOPWORDS else 1.0
        feats = [(h >> 1) % self.dim, unit if h & 1 else -unit]
        if len(token) >= 4 and unit == 1.0 and not _HAS_CJK.search(token):
            padded = "<" + token + ">"
            grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            weight = NGRAM_WEIGHT / math.sqrt(len(grams))
            for gram in grams:
                g = _hash64(b"c", gram)
                feats += [(g >> 1) % self.dim, weight if g & 1 else -weight]
        self._store(tid, h, feats)
        self.ids[token] = tid
        return tid

    def _store(self, tid: int, h: int, feats: list[float]) -> None:
        if tid >= len(self.hashes):
            self.hashes = np.resize(self.hashes, 2 * len(self.hashes))
            self.starts = np.resize(self.starts, 2 * len(self.starts))
            self.lengths = np.resize(self.lengths, 2 * len(self.lengths))
        count = len(feats) // 2
        end = self.n_features + count
        while end > len(self.buckets):
            self.buckets = np.resize(self.buckets, 2 * len(self.buckets))
            self.weights = np.resize(self.weights, 2 * len(self.weights))
        self.buckets[self.n_features : end] = feats[0::2]
        self.weights[self.n_features : end] = feats[1::2]
        self.hashes[tid] = h
        self.starts[tid] = self.n_features
        self.lengths[tid] = count
        self.n_features = end


class HashEmbedder:
    """Deterministic feature-hashing embedder. ``model_id`` is ``hash-v1-{dim}``.

    Thread-safe: one lock guards the token table; ``embed`` may be called from many threads.
    ``recomputable``: deterministic and cheap (microseconds per text), so a caller may embed a
    text itself rather than wait for its stored vector.
    """

    recomputable = True

    def __init__(self, dim: int = 256, max_vocab: int = 262_144) -> None:
        if not 8 <= dim <= 65_536:
            raise ValidationError("dim", dim, "must be between 8 and 65536", "use e.g. 256")
        self.dim = dim
        self.model_id = f"hash-v1-{dim}"
        self.max_vocab = max_vocab
        self._table = _FeatureTable(dim)
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[HashEmbedder], tuple[int, int]]:
        # Pickles as its parameters (the token table is a cache; the lock cannot be pickled), so a
        # caller's embedder that wraps one can be sent to the Ray actors.
        return (HashEmbedder, (self.dim, self.max_vocab))

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32 ``[len(texts), dim]``, rows L2-normalised, order kept."""
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        if n > _MAX_ROWS:  # row numbers must fit the 24 bits the bigram keys give them
            return np.concatenate([self.embed(texts[i : i + _MAX_ROWS]) for i in range(0, n, _MAX_ROWS)])
        with self._lock:
            ids, lengths = self._token_ids(texts)
            table = self._table
            rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
            flat = np.zeros(n * self.dim, dtype=np.float64)
            if len(ids):
                self._add_tokens(flat, rows, ids, table)
                self._add_bigrams(flat, rows, ids, table)
        out = flat.reshape(n, self.dim)
        return self._normalise(out, texts)

    def _token_ids(self, texts: list[str]) -> tuple[npt.NDArray[np.int64], list[int]]:
        if len(self._table.ids) > self.max_vocab:
            self._table = _FeatureTable(self.dim)
        table = self._table
        lookup = table.ids.get
        flat: list[int] = []
        lengths: list[int] = []
        for text in texts:
            tokens = tokenize(text)
            lengths.append(len(tokens))
            found: list[int | None] = list(map(lookup, tokens))
            if None in found:
                found = [table.ids[t] if t in table.ids else table.add(t) for t in tokens]
            flat.extend(cast("list[int]", found))
        return np.array(flat, dtype=np.int64), lengths

    def _add_tokens(
        self,
        flat: npt.NDArray[np.float64],
        rows: npt.NDArray[np.int64],
        ids: npt.NDArray[np.int64],
        table: _FeatureTable,
    ) -> None:
        span = np.int64(len(table.hashes))
        keys, counts = np.unique(rows * span + ids, return_counts=True)
        urows, uids = np.divmod(keys, span)
        tf = 1.0 + np.log(counts)
        lens = table.lengths[uids]
        owner = np.repeat(np.arange(len(uids)), lens)
        firsts = np.cumsum(lens) - lens
        fidx = table.starts[uids][owner] + (np.arange(len(owner)) - firsts[owner])
        target = urows[owner] * self.dim + table.buckets[fidx]
        flat += np.bincount(target, table.weights[fidx] * tf[owner], minlength=len(flat))

    def _add_bigrams(
        self,
        flat: npt.NDArray[np.float64],
        rows: npt.NDArray[np.int64],
        ids: npt.NDArray[np.int64],
        table: _FeatureTable,
    ) -> None:
        same = rows[1:] == rows[:-1]
        if not same.any():
            return
        h = table.hashes[ids]
        x = h[:-1][same] * _MIX1 + h[1:][same]
        x ^= x >> _U64(30)
        x *= _MIX2
        x ^= x >> _U64(27)
        x *= _MIX3
        x ^= x >> _U64(31)
        # Key = row in the high 24 bits, 40 bits of the bigram hash below: one sort counts each
        # (row, bigram) pair, and row, bucket and sign come back out of the key itself.
        key = (rows[1:][same].astype(np.uint64) << _U64(40)) | (x >> _U64(24))
        ukeys, counts = np.unique(key, return_counts=True)
        low = ukeys & _U64((1 << 40) - 1)
        target = (ukeys >> _U64(40)).astype(np.int64) * self.dim + ((low >> _U64(1)) % _U64(self.dim)).astype(np.int64)
        signs = 1.0 - 2.0 * (low & _U64(1)).astype(np.float64)
        weights = BIGRAM_WEIGHT * (1.0 + np.log(counts)) * signs
        flat += np.bincount(target, weights, minlength=len(flat))

    def _normalise(self, out: npt.NDArray[np.float64], texts: list[str]) -> npt.NDArray[np.float32]:
        norms = np.sqrt(np.einsum("ij,ij->i", out, out))
        for i in np.flatnonzero(norms == 0.0):
            h = _hash64(b"r", texts[i])
            out[i, (h >> 1) % self.dim] = 1.0 if h & 1 else -1.0
            norms[i] = 1.0
        result: npt.NDArray[np.float32] = (out / norms[:, None]).astype(np.float32)
        return result
