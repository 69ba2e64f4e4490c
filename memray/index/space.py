"""`Space`: one namespace of a shard — its label map, recency, payloads, lexical and vector index;
`Spaces`: a shard's namespaces, the model versions of their vectors, and exact/HNSW promotion.

Doc ids (message or entry ids) map to int64 labels through a per-namespace dict (a counter, never
a hash, so labels cannot collide). Each item keeps a recency float (the seq of a message, the
timestamp of an entry) for tie-breaks; in conversation namespaces recency is the seq, and
``by_recency`` finds a message's neighbours (seq - 1, seq + 1) for neighbour support.
``columns`` keeps each item's creation time, simulation time and importance, by label, for time
windows and stream scoring (:mod:`memray.index.columns`).
``stamp`` is the highest indexing stamp of any upsert applied here: a conversation host stamps
its upserts, and read-your-writes compares stamps (see :mod:`memray.conversation.tail`).

A namespace's vector index is an :class:`ExactIndex` while it has fewer than
``IndexConfig.exact_threshold`` vectors, promoted to an :class:`HnswIndex` once it reaches it, and
demoted back to exact when deletes bring it under half the threshold (the hysteresis stops
flapping): :meth:`Spaces.fit`.

Model versions (re-embedding, see ``jobs/backfill_embeddings.py``): a shard answers from exactly
one *active* model. :meth:`Spaces.stage_begin` opens an empty *staged* vector index per namespace
for a new model next to the active one; :meth:`Spaces.stage_rows` (rows from the store) and the
shard's upserts with the staged model's id fill it while searches keep using the active one;
:meth:`Spaces.cutover` swaps it in in one step (one actor call) and keeps the old model's indexes
as *retired*, so a query embedded with the old model (a driver that has not switched yet) is
answered from the old indexes, never from a mix; :meth:`Spaces.retire_release` frees them.
Labels, texts, recency and payloads are shared by every model version of a namespace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from memray.config import IndexConfig
from memray.errors import ModelMismatchError, ValidationError
from memray.ids import Namespace
from memray.index.base import IndexItem, ShardHit, normalise
from memray.index.columns import ItemColumns, same_columns
from memray.index.exact import ExactIndex
from memray.index.flat import FlatViews, rebuild
from memray.index.hnsw import HnswIndex
from memray.index.lexical import LexicalIndex
from memray.store.base import IndexRow
from memray.text import index_terms

__all__ = ["Space", "Spaces", "normalise"]


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
        self.dirty = True
        self.rec = np.zeros(0)  # recency by label, NaN where no item: scoring reads it in bulk
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

    def set_recency(self, doc_id: str, recency: float) -> None:
        old = self.recency.get(doc_id)
        self.recency[doc_id] = recency
        label = self.labels[doc_id]
        if label >= len(self.rec):
            grown = np.full(max(8, 2 * len(self.rec), label + 1), np.nan)
            grown[: len(self.rec)] = self.rec
            self.rec = grown
        self.rec[label] = recency
        self._adjacent = None
        if self.by_recency is not None:
            if old is not None and self.by_recency.get(old) == doc_id:
                del self.by_recency[old]
            self.by_recency[recency] = doc_id

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

    def hit(self, label: int, score: float, recency: float) -> ShardHit:
        doc = self.docs[label]
        return ShardHit(self.namespace, doc, score, recency, self.payload.get(doc, ""))

    def remove(self, doc_id: str) -> bool:
        label = self.labels.pop(doc_id, None)
        if label is None:
            return False
        del self.docs[label]
        self.columns.clear(label)
        recency = self.recency.pop(doc_id)
        self.rec[label] = np.nan
        self._adjacent = None
        if self.by_recency is not None and self.by_recency.get(recency) == doc_id:
            del self.by_recency[recency]
        self.payload.pop(doc_id, None)
        self.lexical.delete(doc_id)
        for index in (self.vectors, self.staged, self.retired):
            if index is not None:
                index.delete(np.array([label], dtype=np.int64))
        self.dirty = True
        return True


class Spaces(Mapping[Namespace, Space]):
    """A shard's namespaces (a read-only mapping; :meth:`make`, :meth:`attach` and :meth:`detach`
    change it), found by namespace or by user, with the model versions of their vectors (module
    docstring). ``label`` names the shard in errors."""

    def __init__(self, label: str, model_id: str, dim: int, config: IndexConfig, num_threads: int = 1) -> None:
        self.label = label
        self.model_id = model_id  # the active model, and its dim
        self.dim = dim
        self.config = config
        self.num_threads = num_threads
        self.next_uid = 0
        self.stage: tuple[str, int] | None = None  # (model_id, dim) being built
        self.retired: tuple[str, int] | None = None  # (model_id, dim) replaced by the last cutover
        self._by_ns: dict[Namespace, Space] = {}
        self.flats = FlatViews(dim, lambda index: self.fit(index, config.app_exact_threshold))  # memray.index.flat
        self._by_user: dict[tuple[str, str], set[Namespace]] = {}

    # -- the mapping ------------------------------------------------------------------------
    def __getitem__(self, ns: Namespace) -> Space:
        return self._by_ns[ns]

    def __iter__(self) -> Iterator[Namespace]:
        return iter(self._by_ns)

    def __len__(self) -> int:
        return len(self._by_ns)

    def of_user(self, app: str, user_id: str) -> list[Namespace]:
        return list(self._by_user.get((app, user_id), ()))

    def make(self, ns: Namespace) -> Space:
        """The space of ``ns``, made (empty, with a staged index while a model is staged) if new."""
        space = self._by_ns.get(ns)
        if space is None:
            space = Space(ns, self.next_uid, self.dim)
            if self.stage is not None:
                space.staged = ExactIndex(self.stage[1])
            self.next_uid += 1
            self.attach(space)
        return space

    def attach(self, space: Space) -> None:
        self._by_ns[space.namespace] = space
        self.flats.attach(space)
        ns = space.namespace
        self._by_user.setdefault((ns.app, ns.user_id), set()).add(ns)

    def detach(self, ns: Namespace) -> None:
        self.flats.drop(self._by_ns.pop(ns))
        user = self._by_user[(ns.app, ns.user_id)]
        user.discard(ns)
        if not user:
            del self._by_user[(ns.app, ns.user_id)]

    def remove(self, space: Space, doc_id: str) -> bool:
        """:meth:`Space.remove`, keeping the flat views in step."""
        label = space.labels.get(doc_id)
        if label is None or not space.remove(doc_id):
            return False
        self.flats.remove(space, label)
        return True

    # -- promotion --------------------------------------------------------------------------
    def resize(self, space: Space) -> None:
        space.vectors = self.fit(space.vectors)

    def fit(self, index: ExactIndex | HnswIndex, threshold: int | None = None) -> ExactIndex | HnswIndex:
        """Promote to HNSW at the threshold (default: the namespace one); demote to exact under half of it."""
        n, dim = len(index), index.dim
        threshold = self.config.exact_threshold if threshold is None else threshold
        if isinstance(index, ExactIndex) and n >= threshold:
            return rebuild(
                HnswIndex(
                    dim,
                    m=self.config.hnsw_m,
                    ef_construction=self.config.hnsw_ef_construction,
                    ef=self.config.hnsw_ef,
                    compact_ratio=self.config.compact_ratio,
                    num_threads=self.num_threads,
                    capacity=2 * n,
                ),
                index,
            )
        if isinstance(index, HnswIndex) and n < threshold // 2:
            return rebuild(ExactIndex(dim, capacity=max(16, n)), index)
        return index

    # -- model versions ---------------------------------------------------------------------
    def dim_of(self, model_id: str) -> int:
        """The dim of ``model_id``'s index set here: the active one, or the staged one."""
        if model_id == self.model_id:
            return self.dim
        if self.stage is not None and model_id == self.stage[0]:
            return self.stage[1]
        raise ModelMismatchError(
            f"{self.label} indexes model {self.model_id!r}, got vectors of {model_id!r}; "
            "re-embed with the index's model (run the backfill job)"
        )

    def upsert(self, space: Space, group: list[tuple[IndexItem, Any]], staged: bool = False) -> None:
        """Write checked ``(item, vector)`` pairs into ``space`` (the staged indexes if ``staged``)."""
        labels: list[int] = []
        vectors: list[Any] = []
        for item, vec in group:
            label = space.label_of(item.doc_id)
            if item.recency == item.recency or item.doc_id not in space.recency:  # NaN: unknown, keep it
                space.set_recency(item.doc_id, item.recency if item.recency == item.recency else 0.0)
            if item.columns is not None:
                space.columns.set(label, item.columns)
            space.stamp = max(space.stamp, item.stamp)
            if item.payload:
                space.payload[item.doc_id] = item.payload
            space.lexical.add(item.doc_id, item.text)
            if vec is not None:
                labels.append(label)
                vectors.append(vec)
        if labels and staged:
            assert space.staged is not None and self.stage is not None
            space.staged.add(np.array(labels, dtype=np.int64), normalise(np.stack(vectors), self.stage[1]))
            space.staged = self.fit(space.staged)
        elif labels:
            labs, vecs = np.array(labels, dtype=np.int64), normalise(np.stack(vectors), self.dim)
            space.vectors.add(labs, vecs)
        if not staged:
            self.flats.put(space, [item.doc_id for item, _ in group], *((labs, vecs) if labels else (None, None)))
        space.dirty = True
        self.resize(space)

    def watched(
        self, watch: tuple[tuple[Namespace, tuple[int, ...]], ...]
    ) -> tuple[dict[Namespace, int], dict[Namespace, list[int]]]:
        """The indexing stamp of each watched namespace, and which of the given seqs it holds."""
        stamps: dict[Namespace, int] = {}
        held: dict[Namespace, list[int]] = {}
        for raw, seqs in watch:
            ns = Namespace(*raw)
            space = self.get(ns)
            stamps[ns] = space.stamp if space is not None else 0
            by_seq = space.by_recency if space is not None and space.by_recency is not None else {}
            held[ns] = [s for s in seqs if float(s) in by_seq]
        return stamps, held

    def stale(self, ns: Namespace, row: IndexRow, vector: bool | None = None) -> bool:
        """Whether ``row`` (the store's version) differs from what is held: unknown, another
        recency, other columns, a missing vector (``vector``: one is due; default: the row has one)
        or other text."""
        space = self.get(ns)
        label = space.labels.get(row.doc_id) if space is not None else None
        if space is None or label is None:
            return True
        if space.recency[row.doc_id] != float(row.recency):
            return True
        if row.columns is not None and not same_columns(space.columns.get(label), row.columns):
            return True
        if (row.vector is not None if vector is None else vector) and label not in space.vectors:
            return True
        return space.lexical.terms(row.doc_id) != dict(Counter(index_terms(row.text)))

    def stage_begin(self, model_id: str, dim: int) -> bool:
        """Open an empty staged index set for ``model_id`` (replacing any staged one). Returns
        False and does nothing if ``model_id`` is already active (a finished cutover)."""
        if model_id == self.model_id:
            return False
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValidationError("dim", dim, "must be a positive integer")
        self.stage = (model_id, dim)
        for space in self.values():
            space.staged = ExactIndex(dim)
        return True

    def stage_rows(self, rows: list[IndexRow], model_id: str) -> int:
        """Add the staged model's vectors of ``rows`` (from ``store.scan_index_rows``). An item the
        shard does not hold yet is added with its text and recency. Returns how many."""
        if self.stage is None or self.stage[0] != model_id:
            raise ModelMismatchError(f"{self.label} has no staged index for model {model_id!r}; call stage_begin first")
        dim = self.stage[1]
        self.flats.clear()  # rows may add items: the views are rebuilt on the next app search
        groups: dict[Namespace, list[IndexRow]] = {}
        for row in rows:
            groups.setdefault(Namespace(*row.namespace), []).append(row)
        for ns, group in groups.items():
            space = self.make(ns)
            for row in group:
                if row.doc_id not in space.labels:
                    space.label_of(row.doc_id)
                    space.set_recency(row.doc_id, float(row.recency))
                    if row.columns is not None:
                        space.columns.set(space.labels[row.doc_id], row.columns)
                    space.lexical.add(row.doc_id, row.text)
            labels = np.array([space.labels[r.doc_id] for r in group], dtype=np.int64)
            vectors = normalise(np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in group]), dim)
            if vectors.shape[1] != dim:
                raise ModelMismatchError(
                    f"vectors of dim {vectors.shape[1]} do not fit the staged model {model_id!r} (dim {dim})"
                )
            assert space.staged is not None
            space.staged.add(labels, vectors)
            space.staged = self.fit(space.staged)
            space.dirty = True
        return len(rows)

    def cutover(self, model_id: str) -> bool:
        """Make the staged ``model_id`` active in one step; see :meth:`VectorShard.cutover`."""
        if model_id == self.model_id:
            return False
        if self.stage is None or self.stage[0] != model_id:
            raise ModelMismatchError(f"{self.label} has no staged index for model {model_id!r}; stage it first")
        dim = self.stage[1]
        for space in self.values():
            space.retired, space.vectors = space.vectors, space.staged or ExactIndex(dim)
            space.staged = None
            space.dirty = True
        self.retired = (self.model_id, self.dim)
        self.model_id, self.dim = model_id, dim
        self.flats.clear(dim)
        self.stage = None
        return True

    def stage_abort(self) -> None:
        """Drop the staged index set, if any."""
        self.stage = None
        for space in self.values():
            space.staged = None

    def retire_release(self) -> None:
        """Free the indexes of the model replaced by the last cutover."""
        self.retired = None
        for space in self.values():
            space.retired = None
