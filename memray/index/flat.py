"""`FlatView`: every item of one (app, kind) on a shard in one vector index and one lexical index,
so an app-wide search is one scan (or one HNSW query) and one BM25 pass, not a walk over the
app's namespaces; :func:`search_flat` scores it.

A view numbers the items it holds with *slots* (a counter, like a namespace's labels; a slot
maps to the item's namespace uid and label). Its vector index is exact while it holds fewer than
``IndexConfig.app_exact_threshold`` vectors and HNSW from there (:meth:`FlatViews.fit`); its
lexical index holds the same term counts as the namespaces'. Scores are those of
:func:`memray.index.search.search_spaces` over the same namespaces (the BM25 statistics of all
of them, fusion, neighbour support), computed over arrays indexed by slot.

Views are derived state: built on the first app-wide search of an (app, kind), kept in step with
every upsert, delete and dropped namespace from then on (:class:`FlatViews`), dropped whole when
a model is staged or cut over (rebuilt on the next app search), never snapshotted. They cost a
second copy of the app's vectors and postings in the shard's memory, only for apps searched
app-wide. Searches with memory-stream scoring, a time window or the retired model walk the
namespaces instead (:func:`memray.index.search.search_spaces`).

Measured (``benchmarks/search_micro.py``, 50,000 messages in 5,000 conversations, one shard,
hybrid, load average 6-9): the namespace walk took ~570 ms p50, the view ~24 ms (~10 ms of it the
scan of 50,000 x 256 floats); raw numpy over the same vectors ~7 ms. Building a view costs ~20 µs
an item, once.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from memray.config import IndexConfig
from memray.index.base import ShardHit
from memray.index.exact import ExactIndex
from memray.index.fusion import fuse_arrays, vector_scores
from memray.index.hnsw import HnswIndex
from memray.index.lexical import Bm25Stats, LexicalIndex, ideal_bm25
from memray.text import index_terms

if TYPE_CHECKING:
    from memray.index.space import Space

__all__ = ["FlatView", "FlatViews", "search_flat", "rebuild"]

Fit = Callable[[ExactIndex | HnswIndex], ExactIndex | HnswIndex]


class FlatView:
    """The items of one (app, kind) on a shard (module docstring)."""

    def __init__(self, dim: int, conv: bool) -> None:
        self.conv = conv  # conversation messages: neighbour support applies
        self.slots: dict[int, dict[int, int]] = {}  # uid -> label -> slot
        self.spaces: dict[int, Space] = {}  # uid -> its namespace
        self.uid = np.zeros(0, dtype=np.int64)  # by slot
        self.label = np.zeros(0, dtype=np.int64)
        self.rec = np.zeros(0)  # recency by slot, NaN: no item
        self.has_vector = np.zeros(0, dtype=bool)  # by slot
        self.next_slot = 0
        self.vectors: ExactIndex | HnswIndex = ExactIndex(dim)
        self.lexical = LexicalIndex(int)
        self._adjacent: tuple[np.ndarray, np.ndarray] | None = None

    def _slot(self, space: Space, label: int) -> int:
        labels = self.slots.setdefault(space.uid, {})
        slot = labels.get(label)
        if slot is None:
            slot = labels[label] = self.next_slot
            self.next_slot += 1
            if slot >= len(self.rec):
                cap = max(64, 2 * len(self.rec))
                self.uid = np.resize(self.uid, cap)
                self.label = np.resize(self.label, cap)
                rec = np.full(cap, np.nan)
                rec[: len(self.rec)] = self.rec
                self.rec = rec
                self.has_vector = np.append(self.has_vector, np.zeros(cap - len(self.has_vector), dtype=bool))
            self.uid[slot], self.label[slot] = space.uid, label
            self.spaces[space.uid] = space
        return slot

    def put(self, space: Space, docs: Iterable[str], labels: np.ndarray | None, vectors: np.ndarray | None) -> None:
        """Take ``docs`` of ``space`` as the space now holds them (recency, terms), and the given
        normalised ``vectors`` of ``labels`` (None: none changed)."""
        for doc in docs:
            label = space.labels[doc]
            slot = self._slot(space, label)
            self.rec[slot] = space.rec[label]
            self.lexical.add_terms(str(slot), space.lexical.terms(doc) or {})
        if labels is not None and vectors is not None and len(labels):
            slots = np.array([self._slot(space, int(x)) for x in labels], dtype=np.int64)
            self.vectors.add(slots, vectors)
            self.has_vector[slots] = True
        self._adjacent = None

    def add_space(self, space: Space) -> None:
        """Take every item of ``space`` (a view built, or a namespace attached, after the fact)."""
        labels, vectors = space.vectors.items()
        self.put(space, space.labels, labels, vectors)

    def remove(self, space: Space, label: int) -> None:
        slot = self.slots.get(space.uid, {}).pop(label, None)
        if slot is not None:
            self.rec[slot] = np.nan
            self.has_vector[slot] = False
            self.lexical.delete(str(slot))
            self.vectors.delete(np.array([slot], dtype=np.int64))
            self._adjacent = None

    def drop(self, space: Space) -> None:
        """Forget every item of ``space`` (a namespace dropped or detached)."""
        slots = self.slots.pop(space.uid, {})
        self.spaces.pop(space.uid, None)
        for slot in slots.values():
            self.rec[slot] = np.nan
            self.has_vector[slot] = False
            self.lexical.delete(str(slot))
        if slots:
            self.vectors.delete(np.fromiter(slots.values(), dtype=np.int64, count=len(slots)))
        self._adjacent = None

    def adjacent(self) -> tuple[np.ndarray, np.ndarray]:
        """By slot: the slot of the message before and after it in its conversation (seq -+ 1;
        -1: none), as :meth:`Space.neighbours` finds them."""
        if self._adjacent is None:
            size = len(self.rec)
            before = np.full(size, -1, dtype=np.int64)
            after = before.copy()
            live = np.flatnonzero(~np.isnan(self.rec))
            order = live[np.lexsort((self.rec[live], self.uid[live]))]
            step = np.flatnonzero((np.diff(self.rec[order]) == 1.0) & (np.diff(self.uid[order]) == 0))
            after[order[step]] = order[step + 1]
            before[order[step + 1]] = order[step]
            self._adjacent = (before, after)
        return self._adjacent


class FlatViews:
    """A shard's views, by (app, kind), kept in step with its namespaces (module docstring)."""

    def __init__(self, dim: int, fit: Fit) -> None:
        self.dim = dim
        self._fit = fit
        self._views: dict[tuple[str, str], FlatView] = {}

    def view(self, app: str, kind: str, spaces: Iterable[Space]) -> FlatView:
        """The view of (app, kind), built from ``spaces`` (all of them) if there is none yet."""
        view = self._views.get((app, kind))
        if view is None:
            view = self._views[(app, kind)] = FlatView(self.dim, kind == "conv")
            for space in spaces:
                view.add_space(space)
            view.vectors = self._fit(view.vectors)
        return view

    def _of(self, space: Space) -> FlatView | None:
        return self._views.get((space.namespace.app, space.namespace.kind)) if self._views else None

    def put(self, space: Space, docs: list[str], labels: np.ndarray | None, vectors: np.ndarray | None) -> None:
        view = self._of(space)
        if view is not None:
            view.put(space, docs, labels, vectors)
            view.vectors = self._fit(view.vectors)

    def attach(self, space: Space) -> None:
        view = self._of(space)
        if view is not None:
            view.add_space(space)
            view.vectors = self._fit(view.vectors)

    def remove(self, space: Space, label: int) -> None:
        view = self._of(space)
        if view is not None:
            view.remove(space, label)

    def drop(self, space: Space) -> None:
        view = self._of(space)
        if view is not None:
            view.drop(space)
            view.vectors = self._fit(view.vectors)

    def clear(self, dim: int | None = None) -> None:
        """Drop every view (a model staged or cut over); ``dim``: the active model's from now on."""
        self._views.clear()
        self.dim = dim if dim is not None else self.dim


