"""OpenAIEmbedder against the fake server, with the real `openai` client over real HTTP."""

from __future__ import annotations

import sys

import numpy as np
import openai
import pytest

from memray.embedding.openai import OpenAIEmbedder
from memray.errors import EmbeddingError, MissingExtraError, ModelMismatchError, ValidationError
from tests.support.openai_server import FakeOpenAIServer


def _embedder(server: FakeOpenAIServer, **kw: object) -> OpenAIEmbedder:
    args: dict[str, object] = {"dim": 64, "base_url": server.url, "max_retries": 2, "timeout_s": 10.0}
    args.update(kw)
    return OpenAIEmbedder("fake-embed", **args)  # type: ignore[arg-type]


def test_429_then_success_is_retried_by_the_client(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail_next(2, status=429)
    out = _embedder(openai_server).embed(["hello", "world"])
    assert out.shape == (2, 64)
    assert [r.status for r in openai_server.requests] == [429, 429, 200]


def test_persistent_500_becomes_embedding_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail_always(500)
    with pytest.raises(EmbeddingError, match="failed after 1 retries") as info:
        _embedder(openai_server, max_retries=1).embed(["hello"])
    assert isinstance(info.value.__cause__, openai.InternalServerError)
    assert openai_server.count("/v1/embeddings") == 2  # first try + one retry
    openai_server.clear_failures()
    assert _embedder(openai_server).embed(["hello"]).shape == (1, 64)


def test_timeout_becomes_embedding_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.hang_next(1, seconds=10)
    with pytest.raises(EmbeddingError) as info:
        _embedder(openai_server, timeout_s=0.3, max_retries=0).embed(["slow"])
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


def test_dimensions_sent_only_when_asked(openai_server: FakeOpenAIServer) -> None:
    _embedder(openai_server, dim=64).embed(["a"])
    assert "dimensions" not in openai_server.last_body("/v1/embeddings")
    out = _embedder(openai_server, dim=16, send_dimensions=True).embed(["a"])
    assert openai_server.last_body("/v1/embeddings")["dimensions"] == 16
    assert out.shape == (1, 16)


def test_wrong_dimension_is_model_mismatch_with_fix(openai_server: FakeOpenAIServer) -> None:
    openai_server.force_dim = 12
    with pytest.raises(ModelMismatchError, match="dim=12") as info:
        _embedder(openai_server, dim=64).embed(["a"])
    assert "re-embed" in str(info.value)


def test_server_rejecting_dimensions_is_an_embedding_error(openai_server: FakeOpenAIServer) -> None:
    openai_server.reject_dimensions = True
    with pytest.raises(EmbeddingError, match="dimensions"):
        _embedder(openai_server, dim=16, send_dimensions=True).embed(["a"])
    assert openai_server.count() == 1  # a 400 is not retried


def test_order_kept_although_server_reverses_data(openai_server: FakeOpenAIServer) -> None:
    emb = _embedder(openai_server, batch_size=3)
    texts = [f"item {i} is {'odd' if i % 2 else 'even'}" for i in range(8)]
    together = emb.embed(texts)
    singles = np.stack([emb.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, singles, atol=1e-6)
    assert openai_server.embedding_batch_sizes[:3] == [3, 3, 2]


def test_empty_text_sent_as_space(openai_server: FakeOpenAIServer) -> None:
    out = _embedder(openai_server).embed(["", "x"])
    assert openai_server.last_body("/v1/embeddings")["input"] == [" ", "x"]
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_placeholder_api_key_and_model_id(openai_server: FakeOpenAIServer) -> None:
    emb = _embedder(openai_server)
    emb.embed(["a"])
    assert openai_server.requests[-1].headers["authorization"] == "Bearer not-needed"
    assert emb.model_id == "openai:fake-embed:64"
    emb.close()
    emb.close()


def test_unknown_dim_is_probed_once(openai_server: FakeOpenAIServer) -> None:
    emb = OpenAIEmbedder("my-local-model", base_url=openai_server.url)
    assert emb.dim == 64 and emb.model_id == "openai:my-local-model:64"
    assert emb.embed(["a"]).shape == (1, 64)
    assert openai_server.count() == 2
    assert OpenAIEmbedder("text-embedding-3-small").dim == 1536  # known: no request


def test_bad_arguments() -> None:
    with pytest.raises(ValidationError, match="batch_size"):
        OpenAIEmbedder("m", dim=8, batch_size=4096)
    with pytest.raises(ValidationError, match="send_dimensions"):
        OpenAIEmbedder("m", send_dimensions=True)


def test_missing_openai_package_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # what an environment without it looks like
    with pytest.raises(MissingExtraError, match=r"memray-agents\[openai\]") as info:
        OpenAIEmbedder("m", dim=8)
    assert info.value.extra == "openai"
