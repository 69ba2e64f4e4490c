"""`ExactIndex`: brute-force cosine search in numpy. The oracle for every other index and the
index of small namespaces (below ``IndexConfig.exact_threshold`` it beats HNSW on latency and
costs nothing to build; see ``benchmarks/index_crossover.py``).

Storage is one contiguous float32 matrix (capacity doubles as it fills) plus a label per row and
a ``label -> row`` dict; a delete moves the last row into the hole (swap-remove), so the live rows
are always ``[0, n)`` and a search is one matrix-vector product.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
    next_generation,
    read_json,
)

__all__ = ["ExactIndex"]

_KIND = "exact"


class ExactIndex:
    """Exact cosine search over L2-normalised vectors (see :class:`memray.index.base.VectorIndex`)."""

    def __init__(self, dim: int, capacity: int = 2) -> None:
        # Small by default: a shard holds one exact index per conversation, and 16 rows of 256
        # floats each made 10k idle conversations cost 160 MB before they held anything.
        self._dim = dim
        self._mat: Matrix = np.zeros((max(capacity, 1), dim), dtype=np.float32)
        self._labels: Labels = np.zeros(max(capacity, 1), dtype=np.int64)
        self._row: dict[int, int] = {}

    @classmethod
    def of(cls, vectors: Matrix) -> ExactIndex:
        """An index holding the rows of ``vectors`` (float32[n, dim], L2-normalised) as labels
        0..n-1, without checks or copies: a few vectors scored once (a read-your-writes tail)."""
        index = cls(vectors.shape[1], capacity=1)
        index._mat = vectors
        index._labels = np.arange(len(vectors), dtype=np.int64)
        index._row = dict(zip(range(len(vectors)), range(len(vectors))))
        return index

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, label: object) -> bool:
        return label in self._row

    def _grow(self, need: int) -> None:
        cap = self._mat.shape[0]
        if need <= cap:
            return
        while cap < need:
            cap *= 2
        # (empty, not zeroed: only the live rows [0, n) are ever read)
        mat = np.empty((cap, self._dim), dtype=np.float32)
        mat[: len(self)] = self._mat[: len(self)]
        labels = np.empty(cap, dtype=np.int64)
        labels[: len(self)] = self._labels[: len(self)]
        self._mat, self._labels = mat, labels

    def add(self, labels: Any, vectors: Any) -> None:
        """Upsert rows; within one call a repeated label keeps its last vector."""
        listed = as_labels(labels).tolist()
        self.put_rows(listed, as_matrix(vectors, self._dim, len(listed)))

    def put_rows(self, labels: list[int], vectors: Sequence[Matrix] | Matrix) -> None:
        """:meth:`add` of input checked already: non-negative ``labels`` and as many float32
        L2-normalised rows of this index's dim (a shard's upsert passes the rows of its batch's
        matrix, with no matrix made per namespace)."""
        self._grow(len(self._row) + len(labels))
        for label, vec in zip(labels, vectors):
            row = self._row.get(label)
            if row is None:
                row = len(self._row)
                self._row[label] = row
                self._labels[row] = label
            self._mat[row] = vec

    def delete(self, labels: Any) -> int:
        removed = 0
        for label in as_labels(labels).tolist():
            row = self._row.pop(label, None)
            if row is None:
                continue
            last = len(self._row)  # index of the last live row, now that one is gone
            if row != last:
                moved = int(self._labels[last])
                self._mat[row] = self._mat[last]
                self._labels[row] = moved
                self._row[moved] = row
            removed += 1
        return removed

    def search(self, query: Any, k: int) -> tuple[Labels, Matrix]:
        queries = as_queries(query, self._dim)
        n = len(self._row)
        kk = min(int(k), n)
        if kk <= 0:
            return empty_result(queries.shape[0])
        sims = queries @ self._mat[:n].T
        if kk < n:
            top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        else:
            top = np.broadcast_to(np.arange(n), (queries.shape[0], n)).copy()
        top_sims = np.take_along_axis(sims, top, axis=1)
        order = np.argsort(-top_sims, axis=1, kind="stable")
        rows = np.take_along_axis(top, order, axis=1)
        return self._labels[rows].astype(np.int64), np.take_along_axis(top_sims, order, axis=1)

    def scan(self, query: Any) -> tuple[Labels, Matrix]:
        """Every live label and its cosine with one ``query`` vector (unsorted, 1-d)."""
        n = len(self._row)
        sims = self._mat[:n] @ as_queries(query, self._dim)[0]
        return self._labels[:n].copy(), sims

    def scan_one(self, query: Matrix) -> tuple[Labels, Matrix]:
        """:meth:`scan_many` of one L2-normalised ``float32[dim]`` query (the same product)."""
        n = len(self._row)
        return self._labels[:n], self._mat[:n] @ query

    def scan_many(self, queries: Matrix) -> tuple[Labels, Matrix]:
        """Every live label (a view: read it before the next write) and its cosine with each row
        of ``queries`` (L2-normalised, ``float32[m, dim]``), as ``float32[m, n]``: one
        matrix-vector product per query, bit for bit what :meth:`scan` gives. (Not one
        matrix-matrix product: it may wake OpenBLAS's threads, which a busy 2-core machine
        cannot serve, and its sums differ from a search's own in the last bits.)"""
        mat = self._mat[: len(self._row)]
        sims = np.empty((len(queries), len(mat)), dtype=np.float32)
        for row, query in enumerate(queries):
            np.matmul(mat, query, out=sims[row])
        return self._labels[: len(self._row)], sims

    def items(self) -> tuple[Labels, Matrix]:
        n = len(self._row)
        return self._labels[:n].copy(), self._mat[:n].copy()

    def get(self, labels: Any) -> Matrix:
        """The vectors of ``labels`` (all must be present)."""
        rows = [self._row[label] for label in as_labels(labels).tolist()]
        return self._mat[rows]  # (indexing by a list copies)

    def save(self, directory: str) -> None:
        """Write ``labels.<gen>.npy`` and ``vectors.<gen>.npy``, fsynced, then commit ``meta.json``
        atomically. Durable when it returns; a crash leaves the previous save loadable."""
        os.makedirs(directory, exist_ok=True)
        gen = next_generation(directory)
        labels_name, vectors_name = f"labels.{gen}.npy", f"vectors.{gen}.npy"
        labels, vectors = self.items()
        atomic_save_npy(Path(directory) / labels_name, labels)
        atomic_save_npy(Path(directory) / vectors_name, vectors)
        meta = {"kind": _KIND, "gen": gen, "dim": self._dim, "labels": labels_name, "vectors": vectors_name}
        commit_generation(directory, meta, {labels_name, vectors_name})

    @classmethod
    def load(cls, directory: str) -> ExactIndex:
        meta = read_json(Path(directory) / "meta.json")
        if meta.get("kind") != _KIND:
            raise ValueError(f"{directory} holds a {meta.get('kind')!r} index, not {_KIND!r}")
        labels = load_npy(Path(directory) / meta["labels"])
        vectors = load_npy(Path(directory) / meta["vectors"])
        index = cls(int(meta["dim"]), capacity=max(16, len(labels)))
        index.add(labels, vectors)
        return index
