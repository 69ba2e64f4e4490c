"""`Space`: one namespace of a shard — its label map, recency, payloads, lexical and vector index,
and the writes that change them.

Doc ids (message or entry ids) map to int64 labels through a per-namespace dict (a counter, never
a hash, so labels cannot collide). Each item keeps a recency float (the seq of a message, the
timestamp of an entry) for tie-breaks; in conversation namespaces recency is the seq, and
``by_recency`` finds a message's neighbours (seq - 1, seq + 1) for neighbour support.
``columns`` keeps each item's creation time, simulation time and importance, by label, for time
windows and stream scoring (:mod:`memray.index.columns`).
``stamp`` is the highest indexing stamp of any upsert applied here: a conversation host stamps
its upserts, and read-your-writes compares stamps (see :mod:`memray.conversation.read_your_writes`).

A space holds the vectors of the shard's *active* model, and while a re-embedding runs those of
the *staged* one, and after a cutover those of the *retired* one, until released. Labels, texts,
recency and payloads are shared by every model version. Which model is which, and when a vector
index is promoted to HNSW or demoted to exact, is the shard's (:mod:`memray.index.spaces`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memray.ids import Namespace
from memray.index.base import IndexItem, ShardHit, normalise
from memray.index.columns import ItemColumns, same_columns
from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex
from memray.index.lexical import LexicalIndex
from memray.store.base import IndexRow
from memray.text import term_counts, text_id

__all__ = ["Space"]


class Space:
    """One namespace: label map, recency, lexical index and vector index."""

    def __init__(self, namespace: Namespace, uid: int, dim: int) -> None:
        self.namespace = namespace
        self.uid = uid
        self.labels: dict[str, int] = {}
        self.docs: dict[int, str] = {}
        self.recency: dict[str, float] = {}
        self.by_recency: dict[float, str] | None = {} if namespace.kind == "conv" else None
        self.payload: dict[str, str] = {}
        self.columns = ItemColumns()
        self.next_label = 0
        self.stamp = 0
        self.vectors: ExactIndex | HnswIndex = ExactIndex(dim)
        self.staged: ExactIndex | HnswIndex | None = None  # the next model's vectors (not snapshotted)
        self.retired: ExactIndex | HnswIndex | None = None  # the previous model's, until released
        self.lexical = LexicalIndex(self.labels.__getitem__)
        # Since the last snapshot: ``dirty`` if anything changed; ``rewritten`` if anything
        # changed in place (a doc replaced or removed, vectors rebuilt or cut over), which a delta
        # snapshot of the appended docs (:meth:`appended`) cannot hold. ``snapped``: the labels
        # below it were in the last snapshot (labels are a counter, never reused).
        self.dirty = True
        self.rewritten = False
        self.snapped = 0
        self.rec = np.zeros(0)  # recency by label, NaN where no item: scoring reads it in bulk
        self.tid = np.zeros(0, dtype=np.int64)  # text identity by label (memray.text.text_id; 0: unknown)
        self._adjacent: tuple[np.ndarray, np.ndarray] | None = None  # by label: the label before, after (-1)

    def __len__(self) -> int:
        return len(self.labels)

    def label_of(self, doc_id: str) -> int:
        label = self.labels.get(doc_id)
        if label is None:
            label = self.next_label
            self.next_label += 1
            self.labels[doc_id] = label
            self.docs[label] = doc_id
        return label

    def appended(self) -> list[str]:
        """The docs first written since the last snapshot, oldest first."""
        return [self.docs[label] for label in range(self.snapped, self.next_label) if label in self.docs]

    def snapshotted(self) -> None:
        """Mark everything held as in the snapshot just written."""
        self.dirty = self.rewritten = False
        self.snapped = self.next_label

    def set_recency(self, doc_id: str, recency: float) -> None:
        old = self.recency.get(doc_id)
        self.recency[doc_id] = recency
        label = self.labels[doc_id]
        self.rec = _fit(self.rec, label, np.nan)
        self.rec[label] = recency
        if self.by_recency is None:
            self._adjacent = None
            return
        appended = old is None and recency not in self.by_recency
        if old is not None and self.by_recency.get(old) == doc_id:
            del self.by_recency[old]
        self.by_recency[recency] = doc_id
        if appended and self._adjacent is not None:
            self._link(label, recency)
        else:
            self._adjacent = None

    def set_text_id(self, label: int, tid: int) -> None:
        """The identity of ``label``'s text (:func:`memray.text.text_id`), which a search asking
        for distinct texts merges by."""
        self.tid = _fit(self.tid, label, 0)
        self.tid[label] = tid

    def _set_text(self, doc_id: str, label: int, text: str) -> None:
        """What the shard keeps of an item's text: its index terms and its identity."""
        self.lexical.add(doc_id, text)
        self.set_text_id(label, text_id(text))

    def _link(self, label: int, recency: float) -> None:
        """A new message at ``recency`` joins the cached adjacency (:meth:`adjacent`) in place:
        a conversation's shard gets a few messages per tick, and rebuilding the adjacency of its
        whole history for them made every search after a write sort that history again."""
        assert self._adjacent is not None and self.by_recency is not None
        before, after = self._adjacent
        if len(before) < len(self.rec):
            pad = np.full(len(self.rec) - len(before), -1, dtype=np.int64)
            before, after = np.concatenate([before, pad]), np.concatenate([after, pad])
            self._adjacent = (before, after)
        prev, succ = self.by_recency.get(recency - 1.0), self.by_recency.get(recency + 1.0)
        before[label] = after[label] = -1
        if prev is not None:
            before[label] = p = self.labels[prev]
            after[p] = label
        if succ is not None:
            after[label] = n = self.labels[succ]
            before[n] = label

    # -- writes -----------------------------------------------------------------------------
    def upsert(self, group: list[tuple[IndexItem, Any]], staged: bool = False) -> tuple[list[int], list[Any]]:
        """Write checked ``(item, vector)`` pairs (:func:`~memray.index.base.checked_items`:
        vectors L2-normalised already): each item's label, recency (an unknown, NaN, recency
        keeps the one held), columns, payload and terms, the highest stamp, and the vectors into
        the active index (the staged one if ``staged``). Returns the labels and the vectors
        written (empty if no item had a vector). An exact index takes the rows as they are (no
        matrix made for the group): a shard's upsert calls this per namespace of its batch, with
        a message or two each."""
        labels_of, held, snapped = self.labels, self.recency, self.snapped
        labels: list[int] = []
        vectors: list[Any] = []
        stamp = self.stamp
        for item, vector in group:
            doc = item.doc_id
            label = labels_of.get(doc)
            if label is None:
                label = self.label_of(doc)
            elif label < snapped:
                self.rewritten = True
            recency = item.recency
            if recency == recency or doc not in held:  # (NaN: unknown)
                self.set_recency(doc, recency if recency == recency else 0.0)
            if item.columns is not None:
                self.columns.set(label, item.columns)
            if item.stamp > stamp:
                stamp = item.stamp
            if item.payload:
                self.payload[doc] = item.payload
            self._set_text(doc, label, item.text)
            if vector is not None:
                labels.append(label)
                vectors.append(vector)
        self.stamp = stamp
        self.dirty = True
        if labels:
            index = self.staged if staged else self.vectors
            assert index is not None, f"{self.namespace}: a staged upsert, and no model is staged"
            if isinstance(index, ExactIndex):
                index.put_rows(labels, vectors)
            else:
                index.add(labels, np.stack(vectors))
        return labels, vectors

    def add_staged(self, rows: list[IndexRow], dim: int) -> None:
        """Take the staged model's vectors of ``rows`` (the store's rows of this namespace, each
        with a vector of ``dim``). An item not held yet is added with its text, recency and
        columns first."""
        for row in rows:
            if row.doc_id not in self.labels:
                label = self.label_of(row.doc_id)
                self.set_recency(row.doc_id, float(row.recency))
                if row.columns is not None:
                    self.columns.set(label, row.columns)
                self._set_text(row.doc_id, label, row.text)
        labels = np.array([self.labels[row.doc_id] for row in rows], dtype=np.int64)
        vectors = normalise(np.stack([np.asarray(row.vector, dtype=np.float32).reshape(-1) for row in rows]), dim)
        assert self.staged is not None, f"{self.namespace}: staged rows, and no model is staged"
        self.staged.add(labels, vectors)
        self.dirty = self.rewritten = True

    def cutover(self, dim: int) -> None:
        """The staged vectors become the active ones (an empty index of ``dim`` if none were
        staged); the active ones are kept as the retired ones."""
        self.retired = self.vectors
        self.vectors = self.staged if self.staged is not None else ExactIndex(dim)
        self.staged = None
        self.dirty = self.rewritten = True

    def remove(self, doc_id: str) -> bool:
        label = self.labels.pop(doc_id, None)
        if label is None:
            return False
        del self.docs[label]
        self.columns.clear(label)
        recency = self.recency.pop(doc_id)
        self.rec[label] = np.nan
        self.tid[label] = 0
        self._adjacent = None
        if self.by_recency is not None and self.by_recency.get(recency) == doc_id:
            del self.by_recency[recency]
        self.payload.pop(doc_id, None)
        self.lexical.delete(doc_id)
        for index in (self.vectors, self.staged, self.retired):
            if index is not None:
                index.delete(np.array([label], dtype=np.int64))
        self.dirty = self.rewritten = True
        return True

    # -- reads ------------------------------------------------------------------------------
    def holds(self, row: IndexRow, vector: bool) -> bool:
        """Whether ``row`` (the store's version) is held as it is: the same recency, columns and
        text (its identity and terms), and a vector if ``vector`` (one is due)."""
        label = self.labels.get(row.doc_id)
        if label is None or self.recency[row.doc_id] != float(row.recency):
            return False
        if row.columns is not None and not same_columns(self.columns.get(label), row.columns):
            return False
        if vector and label not in self.vectors:
            return False
        held_id = int(self.tid[label])  # (0: loaded from a snapshot written before text ids)
        return held_id == text_id(row.text) and self.lexical.terms(row.doc_id) == term_counts(row.text)

    def adjacent(self) -> tuple[np.ndarray, np.ndarray]:
        """By label: the label of the message at seq - 1 and at seq + 1 (-1: none, and always
        outside conversation namespaces), sized ``len(self.rec)``; cached until the next write."""
        if self._adjacent is None:
            before = np.full(len(self.rec), -1, dtype=np.int64)
            after = before.copy()
            if self.by_recency:
                by_recency = self.by_recency
                seqs = np.fromiter(by_recency.keys(), dtype=np.float64, count=len(by_recency))
                labs = np.fromiter((self.labels[d] for d in by_recency.values()), dtype=np.int64, count=len(seqs))
                order = np.argsort(seqs, kind="stable")
                seqs, labs = seqs[order], labs[order]
                step = np.flatnonzero(np.diff(seqs) == 1.0)
                after[labs[step]] = labs[step + 1]
                before[labs[step + 1]] = labs[step]
            self._adjacent = (before, after)
        return self._adjacent

    # -- what the scoring kernel reads (memray.index.scorer.Source) -----------------------
    @property
    def linked(self) -> bool:
        """Conversation messages: neighbour support by seq applies."""
        return self.by_recency is not None

    def vectors_of(self, retired: bool) -> ExactIndex | HnswIndex | None:
        return self.retired if retired else self.vectors

    def columns_of(self, labels: np.ndarray) -> np.ndarray:
        return self.columns.rows(labels)

    def text_ids(self, labels: np.ndarray) -> np.ndarray:
        ids: np.ndarray = self.tid[labels]  # (grown with ``rec``: every label an item has fits)
        return ids

    def hit(self, label: int, score: float, recency: float) -> ShardHit:
        doc = self.docs[label]
        return ShardHit(self.namespace, doc, score, recency, self.payload.get(doc, ""))


def _fit(by_label: np.ndarray, label: int, fill: float) -> np.ndarray:
    """``by_label``, or a copy grown (doubling, new places ``fill``) so that ``label`` fits."""
    if label < len(by_label):
        return by_label
    grown = np.full(max(8, 2 * len(by_label), label + 1), fill, dtype=by_label.dtype)
    grown[: len(by_label)] = by_label
    return grown
