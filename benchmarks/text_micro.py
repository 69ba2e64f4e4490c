"""What reducing a text to its index terms costs, one JSON line.

    python -m benchmarks.text_micro --repeat 5

:func:`memray.text.index_terms` runs for every text a shard indexes and every query it answers
(counting a text's terms was ~4% of a shard's GIL time in a 10,000-agent tick, ``py-spy record
--gil``; texts it has counted before are not counted again).
Over texts none of which repeats within a pass (the sentences of ``docs/design.md`` and the
lines of ``examples/tick.py``'s agents), best of ``--repeat`` passes, microseconds a text:

- ``memray_us``: :func:`~memray.text.index_terms`, its table of each token's term warm, as in a
  running shard;
- ``rules_us``: the form it replaced, kept here: each token tested against the function words
  and the ASCII-word pattern, then its stem looked up, and the contraction pattern run on every
  text (~1.5 us a text alone), apostrophe or not;
- ``tokenize_us``: :func:`~memray.text.tokenize` alone, the part both share.

``same_terms`` checks that both forms give every text the same terms.

Decided: the table of each token's term and the apostrophe check took ``memray_us`` from
5.4-5.7 to 3.6-3.7 us a text (two runs each, the same day).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._harness import emit, ratio
from memray import text as memray_text

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import tick as example  # noqa: E402  (examples/tick.py: what its agents say)

_STEMS: dict[str, str] = {}


def _stem(word: str) -> str:
    stem = _STEMS.get(word)
    if stem is None:
        stem = _STEMS[word] = memray_text._term(word)
    return stem


def rules_terms(text: str) -> list[str]:
    """The form :func:`memray.text.index_terms` replaced (the same terms)."""
    out: list[str] = []
    for token in memray_text.tokenize(memray_text._CONTRACTION.sub(" ", text)):
        if token in memray_text.STOPWORDS:
            continue
        out.append(_stem(token) if memray_text._LATIN_WORD.fullmatch(token) else token)
    return out


def texts(agents: int = 300, ticks: int = 4) -> list[str]:
    prose = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    sentences = [s.strip() for s in re.split(r"[.!?]\s", prose) if len(s.strip()) > 20]
    lines = [f(i, t) for f in (example.said, example.reply) for i in range(agents) for t in range(ticks)]
    return sentences + lines


def _best_us(fn: Callable[[str], object], corpus: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for line in corpus:
            fn(line)
        best = min(best, time.process_time() - t0)
    return round(best * 1e6 / len(corpus), 3)


def run(repeat: int) -> dict[str, Any]:
    corpus = texts()
    same = all(memray_text.index_terms(t) == rules_terms(t) for t in corpus)  # (both tables warm after)
    out: dict[str, Any] = {"texts": len(corpus), "same_terms": same}
    out["memray_us"] = _best_us(memray_text.index_terms, corpus, repeat)
    out["rules_us"] = _best_us(rules_terms, corpus, repeat)
    out["tokenize_us"] = _best_us(memray_text.tokenize, corpus, repeat)
    out["memray_to_rules"] = ratio(out["memray_us"], out["rules_us"])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    return emit("text_micro", vars(args), run(args.repeat))


if __name__ == "__main__":
    main()
