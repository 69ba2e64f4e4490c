"""Calibration: each model's relevance threshold and vector weight, measured once per data
directory on the built-in corpus and recorded with the model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import memray
from memray.embedding.calibration import (
    CALIBRATION_FILE,
    CORPUS,
    DEFAULT,
    DOES_NOT_SEPARATE,
    IGNORED,
    Calibration,
    CalibrationWarning,
    calibrate,
    calibration_of,
)
from memray.embedding.hashing import HashEmbedder
from memray.errors import EmbeddingError


class Counting:
    """The hash embedder, counting its calls (a fake with a real embedder inside)."""

    def __init__(self, fail: bool = False) -> None:
        self.inner = HashEmbedder(128)
        self.model_id, self.dim = self.inner.model_id, 128
        self.calls, self.fail = 0, fail

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        if self.fail:
            raise EmbeddingError("endpoint down")
        return self.inner.embed(texts)


def test_the_hash_embedder_calibrates_to_what_unrelated_real_conversations_reach() -> None:
    threshold, weight = calibrate(HashEmbedder(256))
    # on LoCoMo (not generated here) the 99th percentile of unrelated question/turn cosines is 0.213
    assert 0.18 < threshold < 0.25
    assert 0.0 < weight < 0.1  # its similarity barely separates related sentences: little weight
    assert calibrate(HashEmbedder(256)) == (threshold, weight)  # deterministic
    assert sum(len(s) for s in CORPUS.values()) == 160 and len(CORPUS) == 40


def test_a_model_is_calibrated_once_per_data_directory_and_recorded(tmp_path: Path) -> None:
    embedder = Counting()
    first = calibration_of(str(tmp_path), embedder)
    assert embedder.calls == 1
    assert calibration_of(str(tmp_path), embedder) == first and embedder.calls == 1
    record = json.loads((tmp_path / CALIBRATION_FILE).read_text())[embedder.model_id]
    assert Calibration(record["threshold"], record["vector_weight"]) == first and record["quantile"] == 0.99


def test_a_model_that_cannot_embed_gets_the_default_and_is_tried_again_later(tmp_path: Path) -> None:
    down = Counting(fail=True)
    assert calibration_of(str(tmp_path), down) == DEFAULT
    assert not (tmp_path / CALIBRATION_FILE).exists()
    down.fail = False
    assert calibration_of(str(tmp_path), down) != DEFAULT and down.calls == 2


@pytest.mark.parametrize("overrides", [{}, {"min_similarity": 0.5, "vector_weight": 0.4}])
def test_open_uses_the_calibration_or_the_configured_overrides(tmp_path: Path, overrides: dict[str, float]) -> None:
    embedder = memray.EmbedderConfig(kind="hash", dim=256, min_similarity=overrides.get("min_similarity"))
    index = memray.IndexConfig(vector_weight=overrides.get("vector_weight"))
    with memray.open(str(tmp_path), mode="inprocess", embedder=embedder, index=index) as mem:
        got = mem.internals.encoder.calibration
    want = calibrate(HashEmbedder(256))
    assert got == (overrides.get("min_similarity", want.threshold), overrides.get("vector_weight", want.vector_weight))


class Degenerate:
    """An embedder that does not separate unrelated texts."""

    def __init__(self, kind: str) -> None:
        self.kind, self.model_id, self.dim = kind, f"degenerate-{kind}", 4

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), 4), dtype=np.float32)
        if self.kind == "constant":
            out[:] = 1.0
        elif self.kind == "one-hot":
            for i, text in enumerate(texts):
                out[i, 0 if "cat" in text else 1] = 1.0
        return out  # "zero"


@pytest.mark.parametrize("kind", ["constant", "one-hot", "zero"])
def test_an_embedder_that_does_not_separate_texts_is_ignored_and_recorded_so(tmp_path: Path, kind: str) -> None:
    assert calibrate(Degenerate(kind)) == IGNORED and IGNORED.ignores_vectors
    with pytest.warns(CalibrationWarning, match=DOES_NOT_SEPARATE):
        assert calibration_of(str(tmp_path), Degenerate(kind)) == IGNORED
    record = json.loads((tmp_path / CALIBRATION_FILE).read_text())[f"degenerate-{kind}"]
    assert record["ignored"] == DOES_NOT_SEPARATE and record["measured_threshold"] == (0.0 if kind == "zero" else 1.0)
    assert not calibrate(HashEmbedder(16)).ignores_vectors  # a weak embedder is still used
