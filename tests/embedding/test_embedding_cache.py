from __future__ import annotations

import threading

import numpy as np
import numpy.typing as npt
import pytest

from memray.embedding import CachedEmbedder, EmbeddingCache, HashEmbedder, cache_key
from memray.errors import ModelMismatchError, ValidationError


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingEmbedder:
    """A real HashEmbedder that records what it was asked to embed (a fake, not a mock)."""

    def __init__(self, dim: int = 32, wrong_rows: bool = False) -> None:
        self.inner = HashEmbedder(dim)
        self.model_id = self.inner.model_id
        self.dim = dim
        self.calls: list[list[str]] = []
        self.wrong_rows = wrong_rows
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            self.calls.append(list(texts))
        out = self.inner.embed(texts)
        return out[:-1] if self.wrong_rows else out


def _vecs(n: int, dim: int = 4) -> npt.NDArray[np.float32]:
    return np.arange(n * dim, dtype=np.float32).reshape(n, dim)


def test_cache_key_is_128_bit_and_structural() -> None:
    assert len(cache_key("m", "text")) == 16
    assert cache_key("m", "t") == cache_key("m", "t")
    assert cache_key("m1", "t") != cache_key("m2", "t")
    assert cache_key("a", "bc") != cache_key("ab", "c")  # length-prefixed, no ambiguity


def test_lru_evicts_least_recently_used() -> None:
    cache = EmbeddingCache(max_entries=2, ttl_s=60, clock=FakeClock())
    a, b, c = b"a" * 16, b"b" * 16, b"c" * 16
    cache.put_many([a, b], _vecs(2))
    assert cache.get_many([a])[0] is not None  # a is now most recent
    cache.put_many([c], _vecs(1))
    found = cache.get_many([a, b, c])
    assert [v is not None for v in found] == [True, False, True]
    assert len(cache) == 2


def test_ttl_expires_entries() -> None:
    clock = FakeClock()
    cache = EmbeddingCache(max_entries=10, ttl_s=5, clock=clock)
    key = b"k" * 16
    cache.put_many([key], _vecs(1))
    clock.now += 4.9
    assert cache.get_many([key])[0] is not None
    clock.now += 0.2
    assert cache.get_many([key])[0] is None
    assert len(cache) == 0
    assert cache.stats().hits == 1 and cache.stats().misses == 1


def test_cached_rows_are_read_only_copies() -> None:
    cache = EmbeddingCache(10, 60)
    source = _vecs(1)
    cache.put_many([b"x" * 16], source)
    source[0, 0] = 99.0
    row = cache.get_many([b"x" * 16])[0]
    assert row is not None and row[0] == 0.0
    with pytest.raises(ValueError):
        row[0] = 1.0


def test_discard_and_clear() -> None:
    cache = EmbeddingCache(10, 60)
    keys = [bytes([i]) * 16 for i in range(3)]
    cache.put_many(keys, _vecs(3))
    assert cache.discard([keys[0], b"?" * 16]) == 1
    assert cache.clear() == 2
    assert cache.get_many(keys) == [None, None, None]


def test_bad_sizes_are_validation_errors() -> None:
    with pytest.raises(ValidationError, match="max_entries"):
        EmbeddingCache(0, 60)
    with pytest.raises(ValidationError, match="ttl_s"):
        EmbeddingCache(10, 0)


def test_cached_embedder_embeds_only_misses_once_in_order() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, EmbeddingCache(100, 60))
    first = cached.embed(["a", "b", "a"])
    assert inner.calls == [["a", "b"]]  # the duplicate is embedded once
    out = cached.embed(["c", "b", "a", "c", "d"])
    assert inner.calls[-1] == ["c", "d"]
    expected = HashEmbedder(32).embed(["c", "b", "a", "c", "d"])
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(first[0], first[2])
    assert cached.embed(["a", "d"]).shape == (2, 32)
    assert len(inner.calls) == 2  # all hits: no call
    assert cached.model_id == inner.model_id and cached.dim == 32


def test_cached_embedder_empty_batch_makes_no_call() -> None:
    inner = CountingEmbedder()
    assert CachedEmbedder(inner, EmbeddingCache(10, 60)).embed([]).shape == (0, 32)
    assert inner.calls == []


def test_expired_entry_is_re_embedded() -> None:
    clock = FakeClock()
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, EmbeddingCache(10, 1.0, clock=clock))
    cached.embed(["x"])
    clock.now += 2
    cached.embed(["x"])
    assert inner.calls == [["x"], ["x"]]


def test_inner_returning_wrong_rows_is_rejected_and_not_cached() -> None:
    cache = EmbeddingCache(10, 60)
    with pytest.raises(ModelMismatchError, match="shape"):
        CachedEmbedder(CountingEmbedder(wrong_rows=True), cache).embed(["a", "b"])
    assert len(cache) == 0


def test_threads_share_the_cache_safely() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, EmbeddingCache(50, 60))  # small: eviction races too
    texts = [f"text {i}" for i in range(80)]
    expected = HashEmbedder(32).embed(texts)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for start in range(0, 80, 10):
                idx = [(offset + start + j) % 80 for j in range(10)]
                np.testing.assert_array_equal(cached.embed([texts[i] for i in idx]), expected[idx])
        except BaseException as exc:  # collected for the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k * 7,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cached.cache) <= 50
