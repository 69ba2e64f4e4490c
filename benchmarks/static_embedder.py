"""The default embedder's rate on one core, beside its floor: the tokenizer alone on the same texts.

    python -m benchmarks.static_embedder [--texts 20000] [--repeat 3]

Texts are chat-length messages as a simulation writes them (``"agent 17, tick 3: " +`` a fact or
a small-talk turn of ``benchmarks/data/paraphrase.json``), every one distinct. Measured, best of
``--repeat``:

- ``cold``: a new :class:`~memray.embedding.static.StaticEmbedder` (its word table empty, the
  model already loaded) embeds them in one call;
- ``warm``: the same embedder again on texts whose words it has seen (the steady state of a long
  run: a new message is mostly words seen before);
- ``one_by_one``: the first 2,000, one call each (queries);
- ``memoised``: the first ``MEMO_TEXTS`` again, in one call, through the memo of the texts a
  process embedded last (the three above compute every vector: ``memo=False``);
- floor ``tokenizer``: ``tokenizers``' ``encode_batch_fast`` on the same texts, what any embedder
  with this vocabulary must at least do.

The tokenizer's own threads are pinned to one (``RAYON_NUM_THREADS=1``, set before it loads) and
numpy's BLAS is not used (a gather and a sum), so the figures are one core's. Prints one JSON line.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers loads: one core

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

from benchmarks._harness import emit
from benchmarks.paraphrase import PATH
from memray.embedding.static import MEMO_TEXTS, StaticEmbedder


def texts_of(n: int, seed: int = 0) -> list[str]:
    data = json.loads(PATH.read_text(encoding="utf-8"))
    pool = [p["fact"] for p in data["pairs"]] + [t["content"] for t in data["filler"]]
    rng = random.Random(seed)
    return [f"agent {i}, tick {i % 7}: {rng.choice(pool)}" for i in range(n)]


def best_rate(n: int, repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return round(n / best)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    texts = texts_of(args.texts)
    warm = StaticEmbedder(memo=False)
    warm.embed(texts)
    tokenizer = warm.tokenizer
    queries = texts[:2000]
    memoised, known = StaticEmbedder(), texts[:MEMO_TEXTS]
    memoised.embed(known)
    results = {
        "cold_sentences_per_s": best_rate(len(texts), args.repeat, lambda: StaticEmbedder(memo=False).embed(texts)),
        "warm_sentences_per_s": best_rate(len(texts), args.repeat, lambda: warm.embed(texts)),
        "one_by_one_per_s": best_rate(len(queries), args.repeat, lambda: [warm.embed([q]) for q in queries]),
        "memoised_sentences_per_s": best_rate(len(known), args.repeat, lambda: memoised.embed(known)),
        "floor_tokenizer_sentences_per_s": best_rate(
            len(texts), args.repeat, lambda: tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        ),
        "model_id": warm.model_id,
    }
    results["warm_to_floor"] = round(results["warm_sentences_per_s"] / results["floor_tokenizer_sentences_per_s"], 2)
    return emit("static_embedder", vars(args), results)


if __name__ == "__main__":
    main()
