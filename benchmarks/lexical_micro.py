"""What the lexical part of a conversation search costs as a simulation tick runs, one JSON line.

    python -m benchmarks.lexical_micro --namespaces 500 --ticks 40

The shape of ``examples/tick.py``: every tick each of ``namespaces`` conversations gets two
messages (a user's line and a reply), then is searched once with the user's line. Per tick,
CPU microseconds per conversation of its two :meth:`~memray.index.lexical.LexicalIndex.add`
calls (which append to the entries cached for terms read before) and of its search's
:meth:`~memray.index.lexical.LexicalIndex.postings` (what the scoring kernel asks a namespace
for) and, for the small postings it hands back as entries, of
:func:`~memray.index.lexical.weigh` over the tick's searches at once (as the kernel weighs a
block's), in three forms, each on its own copy of the indexes (a form then finds the cache as its
own searches left it):

- ``arrays``: per query term, the posting as numpy arrays, cached, with its BM25 weights cached
  per average length (forced here with both bounds at -1). In a tick nothing of that
  cache survives: each namespace gained documents since its last search, so the arrays are
  appended to and every term is reweighted;
- ``fused``: what memray does: the cached entries, weighed with the tick's others, up to
  :data:`~memray.index.lexical.FUSED_PER_TERM` entries per query term, or
  :data:`~memray.index.lexical.CHANGED_PER_TERM` when a posting changed since its last read (as
  here, every tick); above, the arrays;
- ``fused_always``: the cached entries at any size;
- ``raw_topk``: for scale, :class:`benchmarks._raw.RawBm25` answering the same query over the
  same texts, its postings built beforehand (no adds timed): tokenising the query, BM25 and the
  top 7 (more than ``postings`` does, so not a floor of it; the kernel's own floor is in
  ``search_micro``).

Every form returns the same floats (the check at the end compares them bit for bit). The
medians are over the second half of the ticks.

Before the entries were cached, small postings were weighed entry by entry in plain Python
(~0.5 us an entry), which crossed the arrays at 36-42 entries a term (``--ticks 160``) and
bounded that form at 40 entries a term whatever the read; the cached entries cost a fraction of
that (``--namespaces 500 --ticks 40``, two alternated pairs, the reads alone as the micro then
timed them: 41-44 against 54-87 us a search). The entries were first brought up to date at a
term's next read; an add appending its own entry took a conversation's tick (its adds and its
search, as timed now) from 32.9-34.6 to 24.7-28.8 us at 10 ticks, 49.7-54.1 to 35.5-44.6 at 40
(two alternated pairs).

``--bounds 40,80,160,320,500,1000`` also times both forms per posting size (5 query terms,
``bounds`` in the JSON), on postings read again unchanged and on postings that gained two
documents since their last read (the adds not timed: both forms pay them alike): what set
``FUSED_PER_TERM`` and ``CHANGED_PER_TERM``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import memray.index.lexical as lexical
from benchmarks._harness import emit, ratio
from benchmarks._raw import RawBm25
from memray.text import term_counts

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import tick as example  # noqa: E402  (examples/tick.py: what its agents say)

#: Each form with the bounds it searches under (entries per query term: a read of unchanged
#: postings, a read that finds one changed).
FORMS: dict[str, tuple[float, float]] = {
    "arrays": (-1, -1),
    "fused": (lexical.FUSED_PER_TERM, lexical.CHANGED_PER_TERM),
    "fused_always": (float("inf"), float("inf")),
}


def run(namespaces: int, ticks: int) -> dict[str, Any]:
    # one set of indexes per form, each getting every document: a form's search then finds the
    # arrays cache as its own searches left it (a shared one would be warmed by another form)
    indexes = {form: [lexical.LexicalIndex(key=int) for _ in range(namespaces)] for form in FORMS}
    texts: list[list[str]] = [[] for _ in range(namespaces)]
    rows: list[dict[str, Any]] = []
    same = True
    for t in range(ticks):
        lines = [(example.said(i, t), example.reply(i, t)) for i in range(namespaces)]
        queries = [list(term_counts(example.said(i, t))) for i in range(namespaces)]
        row: dict[str, Any] = {"tick": t}
        got: dict[str, list[Any]] = {}
        for form, bounds in FORMS.items():
            with _bounds(*bounds):
                cpu = _add(indexes[form], lines, 2 * t)
                read, got[form] = _read(indexes[form], queries)
            row[f"{form}_us"] = round((cpu + read) * 1e6 / namespaces, 2)
        for i, pair in enumerate(lines):
            texts[i].extend(pair)
        first, *others = got.values()
        same = same and all(_scores(a) == _scores(b) for other in others for a, b in zip(first, other))
        raw = [RawBm25(docs) for docs in texts]
        t0 = time.process_time()
        for bm25, i in zip(raw, range(namespaces)):
            bm25.topk(example.said(i, t), 7)
        row["raw_topk_us"] = round((time.process_time() - t0) * 1e6 / namespaces, 2)
        rows.append(row)
    steady = rows[len(rows) // 2 :]
    out: dict[str, Any] = {"namespaces": namespaces, "ticks": ticks, "same_scores": same, "by_tick": rows}
    for key in [f"{form}_us" for form in FORMS] + ["raw_topk_us"]:
        out[key] = round(statistics.median(r[key] for r in steady), 2)
    out["fused_to_arrays"] = ratio(out["fused_us"], out["arrays_us"])
    return out


@contextlib.contextmanager
def _bounds(fused: float, changed: float) -> Iterator[None]:
    """:data:`~memray.index.lexical.FUSED_PER_TERM` and ``CHANGED_PER_TERM`` set, for a form."""
    saved = lexical.FUSED_PER_TERM, lexical.CHANGED_PER_TERM
    lexical.FUSED_PER_TERM, lexical.CHANGED_PER_TERM = fused, changed  # type: ignore[assignment]
    try:
        yield
    finally:
        lexical.FUSED_PER_TERM, lexical.CHANGED_PER_TERM = saved


def _add(indexes: list[lexical.LexicalIndex], lines: list[tuple[str, str]], first: int) -> float:
    """CPU seconds of each index adding its tick's two lines (doc ids ``first``, ``first + 1``)."""
    t0 = time.process_time()
    for index, pair in zip(indexes, lines):
        for n, line in enumerate(pair):
            index.add(str(first + n), line)
    return time.process_time() - t0