def search_flat(
    view: FlatView, query: Any, vector: np.ndarray | None, depth: int, config: IndexConfig
) -> tuple[list[ShardHit], Bm25Stats]:
    """:func:`memray.index.search.search_spaces` of every namespace in ``view`` (relevance
    scoring, no window), over arrays indexed by slot."""
    mode = query.mode
    terms = list(dict.fromkeys(index_terms(query.text))) if mode != "vector" else []
    stats = view.lexical.stats(terms)
    ideal = ideal_bm25(terms, stats)
    size = len(view.rec)
    lexical = view.lexical.dense_scores(terms, stats, size) if terms else np.zeros(size)
    vec = np.zeros(len(lexical))
    index = view.vectors
    if vector is not None and len(index):
        if isinstance(index, ExactIndex):
            slots, sims = index.scan(vector)
        else:
            found, found_sims = index.search(vector, max(depth, 1))
            wanted = np.flatnonzero((lexical > 0.0) & view.has_vector[: len(lexical)])
            slots = np.concatenate([found[0], wanted])
            sims = np.concatenate([found_sims[0], index.get(wanted) @ vector if len(wanted) else np.zeros(0)])
        vec[slots] = vector_scores(sims, query.threshold)
    candidate = _candidates(mode, lexical, vec)
    scores = fuse_arrays(mode, lexical, vec, ideal, query.vector_weight)
    if view.conv and config.neighbour_weight > 0.0:
        before, after = view.adjacent()
        if vector is not None and isinstance(index, HnswIndex) and mode != "lexical":
            near = np.unique(np.concatenate([before[candidate], after[candidate]]))
            near = near[near >= 0]
            near = near[~candidate[near] & view.has_vector[near]]
            if len(near):
                vec[near] = vector_scores(index.get(near) @ vector, query.threshold)
                candidate = _candidates(mode, lexical, vec)
                scores = fuse_arrays(mode, lexical, vec, ideal, query.vector_weight)
        padded = np.append(np.where(candidate, scores, 0.0), 0.0)  # slot -1 reads the 0 at the end
        support = np.maximum(padded[before], padded[after])
        boost = candidate & (scores > 0.0) & (support > 0.0)
        scores = np.where(boost, scores + config.neighbour_weight * support * (1.0 - scores), scores)
    floor = query.min_score
    keep = candidate & (scores > 0.0 if floor is None else scores >= floor)
    kept = _top(view, np.flatnonzero(keep), scores, query.k)
    if floor is not None and floor <= 0.0:  # no floor: the newest others at 0
        rest = np.flatnonzero(~candidate & ~np.isnan(view.rec))
        kept += _top(view, rest, np.zeros(len(view.rec)), query.k)
    best = heapq.nsmallest(max(0, query.k), kept, key=lambda t: (-t[0], -t[1], t[2], tuple(t[3].namespace)))
    hits = [ShardHit(s.namespace, doc, score, rec, s.payload.get(doc, "")) for score, rec, doc, s in best]
    return hits, stats


