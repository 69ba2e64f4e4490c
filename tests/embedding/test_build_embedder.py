from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memray.config import EmbedderConfig
from memray.embedding import CachedEmbedder, HashEmbedder, build_embedder
from memray.embedding.openai import OpenAIEmbedder
from memray.embedding.static import StaticEmbedder
from tests.support.openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]


def test_none_disables_embedding() -> None:
    assert build_embedder(EmbedderConfig(kind="none")) is None


def test_default_is_the_static_embedder_uncached() -> None:
    emb = build_embedder(EmbedderConfig())
    assert isinstance(emb, StaticEmbedder)  # recomputable: embedding a new text beats a cache look-up
    assert emb.model_id == "static:minilm-static-v1:384" and emb.dim == 384
    assert emb.memo  # its own memo of the last texts' vectors instead ...
    plain = build_embedder(EmbedderConfig(cache_size=0))  # ... which a cache size of 0 turns off, as jobs do
    assert isinstance(plain, StaticEmbedder) and not plain.memo


def test_hash_is_not_cached_either() -> None:
    emb = build_embedder(EmbedderConfig(kind="hash", dim=64))
    assert isinstance(emb, HashEmbedder) and emb.dim == 64


def test_an_api_embedder_is_cached(openai_server: FakeOpenAIServer) -> None:
    emb = build_embedder(EmbedderConfig(kind="openai", model="fake-embed", dim=32, base_url=openai_server.url))
    assert isinstance(emb, CachedEmbedder) and isinstance(emb.embedder, OpenAIEmbedder)
    assert emb.cache.max_entries == 100_000
    bare = build_embedder(
        EmbedderConfig(kind="openai", model="fake-embed", dim=32, base_url=openai_server.url, cache_size=0)
    )
    assert isinstance(bare, OpenAIEmbedder)


def test_openai_from_config_uses_key_from_env(openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    openai_server.api_key = "sk-test"
    monkeypatch.setenv("MY_KEY", "sk-test")
    config = EmbedderConfig(
        kind="openai",
        model="fake-embed",
        dim=32,
        send_dimensions=True,
        base_url=openai_server.url,
        api_key_env="MY_KEY",
        batch_size=2,
        cache_size=10,
    )
    emb = build_embedder(config)
    assert isinstance(emb, CachedEmbedder) and isinstance(emb.embedder, OpenAIEmbedder)
    out = emb.embed(["a", "b", "c", "a"])
    assert out.shape == (4, 32) and emb.model_id == "openai:fake-embed:32"
    np.testing.assert_array_equal(out[0], out[3])
    assert openai_server.embedding_batch_sizes == [2, 1]  # duplicate embedded once
    assert {r.status for r in openai_server.requests} == {200}


def test_embedding_package_imports_without_ray_or_openai() -> None:
    code = (
        "import sys, memray.embedding, memray.text;"
        "print(sorted(m for m in ('ray', 'openai', 'sentence_transformers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.strip()
    assert out == "[]"
