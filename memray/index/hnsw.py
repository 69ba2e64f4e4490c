"""`HnswIndex`: approximate cosine search with hnswlib, made safe to use from a shard.

What hnswlib does not do for us (FACTS.md) and this class adds:

- **Capacity growth**: hnswlib's capacity is fixed; an add that would overflow first doubles it
  with ``resize_index``.
- **Deletes**: ``mark_deleted`` tombstones (the graph still holds them). Once tombstones exceed
  ``compact_ratio`` of the stored elements the index is rebuilt from its live vectors.
- **Upsert**: ``add_items`` with a label that exists replaces its vector in place (hnswlib's
  ``updatePoint``); a tombstoned label is un-deleted and replaced (``allow_replace_deleted`` stays
  off, which is what makes this legal). ``tests/index`` verifies both.
- **k clamped**: ``knn_query`` raises when it cannot find ``k`` live items (few items, many
  tombstones). ``k`` is clamped to the live count, and if hnswlib still comes up short the query is
  retried with a smaller ``k``; a search never raises for lack of items.
- **ef persisted**: hnswlib does not save ``ef``; it is kept in ``meta.json`` beside the graph.
- **Threads**: ``num_threads`` is set explicitly (1 by default: actors share few cores).
- **One writer at a time**: add during a query can crash hnswlib, so every add, delete, compact
  and search holds one lock. (Concurrent queries would be safe, but a shard runs one call at a
  time anyway, so a plain lock costs nothing.)

Similarity is cosine: the ``"cosine"`` space normalises vectors and returns ``1 - cos`` distances,
which :meth:`HnswIndex.search` turns back into cosine similarities.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from memray.files import load_npy
from memray.index.base import (
    Labels,
    Matrix,
    as_labels,
    as_matrix,
    as_queries,
    atomic_save_npy,
    commit_generation,
    empty_result,
    fsync_dir,
    next_generation,
    read_json,
)

__all__ = ["HnswIndex"]

_KIND = "hnsw"
_MIN_CAPACITY = 64


class HnswIndex:
    """Cosine HNSW index over L2-normalised vectors (see :class:`memray.index.base.VectorIndex`)."""

    def __init__(
        self,
        dim: int,
        *,
        m: int = 16,
        ef_construction: int = 200,
        ef: int = 64,
        compact_ratio: float = 0.25,
        num_threads: int = 1,
        capacity: int = _MIN_CAPACITY,
    ) -> None:
        self._dim = dim
        self.m = m
        self.ef_construction = ef_construction
        self.ef = ef
        self.compact_ratio = compact_ratio
        self.num_threads = num_threads
        self._lock = threading.Lock()
        self._live: set[int] = set()
        self._deleted: set[int] = set()
        self.compactions = 0
        self._index = self._new_graph(max(capacity, _MIN_CAPACITY))

    def _new_graph(self, capacity: int) -> Any:
        graph = hnswlib.Index(space="cosine", dim=self._dim)
        graph.init_index(max_elements=capacity, ef_construction=self.ef_construction, M=self.m)
        graph.set_ef(self.ef)
        graph.set_num_threads(self.num_threads)
        return graph

    # -- introspection ----------------------------------------------------------------------

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, label: object) -> bool:
        return label in self._live

    def has(self, labels: Labels) -> np.ndarray:
        """Which of ``labels`` are live here (a bool mask)."""
        live = self._live
        return np.fromiter((label in live for label in labels.tolist()), dtype=bool, count=len(labels))

    @property
    def tombstones(self) -> int:
        return len(self._deleted)

    @property
    def capacity(self) -> int:
        return int(self._index.get_max_elements())

    def set_ef(self, ef: int) -> None:
        with self._lock:
            self.ef = ef
            self._index.set_ef(ef)

    # -- writes -----------------------------------------------------------------------------

    def add(self, labels: Any, vectors: Any) -> None:
        """Upsert; within one call a repeated label keeps its last vector."""
        labs = as_labels(labels)
        vecs = as_matrix(vectors, self._dim, len(labs))
        if not len(labs):
            return
        last = {label: i for i, label in enumerate(labs.tolist())}
        rows = np.fromiter(last.values(), dtype=np.int64, count=len(last))
        labs, vecs = labs[rows], vecs[rows]
        with self._lock:
            new = sum(1 for label in last if label not in self._live and label not in self._deleted)
            need = int(self._index.element_count) + new
            cap = self.capacity
            if need > cap:
                while cap < need:
                    cap *= 2
                self._index.resize_index(cap)
            self._index.add_items(vecs, labs.astype(np.uint64), num_threads=self.num_threads)
            self._live.update(last)
            self._deleted.difference_update(last)

    def delete(self, labels: Any) -> int:
        """Tombstone labels; compacts when tombstones pass ``compact_ratio``. Returns removed."""
        removed = 0
        with self._lock:
            for label in as_labels(labels).tolist():
                if label in self._live:
                    self._index.mark_deleted(label)
                    self._live.discard(label)
                    self._deleted.add(label)
                    removed += 1
            if self._deleted and len(self._deleted) > self.compact_ratio * int(self._index.element_count):
                self._compact()
        return removed

    def compact(self) -> None:
        """Rebuild the graph from the live vectors, dropping every tombstone."""
        with self._lock:
            self._compact()

    def _compact(self) -> None:
        labels, vectors = self._items()
        graph = self._new_graph(max(_MIN_CAPACITY, 2 * len(labels)))
        if len(labels):
            graph.add_items(vectors, labels.astype(np.uint64), num_threads=self.num_threads)
        self._index = graph
        self._deleted.clear()
        self.compactions += 1

    # -- reads ------------------------------------------------------------------------------

    def search(self, query: Any, k: int) -> tuple[Labels, Matrix]:
        queries = as_queries(query, self._dim)
        with self._lock:
            kk = min(int(k), len(self._live))
            while kk > 0:
                try:
                    labels, dist = self._index.knn_query(queries, k=kk, num_threads=self.num_threads)
                except RuntimeError:
                    kk //= 2  # hnswlib found fewer than kk live items (tombstones): ask for fewer
                    continue
                return labels.astype(np.int64), (1.0 - dist).astype(np.float32)
        return empty_result(queries.shape[0])

    def _items(self) -> tuple[Labels, Matrix]:
        labels = np.array(sorted(self._live), dtype=np.int64)
        if not len(labels):
            return labels, np.zeros((0, self._dim), dtype=np.float32)
        vectors = np.asarray(self._index.get_items(labels.astype(np.uint64)), dtype=np.float32)
        return labels, vectors.reshape(len(labels), self._dim)

    def items(self) -> tuple[Labels, Matrix]:
        with self._lock:
            return self._items()

    def get(self, labels: Any) -> Matrix:
        """The (normalised) vectors of ``labels`` (all must be live)."""
        labs = as_labels(labels)
        with self._lock:
            vectors = self._index.get_items(labs.astype(np.uint64))
        return np.asarray(vectors, dtype=np.float32).reshape(len(labs), self._dim)

    # -- persistence ------------------------------------------------------------------------

    def save(self, directory: str) -> None:
        """Write ``graph.<gen>.bin`` (hnswlib's format) and ``deleted.<gen>.npy``, each fsynced
        and renamed into place, then commit ``meta.json`` (which holds ``ef`` and the other
        parameters hnswlib does not save) atomically. Durable when it returns; a crash leaves the
        previous save loadable."""
        os.makedirs(directory, exist_ok=True)
        gen = next_generation(directory)
        graph_name, deleted_name = f"graph.{gen}.bin", f"deleted.{gen}.npy"
        with self._lock:
            fd, tmp = tempfile.mkstemp(prefix=".graph.", suffix=".tmp", dir=directory)
            os.close(fd)
            try:
                self._index.save_index(tmp)
                with open(tmp, "rb+") as fh:
                    os.fsync(fh.fileno())
                os.replace(tmp, Path(directory) / graph_name)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            fsync_dir(directory)
            atomic_save_npy(Path(directory) / deleted_name, np.array(sorted(self._deleted), dtype=np.int64))
            meta = {
                "kind": _KIND,
                "gen": gen,
                "dim": self._dim,
                "space": "cosine",
                "m": self.m,
                "ef_construction": self.ef_construction,
                "ef": self.ef,
                "compact_ratio": self.compact_ratio,
                "num_threads": self.num_threads,
                "capacity": self.capacity,
                "live": len(self._live),
                "graph": graph_name,
                "deleted": deleted_name,
            }
        commit_generation(directory, meta, {graph_name, deleted_name})

    @classmethod
    def load(cls, directory: str, num_threads: int | None = None) -> HnswIndex:
        meta = read_json(Path(directory) / "meta.json")
        if meta.get("kind") != _KIND:
            raise ValueError(f"{directory} holds a {meta.get('kind')!r} index, not {_KIND!r}")
        index = cls(
            int(meta["dim"]),
            m=int(meta["m"]),
            ef_construction=int(meta["ef_construction"]),
            ef=int(meta["ef"]),
            compact_ratio=float(meta["compact_ratio"]),
            num_threads=int(num_threads if num_threads is not None else meta["num_threads"]),
        )
        graph = hnswlib.Index(space="cosine", dim=index.dim)
        graph.load_index(str(Path(directory) / meta["graph"]), max_elements=int(meta["capacity"]))
        graph.set_ef(index.ef)
        graph.set_num_threads(index.num_threads)
        deleted = load_npy(Path(directory) / meta["deleted"])
        index._index = graph
        index._deleted = set(deleted.tolist())
        index._live = set(int(x) for x in graph.get_ids_list()) - index._deleted
        return index
