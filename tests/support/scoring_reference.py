"""The scoring rule of ``docs/scoring.md``, written out plainly: one item at a time, Python floats
and loops, nothing cached, nothing vectorised. Slow and obviously correct; the kernel
(:mod:`memray.index.scorer`) is held equal to it in ``tests/index/test_scorer.py``.

Only the tokenizer (:func:`memray.text.index_terms`) and BM25's constants come from memray.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from memray.ids import Namespace
from memray.index.lexical import K1, B
from memray.ranking import Stream
from memray.sim_time import Window
from memray.text import index_terms


@dataclass(frozen=True)
class Item:
    """One indexed message or entry."""

    namespace: Namespace
    doc_id: str
    text: str
    vector: tuple[float, ...] | None  # any scale; None: no vector
    recency: float  # a message's seq, an entry's timestamp
    created_at: float = math.nan
    sim_time: float = math.nan
    importance: float = math.nan


@dataclass(frozen=True)
class Ask:
    """One search."""

    text: str
    vector: tuple[float, ...] | None = None
    k: int = 10
    mode: str = "hybrid"
    min_score: float | None = None
    threshold: float = 1.0
    vector_weight: float = 0.0
    stream: Stream | None = None
    window: Window | None = None
    distinct: bool = False  # one hit per text (the first in order; an empty text is no text)


@dataclass(frozen=True)
class Found:
    namespace: Namespace
    doc_id: str
    score: float
    recency: float


# -- the parts -----------------------------------------------------------------------------


def lexical_score(bm25: float, ideal: float) -> float:
    """``L = min(1, bm25 / ideal)``; 0 without a shared term."""
    if bm25 <= 0.0 or ideal <= 0.0:
        return 0.0
    return min(1.0, bm25 / ideal)


def vector_score(cosine: float, threshold: float) -> float:
    """``V = (cos - t) / (1 - t)`` in [0, 1]; 0 when no cosine can pass ``t`` or it is not a number."""
    if not threshold < 1.0 or not math.isfinite(cosine) or cosine <= threshold:
        return 0.0
    return min(1.0, (cosine - threshold) / (1.0 - threshold))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return sum(x * y for x, y in zip(a, b)) / (na * nb)


def usable(vector: Sequence[float] | None) -> bool:
    """A query vector with a direction: finite and not zero."""
    return vector is not None and all(math.isfinite(x) for x in vector) and any(x != 0.0 for x in vector)


def terms_of(ask: Ask) -> list[str]:
    """The query's distinct index terms (none in vector mode)."""
    if ask.mode == "vector":
        return []
    out: list[str] = []
    for term in index_terms(ask.text):
        if term not in out:
            out.append(term)
    return out


@dataclass(frozen=True)
class Stats:
    docs: int
    total_len: int
    df: dict[str, int]


def stats_of(texts: Sequence[str], terms: Sequence[str]) -> Stats:
    docs, total, df = 0, 0, dict.fromkeys(terms, 0)
    for text in texts:
        words = index_terms(text)
        docs += 1
        total += len(words)
        for term in set(words):
            if term in df:
                df[term] += 1
    return Stats(docs, total, df)


def idf(stats: Stats, term: str) -> float:
    df = stats.df.get(term, 0)
    return math.log(1.0 + (stats.docs - df + 0.5) / (df + 0.5))


def bm25(text: str, terms: Sequence[str], stats: Stats) -> float:
    words = Counter(index_terms(text))
    length = sum(words.values())
    avgdl = stats.total_len / stats.docs if stats.docs else 1.0
    avgdl = avgdl or 1.0
    total = 0.0
    for term in terms:
        tf = words.get(term, 0)
        if tf:
            total += idf(stats, term) * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / avgdl))
    return total


def fused(item: Item, ask: Ask, terms: Sequence[str], stats: Stats) -> float:
    """The item's score by the query's mode, before neighbour support."""
    ideal = sum(idf(stats, term) for term in terms)
    lexical = lexical_score(bm25(item.text, terms, stats), ideal) if terms else 0.0
    vec = 0.0
    if ask.mode != "lexical" and usable(ask.vector) and item.vector is not None:
        assert ask.vector is not None
        vec = vector_score(cosine(ask.vector, item.vector), ask.threshold)
    if ask.mode == "lexical":
        return lexical
    if ask.mode == "vector":
        return vec
    w = ask.vector_weight
    return (1.0 - w) * lexical + w * vec


def supported(score: float, neighbour: float, weight: float) -> float:
    """``s + n * s_nb * (1 - s)`` for a relevant item with a relevant neighbour."""
    if score <= 0.0 or neighbour <= 0.0:
        return score
    return score + weight * neighbour * (1.0 - score)


