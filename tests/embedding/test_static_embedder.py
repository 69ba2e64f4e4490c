"""The static embedder (the default): its tokens are the tokenizer's, its bits do not depend on the
batch or the process, its table is what the recipe makes, and it finds meaning — while a
question about something never stored finds nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import memray
from memray.embedding.static import DEFAULT_MODEL, MODELS, StaticEmbedder, model_folder
from memray.errors import ValidationError
from memray.text import forget_texts
from tests.embedding.test_embedder_conformance import TEXTS

REPO = Path(__file__).resolve().parents[2]
PARAPHRASES = json.loads((REPO / "benchmarks" / "data" / "paraphrase.json").read_text(encoding="utf-8"))
CORPUS = (
    TEXTS
    + [p["fact"] for p in PARAPHRASES["pairs"]]
    + [p["question"] for p in PARAPHRASES["pairs"]]
    + [f["content"] for f in PARAPHRASES["filler"]]
    + ["Zürich café naïve résumé", "tab\tseparated\nlines", "non\u00a0breaking", "中文和English混合", "a_b-c/d"]
)


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder()


def test_token_ids_are_the_tokenizers_own(embedder: StaticEmbedder) -> None:
    tokenizer = embedder.tokenizer
    expected = [e.ids for e in tokenizer.encode_batch(CORPUS, add_special_tokens=False)]
    assert embedder.token_ids(CORPUS) == expected


def test_same_bits_alone_in_a_batch_and_after_the_word_table_is_cleared() -> None:
    small = StaticEmbedder(max_words=50, memo=False)  # the word table is cleared again and again
    together = small.embed(CORPUS)
    assert np.array_equal(together, np.vstack([small.embed([t]) for t in CORPUS]))
    assert np.array_equal(together, StaticEmbedder(memo=False).embed(CORPUS))
    assert len(small._words) <= 50


def test_the_memo_gives_the_bits_it_computed_and_keeps_rows_of_its_own() -> None:
    # (subsets, not equalities: a memray another test left open in this process may embed too)
    forget_texts()
    plain, memo = StaticEmbedder(memo=False), StaticEmbedder()
    half, other = CORPUS[::2], CORPUS[1::2]
    given = memo.embed(half)  # every text new: computed, and kept
    assert set(half) <= set(memo._m.memo) and not set(other) & set(memo._m.memo)
    given[:] = 0.0  # the caller's array: writing to it leaves the kept rows as they were
    mixed = CORPUS + half[:3]  # kept texts among new ones, and texts twice
    assert np.array_equal(memo.embed(mixed), plain.embed(mixed))
    assert np.array_equal(memo.embed(half), plain.embed(half))  # every text kept
    plain.embed(["a text only the embedder without a memo saw"])
    assert set(CORPUS) <= set(memo._m.memo) and "a text only the embedder without a memo saw" not in memo._m.memo
    assert forget_texts() >= len(set(CORPUS))  # erasing a user empties it
    assert not set(CORPUS) & set(memo._m.memo)


def test_same_bits_in_another_process(embedder: StaticEmbedder) -> None:
    code = (
        "import json, sys, hashlib; from memray.embedding.static import StaticEmbedder; "
        "print(hashlib.sha256(StaticEmbedder().embed(json.loads(sys.stdin.read())).tobytes()).hexdigest())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(CORPUS), capture_output=True, text=True, check=True, cwd=REPO
    )
    import hashlib

    assert out.stdout.strip() == hashlib.sha256(embedder.embed(CORPUS).tobytes()).hexdigest()


def test_a_text_without_content_gets_a_unit_row_near_nothing(embedder: StaticEmbedder) -> None:
    out = embedder.embed(["", "is it?", "...", "I drive a red Tesla Model 3"])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert np.abs(out[:3] @ out[3]).max() < 0.2


def test_a_long_text_is_embedded_in_bounded_memory(embedder: StaticEmbedder) -> None:
    out = embedder.embed(["peanut " * 50_000, "allergy"] + ["filler words here"] * 300)
    assert out.shape == (302, embedder.dim) and float(out[0] @ out[1]) > float(out[2] @ out[1])


def test_meaning_without_a_shared_word(embedder: StaticEmbedder) -> None:
    pairs = [
        ("I drive a red Tesla Model 3", "what car do I own?"),
        ("I work as a nurse in the night shift", "what is my job?"),
        ("My cat Pilot is 12 years old", "do I have any pets?"),
    ]
    facts = embedder.embed([f for f, _ in pairs])
    questions = embedder.embed([q for _, q in pairs])
    sims = questions @ facts.T
    assert list(sims.argmax(axis=1)) == [0, 1, 2]  # each question nearest its own fact


def test_the_shipped_table_weighs_function_words_zero_and_matches_its_card() -> None:
    from memray.embedding.distill import token_weights
    from memray.embedding.minilm import MiniLM

    weights = token_weights(MiniLM().open().tokenizer.get_vocab())
    shipped = np.load(MODELS / DEFAULT_MODEL / "vectors.npy")
    assert not shipped[weights == 0].any()  # function words, punctuation, specials weigh nothing
    assert np.abs(shipped[weights > 0]).sum(axis=1).min() > 0
    card = json.loads((MODELS / DEFAULT_MODEL / "model.json").read_text(encoding="utf-8"))
    assert (card["dim"], card["vocabulary"]) == (shipped.shape[1], shipped.shape[0]) == (384, 30522)
    assert card["content_tokens"] == int((weights > 0).sum())


def test_the_recipes_first_steps_recompute_rows_from_minilm() -> None:
    """Steps 1-3 in numpy give the rows of MiniLM's token states, weighted: a row is the mean of
    its token's three output states (checked against a forward pass of the same ids)."""
    from memray.embedding.distill import token_vectors
    from memray.embedding.minilm import MiniLM

    model = MiniLM().open()
    ids = np.array([2482, 21443, 6821], np.int64)  # car, peanut, nurse
    rows = token_vectors(model, ids)
    for i, row in zip(ids, rows):
        alone = model.hidden(np.array([[101, i, 102]]), np.ones((1, 3), np.float32))[0].mean(axis=0)
        np.testing.assert_allclose(row, alone, atol=1e-5)
    cos = (rows @ rows.T) / np.outer(np.linalg.norm(rows, axis=1), np.linalg.norm(rows, axis=1))
    assert cos[0, 1] < 0.9 and cos[1, 2] < 0.9


