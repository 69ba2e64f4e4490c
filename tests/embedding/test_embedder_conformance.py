"""The conformance suite every embedder passes: static (the default), MiniLM in numpy, hash (two
dims), OpenAI against the fake server over real HTTP, and the cached wrapper of each."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from memray.embedding import CachedEmbedder, Embedder, EmbeddingCache, HashEmbedder
from memray.embedding.minilm import MiniLMEmbedder
from memray.embedding.openai import OpenAIEmbedder
from memray.embedding.static import StaticEmbedder
from tests.support.openai_server import FakeOpenAIServer

BATCH = 7  # the OpenAI embedder's batch size here, small so splitting is exercised


@dataclass
class Case:
    embedder: Embedder
    server: FakeOpenAIServer | None = None


def _openai(server: FakeOpenAIServer) -> OpenAIEmbedder:
    server.vector_scale = 3.0  # the server's vectors are not unit length: the embedder normalises
    return OpenAIEmbedder(
        "fake-embed", dim=48, base_url=server.url, send_dimensions=True, batch_size=BATCH, max_retries=0, timeout_s=10
    )


def _cached(inner: Embedder) -> CachedEmbedder:
    return CachedEmbedder(inner, EmbeddingCache(max_entries=1000, ttl_s=60))


KINDS = ["static", "minilm", "hash-64", "hash-256", "openai", "cached-hash", "cached-openai"]


@pytest.fixture(params=KINDS)
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    kind: str = request.param
    if "openai" in kind:
        server: FakeOpenAIServer = request.getfixturevalue("openai_server")
        inner: Embedder = _openai(server)
        yield Case(_cached(inner) if kind.startswith("cached") else inner, server)
    elif kind == "static":
        yield Case(StaticEmbedder())
    elif kind == "minilm":
        yield Case(MiniLMEmbedder(batch_size=BATCH))
    elif kind == "cached-hash":
        yield Case(_cached(HashEmbedder(128)))
    else:
        yield Case(HashEmbedder(int(kind.split("-")[1])))


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Remind me to buy milk tomorrow",
    "我明天要去北京出差",
    "東京の天気は雨です",
    "안녕하세요 세계",
    "party time 🎉🎉🥳",
    "don't stop — it's fine?! \"quoted\" -minus",
    "",
    "   ",
    "a" * 3000,
]


def test_shape_dtype_and_unit_norm(case: Case) -> None:
    out = case.embedder.embed(TEXTS)
    assert out.shape == (len(TEXTS), case.embedder.dim)
    assert out.dtype == np.float32
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_empty_list_gives_zero_rows(case: Case) -> None:
    out = case.embedder.embed([])
    assert out.shape == (0, case.embedder.dim)
    assert out.dtype == np.float32


def test_deterministic(case: Case) -> None:
    np.testing.assert_array_equal(case.embedder.embed(TEXTS), case.embedder.embed(TEXTS))


def test_order_kept_and_rows_independent_of_batch(case: Case) -> None:
    together = case.embedder.embed(TEXTS)
    one_by_one = np.stack([case.embedder.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, one_by_one, atol=1e-6)
    np.testing.assert_allclose(case.embedder.embed(TEXTS[::-1]), together[::-1], atol=1e-6)


def test_distinct_texts_get_distinct_vectors(case: Case) -> None:
    out = case.embedder.embed(TEXTS[:7])
    sims = out @ out.T
    off_diagonal = sims[~np.eye(len(out), dtype=bool)]
    assert off_diagonal.max() < 0.9


def test_model_id_names_dimension(case: Case) -> None:
    assert case.embedder.model_id.endswith(str(case.embedder.dim))


def test_long_batch_split_and_reassembled(case: Case) -> None:
    texts = [f"message number {i} about topic {i % 13}" for i in range(3 * BATCH + 2)]
    out = case.embedder.embed(texts)
    assert out.shape == (len(texts), case.embedder.dim)
    np.testing.assert_allclose(out[5], case.embedder.embed([texts[5]])[0], atol=1e-6)
    if case.server is not None:
        sizes = case.server.embedding_batch_sizes
        assert max(sizes) <= BATCH
        assert sum(sizes) >= len(texts)
