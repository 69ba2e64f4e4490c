from __future__ import annotations

import importlib.util
import sys

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