def test_refining_is_deterministic_lowers_the_loss_and_leaves_unseen_rows() -> None:
    """Step 5 on a small problem: the same bits twice, closer to the targets, and rows of tokens
    no sentence holds (and zero rows: function words) unchanged."""
    from memray.embedding.distill import refine

    rng = np.random.default_rng(1)
    table = rng.normal(size=(50, 8)).astype(np.float32)
    table[0] = 0.0  # a function word
    sentences = [list(rng.integers(0, 40, size=rng.integers(2, 6))) for _ in range(200)]
    targets = rng.normal(size=(200, 8)).astype(np.float32)
    targets /= np.linalg.norm(targets, axis=1, keepdims=True)

    def loss(t: np.ndarray) -> float:
        means = np.stack([t[[i for i in s if t[i].any()]].mean(axis=0) for s in sentences])
        return float(np.mean(1 - (means / np.linalg.norm(means, axis=1, keepdims=True) * targets).sum(axis=1)))

    once = refine(table, sentences, targets, epochs=3, rate=0.5)
    assert np.array_equal(once, refine(table, sentences, targets, epochs=3, rate=0.5))
    assert loss(once) < loss(table) - 0.05
    assert np.array_equal(once[40:], table[40:]) and not once[0].any()


def test_an_unknown_model_is_named() -> None:
    with pytest.raises(ValidationError, match="embedder.model.*minilm-static-v1"):
        model_folder("no-such-model")


def test_through_memray_meaning_is_found_and_the_unrelated_finds_nothing(tmp_path: Path) -> None:
    """The defaults, as a user meets them: each fact in its own conversation of filler."""
    pairs = PARAPHRASES["pairs"][::12]
    filler = [f["content"] for f in PARAPHRASES["filler"]][:10]
    with memray.open(str(tmp_path / "m"), mode="inprocess") as mem:
        assert mem.config.embedder.kind == "static"
        found = 0
        for p in pairs:
            conv = mem.conversation(user_id="u", conversation_id=p["id"])
            conv.add([{"role": "user", "content": t} for t in filler[:5] + [p["fact"]] + filler[5:]])
            found += p["fact"] in [h.message.text for h in conv.search(p["question"], limit=3)]
        assert found >= len(pairs) // 2, f"{found} of {len(pairs)}"
        conv = mem.conversation(user_id="u", conversation_id=pairs[0]["id"])
        unrelated = [u["question"] for u in PARAPHRASES["unrelated"]][:20]
        answered = [q for q in unrelated if conv.search(q, limit=3)]
        assert len(answered) <= 2, answered
