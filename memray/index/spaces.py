"""`Spaces`: a shard's namespaces (:class:`~memray.index.space.Space`), the app-wide flat views
kept in step with them, exact/HNSW promotion, and the model versions of their vectors.

A namespace's vector index is an :class:`ExactIndex` while it has fewer than
``IndexConfig.exact_threshold`` vectors, promoted to an :class:`HnswIndex` once it reaches it, and
demoted back to exact when deletes bring it under half the threshold (the hysteresis stops
flapping): :meth:`Spaces.fit`. An app's flat view (:mod:`memray.index.flat`) is promoted the
same way at ``IndexConfig.app_exact_threshold``.

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

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from memray.config import IndexConfig
from memray.errors import ModelMismatchError, ValidationError
from memray.ids import Namespace
from memray.index.base import IndexItem
from memray.index.exact import ExactIndex
from memray.index.flat import FlatViews
from memray.index.hnsw import HnswIndex
from memray.index.space import Space
from memray.store.base import IndexRow

__all__ = ["Spaces"]


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
        self.flats = FlatViews(dim, lambda index: self.fit(index, config.app_exact_threshold))
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

    # -- writes -----------------------------------------------------------------------------
    def upsert(self, space: Space, group: list[tuple[IndexItem, Any]], staged: bool = False) -> None:
        """:meth:`Space.upsert` of checked ``(item, vector)`` pairs (into the staged indexes if
        ``staged``), keeping the flat views in step and the vector index promoted or demoted."""
        if staged:
            assert self.stage is not None, f"{self.label}: a staged upsert, and no model is staged"
            space.upsert(group, staged=True)
            self._fit_staged(space)
        else:
            labels, vectors = space.upsert(group)
            self.flats.put(space, [item.doc_id for item, _ in group], labels, vectors)
        self.resize(space)

    def remove(self, space: Space, doc_id: str) -> bool:
        """:meth:`Space.remove`, keeping the flat views in step."""
        label = space.labels.get(doc_id)
        if label is None or not space.remove(doc_id):
            return False
        self.flats.remove(space, label)
        return True

    # -- promotion --------------------------------------------------------------------------
    def resize(self, space: Space) -> None:
        fitted = self.fit(space.vectors)
        if fitted is not space.vectors:  # promoted or demoted: its vectors moved (a full snapshot)
            space.vectors, space.rewritten = fitted, True

    def fit(self, index: ExactIndex | HnswIndex, threshold: int | None = None) -> ExactIndex | HnswIndex:
        """Promote to HNSW at the threshold (default: the namespace one); demote to exact under half of it."""
        n, dim = len(index), index.dim
        threshold = self.config.exact_threshold if threshold is None else threshold
        if isinstance(index, ExactIndex) and n >= threshold:
            return _rebuild(
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
            return _rebuild(ExactIndex(dim, capacity=max(16, n)), index)
        return index

    def _fit_staged(self, space: Space) -> None:
        if space.staged is not None:
            space.staged = self.fit(space.staged)

    # -- reads ------------------------------------------------------------------------------
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
        or other text (:meth:`Space.holds`)."""
        space = self.get(ns)
        return space is None or not space.holds(row, row.vector is not None if vector is None else vector)

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
        shard does not hold yet is added with its text and recency. Every row's vector is checked
        before any is written. Returns how many."""
        if self.stage is None or self.stage[0] != model_id:
            raise ModelMismatchError(f"{self.label} has no staged index for model {model_id!r}; call stage_begin first")
        dim = self.stage[1]
        for row in rows:
            size = 0 if row.vector is None else int(np.size(row.vector))
            if size != dim:
                raise ModelMismatchError(f"vectors of dim {size} do not fit the staged model {model_id!r} (dim {dim})")
        self.flats.clear()  # rows may add items: the views are rebuilt on the next app search
        groups: dict[Namespace, list[IndexRow]] = {}
        for row in rows:
            groups.setdefault(Namespace(*row.namespace), []).append(row)
        for ns, group in groups.items():
            space = self.make(ns)
            space.add_staged(group, dim)
            self._fit_staged(space)
        return len(rows)

    def cutover(self, model_id: str) -> bool:
        """Make the staged ``model_id`` active in one step; see :meth:`VectorShard.cutover`."""
        if model_id == self.model_id:
            return False
        if self.stage is None or self.stage[0] != model_id:
            raise ModelMismatchError(f"{self.label} has no staged index for model {model_id!r}; stage it first")
        dim = self.stage[1]
        for space in self.values():
            space.cutover(dim)
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


def _rebuild(target: ExactIndex | HnswIndex, source: ExactIndex | HnswIndex) -> ExactIndex | HnswIndex:
    """``target`` filled with every item of ``source`` (a promotion or demotion)."""
    labels, vectors = source.items()
    if len(labels):
        target.add(labels, vectors)
    return target
