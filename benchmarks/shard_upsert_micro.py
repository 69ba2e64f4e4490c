"""What a shard's upsert costs per item as a simulation tick runs, against its raw work, one JSON line.

    python -m benchmarks.shard_upsert_micro --namespaces 10000 --ticks 10

The shape of ``examples/tick.py`` on one shard: every tick each of ``namespaces`` conversations
gets two messages (a user's line and a reply), embedded by the default static embedder, and the
shard takes the tick's messages in one :meth:`~memray.index.shard.VectorShard.upsert` (what a
host's embedding pipeline sends). Per tick, CPU microseconds per item of:

- ``upsert_us``: the shard's upsert (checks, one normalisation of the batch, per namespace its
  labels, recency, columns, payloads, BM25 terms and exact vector index); each item carries its
  columns (a creation time) as the embedding pipeline's do;
- ``raw_us``: the floor, the same work with nothing of memray's: the batch normalised in numpy,
  each namespace's rows written into a preallocated matrix, and each text's words counted into a
  plain postings dict (``re.findall``, no stemming or stopwords).

``held`` is what the shard holds at the end (every item upserted, with its vector).

Decided: the items were built twice (checked, then rebuilt with the normalised vector), a lone
vector was stacked into a new matrix, and the labels were checked with numpy's ``min``. Building
each item once, passing a lone row as a view and checking the labels as a list took
``upsert_us`` from 16.8 to 14.6 µs (raw 4.8-5.0 µs), and with one item per namespace per call
(no text seen before) from 22-25 to 16-18 µs; both on this 2-core machine, the same day.

Later, with each item carrying its columns as the pipeline's do (``--namespaces 1000 --ticks
14``, three alternated pairs): handing an exact index the batch's rows as they are (no matrix
stacked and checked per namespace), new capacity left unzeroed (only live rows are read) and the
columns checked without generators took ``upsert_us`` from 30.7-41.4 to 21.3-30.7 µs (raw
7.1-9.7 µs; ratio 4.2 -> 3.0). Growing the arrays by label once per namespace's part of the batch,
tried with it, gained nothing measurable (each grows by doubling anyway: 18.7-19.2 µs without it).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import emit, ratio
from memray.config import IndexConfig
from memray.embedding.static import StaticEmbedder
from memray.ids import Namespace
from memray.index.base import IndexItem
from memray.index.shard import VectorShard
from memray.runtime.collector import raise_thresholds

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tick as example  # noqa: E402  (examples/tick.py: what its agents say)

_WORD = re.compile(r"\w+")


def run(namespaces: int, ticks: int) -> dict[str, Any]:
    raise_thresholds()  # as in every memray process
    embedder = StaticEmbedder()
    dim = embedder.dim
    spaces = [Namespace("default", f"agent-{i}", "conv", "main") for i in range(namespaces)]
    rows: list[dict[str, Any]] = []
    raw_mats = [np.zeros((2 * ticks, dim), np.float32) for _ in range(namespaces)]
    raw_postings: list[dict[str, dict[int, int]]] = [{} for _ in range(namespaces)]
    with tempfile.TemporaryDirectory() as tmp:
        shard = VectorShard(0, tmp, dim, embedder.model_id, IndexConfig())
        for t in range(ticks):
            texts = [line for i in range(namespaces) for line in (example.said(i, t), example.reply(i, t))]
            vectors = embedder.embed(texts)
            columns = (time.time(), math.nan, math.nan)  # a message's created_at, no sim time or importance
            items = [
                IndexItem(spaces[n // 2], f"m{t}-{n % 2}", vectors[n], text, float(2 * t + n % 2 + 1), "{}", t, columns)
                for n, text in enumerate(texts)
            ]
            t0 = time.process_time()
            shard.upsert(items, embedder.model_id)
            upsert = time.process_time() - t0
            t0 = time.process_time()
            unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
            for n, text in enumerate(texts):
                ns, label = n // 2, 2 * t + n % 2
                raw_mats[ns][label] = unit[n]
                postings = raw_postings[ns]
                for word in _WORD.findall(text.lower()):
                    posting = postings.setdefault(word, {})
                    posting[label] = posting.get(label, 0) + 1
            raw = time.process_time() - t0
            rows.append(
                {
                    "tick": t,
                    "upsert_us": round(upsert * 1e6 / len(items), 2),
                    "raw_us": round(raw * 1e6 / len(items), 2),
                }
            )
        held = int(shard.stats()["vectors"])
    steady = rows[1:]
    out: dict[str, Any] = {"held": held, "by_tick": rows}
    for key in ("upsert_us", "raw_us"):
        out[key] = round(statistics.median(r[key] for r in steady), 2)
    out["ratio_to_raw"] = ratio(out["upsert_us"], out["raw_us"])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--namespaces", type=int, default=10_000)
    p.add_argument("--ticks", type=int, default=10)
    args = p.parse_args(argv)
    return emit("shard_upsert_micro", vars(args), run(args.namespaces, args.ticks))


if __name__ == "__main__":
    main()