def _read(indexes: list[lexical.LexicalIndex], queries: list[list[str]]) -> tuple[float, list[lexical.Postings]]:
    """Each index's postings of its query, weighed as the kernel weighs a block (the small ones
    at once, the arrays by their idf): CPU seconds, and the postings."""
    t0 = time.process_time()
    got = [index.postings(q, None) for index, q in zip(indexes, queries)]
    lexical.weigh([postings.raw for postings in got if postings.raw is not None])
    for postings in got:
        for _, weights, idf in postings.arrays:
            idf * weights  # noqa: B018  (as the kernel applies the idf)
    return time.process_time() - t0, got


def bounds(sizes: list[int], namespaces: int = 50, reads: int = 5) -> list[dict[str, Any]]:
    """What decided the two bounds: per posting size (entries a term, 5 query terms), CPU
    microseconds a read as cached entries and as arrays, of postings read again unchanged and
    of postings that gained two documents since their last read (a simulation's reads)."""
    out = []
    for size in sizes:
        row: dict[str, Any] = {"entries_a_term": size}
        for form, bound in (("entries", float("inf")), ("arrays", -1.0)):
            for changed in (False, True):
                cpu = _reads(size, bound, changed, namespaces, reads)
                row[f"{form}_{'changed' if changed else 'unchanged'}_us"] = round(cpu * 1e6 / (reads * namespaces), 1)
        out.append(row)
    return out


def _reads(size: int, bound: float, changed: bool, namespaces: int, reads: int) -> float:
    """CPU seconds of ``reads`` reads of ``namespaces`` indexes of ``size`` documents under
    ``bound``, each read after two more documents if ``changed``."""
    query = list(term_counts("apple pear plum fig kiwi"))
    indexes = [lexical.LexicalIndex(key=int) for _ in range(namespaces)]
    for index in indexes:
        for doc in range(size):
            index.add(str(doc), f"apple pear plum fig kiwi note{doc}")
    cpu = 0.0
    with _bounds(bound, bound):
        _read(indexes, [query] * namespaces)  # (taken, and for the arrays weighed, once)
        for n in range(reads):
            for index in indexes if changed else ():
                index.add(str(size + 2 * n), "apple pear plum fig kiwi again")
                index.add(str(size + 2 * n + 1), "apple pear plum fig kiwi again")
            cpu += _read(indexes, [query] * namespaces)[0]
    return cpu


def _scores(postings: lexical.Postings) -> dict[int, float]:
    """BM25 per label, summed in the kernel's order (term by term, each posting in its order)."""
    out: dict[int, float] = {}
    entries = [(labels.tolist(), (idf * weights).tolist()) for labels, weights, idf in postings.arrays]
    if postings.raw is not None:
        labels, weights, _ = lexical.weigh([postings.raw])
        entries.append((labels.tolist(), weights.tolist()))
    for labels, weights in entries:
        for label, weight in zip(labels, weights):
            out[label] = out.get(label, 0.0) + weight
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--namespaces", type=int, default=1000)
    p.add_argument("--ticks", type=int, default=12)
    p.add_argument("--out", default=None, help="also write the JSON line here (a recorded run)")
    p.add_argument("--bounds", default="", help="posting sizes (entries a term) to time both forms at ('' skips)")
    args = p.parse_args(argv)
    params = {k: v for k, v in vars(args).items() if k != "out"}
    out = run(args.namespaces, args.ticks)
    if args.bounds:
        out["bounds"] = bounds([int(x) for x in args.bounds.split(",")])
    return emit("lexical_micro", params, out, args.out)


if __name__ == "__main__":
    main()
