from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memray.embedding import HashEmbedder
from memray.errors import ValidationError
from tests.support.paraphrases import PAIRS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("dim", [64, 256])
def test_paraphrase_nearest_neighbour_is_its_source(dim: int) -> None:
    e = HashEmbedder(dim)
    sources = e.embed([a for a, _ in PAIRS])
    paraphrases = e.embed([b for _, b in PAIRS])
    nearest = (paraphrases @ sources.T).argmax(axis=1)
    accuracy = float((nearest == np.arange(len(PAIRS))).mean())
    assert accuracy >= 0.9


def test_unrelated_near_zero_and_paraphrases_clearly_higher() -> None:
    e = HashEmbedder(256)
    sims = e.embed([b for _, b in PAIRS]) @ e.embed([a for a, _ in PAIRS]).T
    unrelated = sims[~np.eye(len(PAIRS), dtype=bool)]
    assert abs(float(unrelated.mean())) < 0.05
    assert float(np.diag(sims).mean()) > float(unrelated.mean()) + 0.4


def test_cjk_text_is_discriminated() -> None:
    e = HashEmbedder(256)
    a, b, c = e.embed(["我喜欢吃苹果和香蕉", "我很喜欢吃苹果", "明天的会议改到下午三点"])
    assert float(a @ b) > 0.3
    assert float(a @ b) > float(a @ c) + 0.3


def test_same_vectors_in_another_process() -> None:
    code = (
        "from memray.embedding import HashEmbedder;"
        "print(HashEmbedder(32).embed(['hello wörld 你好 🎉', 'x']).tobytes().hex())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
        cwd=REPO,
    ).stdout.strip()
    assert other == HashEmbedder(32).embed(["hello wörld 你好 🎉", "x"]).tobytes().hex()


def test_vocabulary_reset_changes_nothing() -> None:
    texts = [f"word{i} shared text number {i}" for i in range(50)]
    small = HashEmbedder(64, max_vocab=10)
    first = small.embed(texts[:25])
    small.embed(texts[25:])  # the table overflows and is rebuilt
    np.testing.assert_array_equal(small.embed(texts[:25]), first)
    np.testing.assert_array_equal(HashEmbedder(64).embed(texts[:25]), first)


def test_threads_get_the_serial_result() -> None:
    e = HashEmbedder(128)
    batches = [[f"thread {t} message {i} tokens{i * t}" for i in range(40)] for t in range(6)]
    expected = [HashEmbedder(128).embed(b) for b in batches]
    results: dict[int, np.ndarray] = {}

    def work(t: int) -> None:
        results[t] = e.embed(batches[t])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in range(6):
        np.testing.assert_array_equal(results[t], expected[t])


def test_sublinear_term_frequency() -> None:
    e = HashEmbedder(256)
    once, many, other = e.embed(["apple banana", "apple apple apple apple banana", "banana"])
    # repeating a word pulls towards it, but much less than linearly
    assert float(many @ other) < float(once @ other)
    assert float(many @ other) > 0.2


def test_model_id_and_bad_dim() -> None:
    assert HashEmbedder(256).model_id == "hash-v1-256"
    with pytest.raises(ValidationError, match="dim"):
        HashEmbedder(0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=8))
def test_any_text_gives_unit_rows(texts: list[str]) -> None:
    out = HashEmbedder(64).embed(texts)
    assert out.shape == (len(texts), 64)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def _words(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = ["the", "a", "is", "apple", "banana", "running", "runs", "x", "naïve", "你好", "🎉", "it's"]
    vocab += [f"w{i}" for i in range(40)]
    return [" ".join(rng.choice(vocab, size=rng.integers(0, 25))) for _ in range(n)]


@pytest.mark.parametrize("dim", [8, 64, 256])
def test_one_text_gives_the_bits_of_a_batch(dim: int) -> None:
    """A single text takes its own path (a query's): its vector must be bit-identical to the same
    text's row in a batch, or query vectors and stored or recomputed ones would diverge."""
    texts = [*_words(400, dim), "", "!!", "the the the", "apple apple apple banana apple", "日本語のテキスト"]
    batch = HashEmbedder(dim).embed(texts)
    one = HashEmbedder(dim, max_vocab=50)  # and across table resets
    for text, row in zip(texts, batch):
        assert one.embed([text])[0].tobytes() == row.tobytes(), text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=4))
def test_any_text_alone_gives_its_batch_row(texts: list[str]) -> None:
    batch = HashEmbedder(64).embed(texts)
    e = HashEmbedder(64)
    for text, row in zip(texts, batch):
        assert e.embed([text])[0].tobytes() == row.tobytes()
