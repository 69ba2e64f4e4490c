"""`FlatView`: every item of one (app, kind) on a shard in one vector index and one lexical index,
so an app-wide search is one scan (or one HNSW query) and one BM25 pass, not a walk over the
app's namespaces. A view is a :class:`~memray.index.scorer.Source`: the scoring kernel scores it
as it scores a namespace.

A view numbers the items it holds with *slots* (a counter, like a namespace's labels; a slot
maps to the item's namespace uid and label). Its vector index is exact while it holds fewer than
``IndexConfig.app_exact_threshold`` vectors and HNSW from there
(:meth:`~memray.index.spaces.Spaces.fit`); its lexical index holds the same term counts as the
namespaces', so scores are those of a search of the same namespaces (the BM25 statistics of all
of them, fusion, neighbour support).

Views are derived state: built on the first app-wide search of an (app, kind), kept in step with
every upsert, delete and dropped namespace from then on (:class:`FlatViews`, which the shard's
:class:`~memray.index.spaces.Spaces` holds), dropped whole when a model is staged or cut over
(rebuilt on the next app search), never snapshotted. They cost a second copy of the app's vectors
and postings in the shard's memory, only for apps searched app-wide. A search of the retired
model reads the namespaces instead (a view holds the active model's vectors only).

Measured (``benchmarks/search_micro.py``, 50,000 messages in 5,000 conversations, one shard,
hybrid, load average 6-9): the namespace walk took ~570 ms p50, the view ~24 ms (~10 ms of it the
scan of 50,000 x 256 floats); raw numpy over the same vectors ~7 ms. Building a view costs ~20 µs
an item, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from memray.index.base import ShardHit
from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex
from memray.index.lexical import LexicalIndex
from memray.index.space import Space

__all__ = ["FlatView", "FlatViews"]

Fit = Callable[[ExactIndex | HnswIndex], ExactIndex | HnswIndex]
Labelled = Sequence[int] | np.ndarray  # labels, as a list or an int64 array
Rows = Sequence[np.ndarray] | np.ndarray  # normalised vectors, as a list of rows or a matrix


class FlatView:
    """The items of one (app, kind) on a shard (module docstring)."""

    def __init__(self, dim: int, conv: bool) -> None:
        self.conv = conv  # conversation messages: neighbour support applies
        self.slots: dict[int, dict[int, int]] = {}  # uid -> label -> slot
        self.spaces: dict[int, Space] = {}  # uid -> its namespace
        self.uid = np.zeros(0, dtype=np.int64)  # by slot
        self.label = np.zeros(0, dtype=np.int64)
        self.rec = np.zeros(0)  # recency by slot, NaN: no item
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
            self.uid[slot], self.label[slot] = space.uid, label
            self.spaces[space.uid] = space
        return slot

    def put(self, space: Space, docs: Iterable[str], labels: Labelled | None, vectors: Rows | None) -> None:
        """Take ``docs`` of ``space`` as the space now holds them (recency, terms), and the given
        normalised ``vectors`` of ``labels`` (a matrix or a list of rows; None: none changed)."""
        for doc in docs:
            label = space.labels[doc]
            slot = self._slot(space, label)
            self.rec[slot] = space.rec[label]
            self.lexical.add_terms(str(slot), space.lexical.terms(doc) or {})
        if labels is not None and vectors is not None and len(labels):
            slots = np.array([self._slot(space, int(x)) for x in labels], dtype=np.int64)
            self.vectors.add(slots, vectors)
        self._adjacent = None

    def add_space(self, space: Space) -> None:
        """Take every item of ``space`` (a view built, or a namespace attached, after the fact)."""
        labels, vectors = space.vectors.items()
        self.put(space, space.labels, labels, vectors)

    def remove(self, space: Space, label: int) -> None:
        slot = self.slots.get(space.uid, {}).pop(label, None)
        if slot is not None:
            self.rec[slot] = np.nan
            self.lexical.delete(str(slot))
            self.vectors.delete(np.array([slot], dtype=np.int64))
            self._adjacent = None

    def drop(self, space: Space) -> None:
        """Forget every item of ``space`` (a namespace dropped or detached)."""
        slots = self.slots.pop(space.uid, {})
        self.spaces.pop(space.uid, None)
        for slot in slots.values():
            self.rec[slot] = np.nan
            self.lexical.delete(str(slot))
        if slots:
            self.vectors.delete(np.fromiter(slots.values(), dtype=np.int64, count=len(slots)))
        self._adjacent = None

    # -- what the scoring kernel reads (memray.index.scorer.Source), by slot -----------------
    @property
    def linked(self) -> bool:
        return self.conv

    def vectors_of(self, retired: bool) -> ExactIndex | HnswIndex | None:
        return None if retired else self.vectors

    def columns_of(self, slots: np.ndarray) -> np.ndarray:
        """Each slot's columns, as its namespace holds them (NaN for a slot without an item)."""
        out = np.full((len(slots), 3), np.nan)
        for uid, mine in self._by_space(slots):
            out[mine] = self.spaces[uid].columns.rows(self.label[slots[mine]])
        return out

    def text_ids(self, slots: np.ndarray) -> np.ndarray:
        """Each slot's text identity, as its namespace holds it (0 for a slot without an item)."""
        out = np.zeros(len(slots), dtype=np.int64)
        for uid, mine in self._by_space(slots):
            out[mine] = self.spaces[uid].text_ids(self.label[slots[mine]])
        return out

    def _by_space(self, slots: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """The positions in ``slots`` of live items, by the uid of their namespace."""
        at = np.flatnonzero(~np.isnan(self.rec[slots]))
        uids = self.uid[slots[at]]
        return [(uid, at[uids == uid]) for uid in np.unique(uids).tolist()]

    def hit(self, slot: int, score: float, recency: float) -> ShardHit:
        space = self.spaces[int(self.uid[slot])]
        doc = space.docs[int(self.label[slot])]
        return ShardHit(space.namespace, doc, score, recency, space.payload.get(doc, ""))

    def adjacent(self) -> tuple[np.ndarray, np.ndarray]:
        """By slot: the slot of the message at seq - 1 and at seq + 1 in its conversation (-1:
        none), as :meth:`Space.adjacent` finds them."""
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

    def put(self, space: Space, docs: list[str], labels: Labelled | None, vectors: Rows | None) -> None:
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
