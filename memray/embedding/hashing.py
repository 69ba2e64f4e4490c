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
64 tokens at dim 256 in batches of 32+ on one core). One text alone (a query) skips the
batch's numpy passes: the same sums in the same order in Python floats, the same bits, ~40-55 µs
instead of ~90 µs here (``benchmarks/read_path_micro.py``, ``embed_query``). The table is
bounded: when it holds ``max_vocab`` tokens it is cleared and refilled, which changes nothing in
the output.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import Counter
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
_M64, _M1, _M2, _M3 = (1 << 64) - 1, int(_MIX1), int(_MIX2), int(_MIX3)
_MAX_ROWS = 1 << 20
_HAS_CJK = re.compile("[" + CJK_RANGES + "]")


def _bigram_key(a: int, b: int) -> int:
    """The 40-bit key of the bigram of tokens hashed ``a`` then ``b``: the batch path's uint64
    mixing (``HashEmbedder._add_bigrams``) in Python integers."""
    x = (a * _M1 + b) & _M64
    x ^= x >> 30
    x = (x * _M2) & _M64
    x ^= x >> 27
    x = (x * _M3) & _M64
    x ^= x >> 31
    return x >> 24


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
        #: Per id of a token embedded alone (:meth:`HashEmbedder._embed_one`, queries): its hash
        #: and its features as Python (bucket, weight) pairs, the weights float32 as stored.
        self.plain: dict[int, tuple[int, list[tuple[int, float]]]] = {}

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

    def plain_of(self, tid: int) -> tuple[int, list[tuple[int, float]]]:
        found = self.plain.get(tid)
        if found is None:
            start, end = int(self.starts[tid]), int(self.starts[tid] + self.lengths[tid])
            feats = list(zip(self.buckets[start:end].tolist(), self.weights[start:end].tolist()))
            found = self.plain[tid] = (int(self.hashes[tid]), feats)
        return found

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
        if n == 1:
            return self._embed_one(texts[0])
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

    def _embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """One text (a query) without the batch's numpy passes, to the same bits: the same sums
        in the same order (each bucket's token features by ascending token id, its bigrams by
        ascending key, then the two sums added, as the batch's two ``bincount`` calls do), the
        same ``np.log`` and the same normalisation (``benchmarks/read_path_micro.py``: ~3x faster
        for a short query; ``tests/embedding/test_hash_embedder.py`` holds the bits equal)."""
        with self._lock:
            ids = self._token_ids([text])[0].tolist()
            plain = {tid: self._table.plain_of(tid) for tid in ids}
            counts = Counter(ids)
            tokens = sorted(counts)
            pairs = Counter(_bigram_key(plain[a][0], plain[b][0]) for a, b in zip(ids, ids[1:]))
            keys = sorted(pairs)
            tf = (1.0 + np.log(np.array([counts[t] for t in tokens] + [pairs[k] for k in keys], np.int64))).tolist()
            summed: dict[int, float] = {}
            get = summed.get
            for tid, weight in zip(tokens, tf):
                if weight == 1.0:  # w * 1.0 is w: the usual tf of a query's token
                    for bucket, w in plain[tid][1]:
                        summed[bucket] = get(bucket, 0.0) + w
                else:
                    for bucket, w in plain[tid][1]:
                        summed[bucket] = get(bucket, 0.0) + w * weight
            bigrams: dict[int, float] = {}
            for key, weight in zip(keys, tf[len(tokens) :]):
                bucket = (key >> 1) % self.dim
                bigrams[bucket] = bigrams.get(bucket, 0.0) + BIGRAM_WEIGHT * weight * (1.0 - 2.0 * (key & 1))
        out = np.zeros((1, self.dim), dtype=np.float64)
        out[0, list(summed)] = list(summed.values())
        if bigrams:
            out[0, list(bigrams)] += list(bigrams.values())
        return self._normalise(out, [text])

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
