"""`EmbeddingCache` (LRU + TTL) and `CachedEmbedder`, which embeds only what the cache misses.

Keys are the 128-bit BLAKE2b digest of the length-prefixed ``(model_id, text)`` pair: a
cryptographic hash, so two different texts never share a vector in practice (a 32-bit hash
collides after ~77k texts), and the same text under two models never does either.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from memray.embedding.base import Embedder
from memray.errors import ModelMismatchError, ValidationError

__all__ = ["EmbeddingCache", "CachedEmbedder", "CacheStats", "cache_key"]

Vector = npt.NDArray[np.float32]


def cache_key(model_id: str, text: str) -> bytes:
    """BLAKE2b-128 of ``len(model_id) | model_id | text`` (UTF-8): collision-free in practice."""
    model = model_id.encode("utf-8")
    h = hashlib.blake2b(digest_size=16, person=b"memray-embcache")
    h.update(len(model).to_bytes(4, "little"))
    h.update(model)
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.digest()


class CacheStats(NamedTuple):
    hits: int
    misses: int
    size: int


class EmbeddingCache:
    """A thread-safe LRU of vectors with a time-to-live, bounded to ``max_entries``.

    ``clock`` returns seconds (default ``time.monotonic``); tests pass a fake one. Entries are
    in-memory only: nothing is persisted, so the cache holds no durable copy of any text.
    """

    def __init__(self, max_entries: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries <= 0:
            raise ValidationError(
                "max_entries",
                max_entries,
                "must be > 0",
                "use 0 cache_size in EmbedderConfig to disable the cache instead",
            )
        if ttl_s <= 0:
            raise ValidationError("ttl_s", ttl_s, "must be > 0")
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, Vector]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def get_many(self, keys: list[bytes]) -> list[Vector | None]:
        """The cached vector of each key, or ``None`` for a miss or an expired entry."""
        now = self._clock()
        out: list[Vector | None] = []
        with self._lock:
            for key in keys:
                entry = self._entries.get(key)
                if entry is None or entry[0] <= now:
                    if entry is not None:
                        del self._entries[key]
                    self._misses += 1
                    out.append(None)
                else:
                    self._entries.move_to_end(key)
                    self._hits += 1
                    out.append(entry[1])
        return out

    def put_many(self, keys: list[bytes], vectors: Vector) -> None:
        """Store one row of ``vectors`` per key (rows are copied and made read-only)."""
        expires = self._clock() + self.ttl_s
        rows = np.array(vectors, dtype=np.float32, copy=True)
        rows.setflags(write=False)
        with self._lock:
            for key, row in zip(keys, rows):
                self._entries[key] = (expires, row)
                self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def discard(self, keys: list[bytes]) -> int:
        """Drop these keys; returns how many were present."""
        with self._lock:
            return sum(self._entries.pop(key, None) is not None for key in keys)

    def clear(self) -> int:
        """Drop everything (e.g. on ``delete_user``); returns how many entries were dropped."""
        with self._lock:
            count = len(self._entries)
            self._entries.clear()
            return count

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._entries))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


class CachedEmbedder:
    """Wraps an embedder: cached texts come from the cache, the misses (each distinct text once)
    are embedded in one call to the inner embedder, and rows come back in input order.

    Thread-safe as far as the inner embedder is. Two threads missing the same text at the same
    moment may both embed it; the result is the same vector.
    """

    def __init__(self, embedder: Embedder, cache: EmbeddingCache) -> None:
        self.embedder = embedder
        self.cache = cache

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def recomputable(self) -> bool:
        return bool(getattr(self.embedder, "recomputable", False))

    def embed(self, texts: list[str]) -> Vector:
        """Embed ``texts`` (see :class:`memray.embedding.base.Embedder`)."""
        model_id, dim = self.model_id, self.dim
        keys = [cache_key(model_id, text) for text in texts]
        found = self.cache.get_many(keys)
        out = np.empty((len(texts), dim), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        for i, (key, vec) in enumerate(zip(keys, found)):
            if vec is None:
                missing.setdefault(key, []).append(i)
            else:
                out[i] = vec
        if missing:
            firsts = [rows[0] for rows in missing.values()]
            fresh = self.embedder.embed([texts[i] for i in firsts])
            if fresh.shape != (len(firsts), dim):
                raise ModelMismatchError(
                    f"embedder {model_id!r} returned shape {fresh.shape} for {len(firsts)} texts, "
                    f"expected ({len(firsts)}, {dim}); check the embedder's dim"
                )
            self.cache.put_many(list(missing), fresh)
            for row, rows in zip(fresh, missing.values()):
                out[rows] = row
        return out