def _candidates(mode: str, lexical: np.ndarray, vec: np.ndarray) -> np.ndarray:
    if mode == "lexical":
        return lexical > 0.0
    if mode == "vector":
        return vec > 0.0
    return (lexical > 0.0) | (vec > 0.0)


def _top(view: FlatView, slots: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[float, float, str, Space]]:
    """The ``k`` best of ``slots`` by (score, recency), with every one tied with the last, as
    (score, recency, doc_id, space)."""
    if k <= 0 or not len(slots):
        return []
    values = scores[slots]
    if len(slots) > k:
        top = values >= np.partition(values, len(values) - k)[len(values) - k]
        slots, values = slots[top], values[top]
    rec = view.rec[slots]
    if len(slots) > k:
        order = np.lexsort((-rec, -values))
        last = order[k - 1]
        take = np.union1d(order[:k], np.flatnonzero((values == values[last]) & (rec == rec[last])))
        slots, values, rec = slots[take], values[take], rec[take]
    out = []
    for slot, score, recency in zip(slots.tolist(), values.tolist(), rec.tolist()):
        space = view.spaces[int(view.uid[slot])]
        out.append((score, recency, space.docs[int(view.label[slot])], space))
    return out


def rebuild(target: ExactIndex | HnswIndex, source: ExactIndex | HnswIndex) -> ExactIndex | HnswIndex:
    """``target`` filled with every item of ``source`` (a promotion or demotion)."""
    labels, vectors = source.items()
    if len(labels):
        target.add(labels, vectors)
    return target
