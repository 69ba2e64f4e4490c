"""What the lexical part of a conversation search costs as a simulation tick runs, one JSON line.

    python -m benchmarks.lexical_micro --namespaces 1000 --ticks 12

The shape of ``examples/tick.py``: every tick each of ``namespaces`` conversations gets two
messages (a user's line and a reply), then is searched once with the user's line. Per tick,
CPU microseconds per search of :meth:`memray.index.lexical.LexicalIndex.postings` (what the
scoring kernel asks a namespace for), in its two forms:

- ``arrays``: per query term, the posting as numpy arrays, cached, with its BM25 weights cached
  per average length (what every search used before; forced here with ``FUSED_AT_MOST = -1``).
  In a tick nothing of that cache survives: each namespace gained documents since its last
  search, so the arrays are appended to and every term is reweighted;
- ``fused``: the default under :data:`~memray.index.lexical.FUSED_AT_MOST` posting entries: one
  entry for the whole query, computed in plain Python;
- ``raw_topk``: for scale, :class:`benchmarks._raw.RawBm25` answering the same query over the
  same texts, its postings built beforehand: tokenising the query, BM25 and the top 7 (more than
  ``postings`` does, so not a floor of it; the kernel's own floor is in ``search_micro``).

Both forms return the same floats (the check at the end compares them bit for bit).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import memray.index.lexical as lexical
from benchmarks._harness import emit, ratio
from benchmarks._raw import RawBm25
from memray.text import term_counts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tick as example  # noqa: E402  (examples/tick.py: what its agents say)


def run(namespaces: int, ticks: int) -> dict[str, Any]:
    indexes = [lexical.LexicalIndex(key=int) for _ in range(namespaces)]
    texts: list[list[str]] = [[] for _ in range(namespaces)]
    rows: list[dict[str, Any]] = []
    same = True
    for t in range(ticks):
        for i, index in enumerate(indexes):
            for line in (example.said(i, t), example.reply(i, t)):
                index.add(str(len(texts[i])), line)
                texts[i].append(line)
        queries = [list(term_counts(example.said(i, t))) for i in range(namespaces)]
        row: dict[str, Any] = {"tick": t}
        got: dict[int, list[Any]] = {}
        for form, bound in (("arrays", -1), ("fused", lexical.FUSED_AT_MOST)):
            saved, lexical.FUSED_AT_MOST = lexical.FUSED_AT_MOST, bound
            try:
                t0 = time.process_time()
                got[bound] = [index.postings(q, None) for index, q in zip(indexes, queries)]
                row[f"{form}_us"] = round((time.process_time() - t0) * 1e6 / namespaces, 2)
            finally:
                lexical.FUSED_AT_MOST = saved
        same = same and all(_scores(a) == _scores(b) for a, b in zip(*got.values()))
        raw = [RawBm25(docs) for docs in texts]
        t0 = time.process_time()
        for bm25, i in zip(raw, range(namespaces)):
            bm25.topk(example.said(i, t), 7)
        row["raw_topk_us"] = round((time.process_time() - t0) * 1e6 / namespaces, 2)
        rows.append(row)
    steady = rows[len(rows) // 2 :]
    out: dict[str, Any] = {"namespaces": namespaces, "ticks": ticks, "same_scores": same, "by_tick": rows}
    for key in ("arrays_us", "fused_us", "raw_topk_us"):
        out[key] = round(statistics.median(r[key] for r in steady), 2)
    out["fused_to_arrays"] = ratio(out["fused_us"], out["arrays_us"])
    return out


def _scores(postings: list[tuple[np.ndarray, np.ndarray, float]]) -> dict[int, float]:
    """BM25 per label, summed in the kernel's order (term by term, each posting in its order)."""
    out: dict[int, float] = {}
    for labels, weights, idf in postings:
        for label, weight in zip(labels.tolist(), (idf * weights).tolist()):
            out[label] = out.get(label, 0.0) + weight
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--namespaces", type=int, default=1000)
    p.add_argument("--ticks", type=int, default=12)
    args = p.parse_args(argv)
    return emit("lexical_micro", vars(args), run(args.namespaces, args.ticks))


if __name__ == "__main__":
    main()