def in_window(item: Item, window: Window | None) -> bool:
    if window is None:
        return True
    after, before, created_after, created_before = window
    for value, lo, hi in ((item.sim_time, after, before), (item.created_at, created_after, created_before)):
        if lo is not None and not value >= lo:  # NaN: outside
            return False
        if hi is not None and not value < hi:
            return False
    return True


def stream_score(relevance: float, item: Item, stream: Stream) -> float:
    now, decay, w_rec, w_imp, w_rel = stream
    recency = 0.0 if math.isnan(item.sim_time) else decay ** max(0.0, (now - item.sim_time) / 3600.0)
    importance = 0.0 if math.isnan(item.importance) else item.importance
    return (w_rec * recency + w_imp * importance + w_rel * relevance) / (w_rec + w_imp + w_rel)


def passes(relevance: float, ask: Ask) -> bool:
    return relevance > 0.0 if ask.min_score is None else relevance >= ask.min_score


def order(found: Found) -> tuple[float, float, str, tuple[str, ...]]:
    """The kernel's order: scores equal to 12 decimals are a tie (sums in another order differ in
    the last bit), broken by recency, doc_id, namespace."""
    return (-round(found.score, 12), -found.recency, found.doc_id, tuple(found.namespace))


# -- a search ------------------------------------------------------------------------------


def linked(item: Item) -> bool:
    return item.namespace.kind == "conv"


def neighbours(item: Item, pool: Sequence[Item]) -> list[Item]:
    """The messages at seq - 1 and seq + 1 in the item's conversation."""
    if not linked(item):
        return []
    return [
        other
        for other in pool
        if other.namespace == item.namespace and other.recency in (item.recency - 1.0, item.recency + 1.0)
    ]


def finds_nothing(ask: Ask, items: Sequence[Item]) -> bool:
    return ask.k <= 0 or not items or (ask.mode == "vector" and not usable(ask.vector))


def search(items: Sequence[Item], ask: Ask, neighbour_weight: float) -> list[Found]:
    """The best ``ask.k`` of ``items`` (everything the search reads, deleted items left out)."""
    if finds_nothing(ask, items):
        return []
    terms = terms_of(ask)
    stats = stats_of([item.text for item in items], terms)
    base = {item: fused(item, ask, terms, stats) for item in items}
    found = []
    for item in items:
        best = max((base[other] for other in neighbours(item, items)), default=0.0)
        relevance = supported(base[item], best, neighbour_weight)
        if in_window(item, ask.window) and passes(relevance, ask):
            final = relevance if ask.stream is None else stream_score(relevance, item, ask.stream)
            found.append(Found(item.namespace, item.doc_id, final, item.recency))
    return distinct(sorted(found, key=order), items, ask)[: ask.k]


def distinct(found: list[Found], items: Sequence[Item], ask: Ask) -> list[Found]:
    """``found`` (in order) with, if ``ask.distinct``, only the first of each non-empty text."""
    if not ask.distinct:
        return found
    text = {(item.namespace, item.doc_id): item.text for item in items}
    seen: set[str] = set()
    out = []
    for hit in found:
        t = text[(hit.namespace, hit.doc_id)]
        if t and t in seen:
            continue
        seen.add(t)
        out.append(hit)
    return out


def search_with_tail(
    indexed: Sequence[Item], tail: Sequence[Item], ask: Ask, neighbour_weight: float
) -> tuple[list[Found], list[Found]]:
    """What the shard answers over ``indexed``, and that answer with the messages of ``tail`` (not
    yet indexed; a tail message replaces the indexed one of the same id) scored in: with the BM25
    statistics of ``indexed`` plus the tail, neighbour support from the other tail messages and
    from the shard's hits (not under stream scoring)."""
    shard = search(indexed, ask, neighbour_weight)
    if finds_nothing(ask, tail):
        return shard, shard
    replaced = {(item.namespace, item.doc_id) for item in tail}
    kept = [hit for hit in shard if (hit.namespace, hit.doc_id) not in replaced]
    terms = terms_of(ask)
    stats = stats_of([item.text for item in (*indexed, *tail)], terms)
    base = {item: fused(item, ask, terms, stats) for item in tail}
    known = {} if ask.stream is not None else {(hit.namespace, hit.recency): hit.score for hit in kept}
    scored = []
    for item in tail:
        best = max((base[other] for other in neighbours(item, tail)), default=0.0)
        for seq in (item.recency - 1.0, item.recency + 1.0):
            best = max(best, known.get((item.namespace, seq), 0.0))
        relevance = supported(base[item], best, neighbour_weight)
        if in_window(item, ask.window) and passes(relevance, ask):
            final = relevance if ask.stream is None else stream_score(relevance, item, ask.stream)
            scored.append(Found(item.namespace, item.doc_id, final, item.recency))
    # the tail is scored apart (distinct among its own messages), then merged with the shard's hits
    found = kept + distinct(sorted(scored, key=order), tail, ask)[: ask.k]
    return shard, sorted(found, key=order)[: ask.k]
