"""The vector index contract, the items a shard indexes, and the atomic file helpers indexes use.

Similarity is **cosine**. Every vector handed to an index is expected to be L2-normalised (the
embedders guarantee it), so cosine equals the inner product; indexes return it as ``sims``
(float32, in [-1, 1], higher is closer). Labels are non-negative int64 chosen by the caller.

Persistence never pickles: matrices are ``.npy``, metadata is JSON, hnswlib graphs use
hnswlib's own format. Every file is written to a temporary name, fsynced, then ``os.replace``d.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memray.errors import ModelMismatchError, ValidationError
from memray.files import atomic_write, fsync_dir
from memray.ids import Namespace, as_namespace

__all__ = [
    "IndexItem",
    "ShardHit",
    "VectorIndex",
    "Labels",
    "Matrix",
    "checked_items",
    "as_labels",
    "as_matrix",
    "as_queries",
    "empty_result",
    "normalise",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_save_npy",
    "atomic_save_rows",
    "read_json",
    "fsync_dir",
]

Labels = npt.NDArray[np.int64]
Matrix = npt.NDArray[np.float32]


class IndexItem(NamedTuple):
    """One item to index. ``vector`` None indexes the text only (lexical search)."""

    namespace: Namespace
    doc_id: str
    vector: Any  # float32[dim], L2-normalised, or None
    text: str
    recency: float  # seq for messages, timestamp for entries: the later wins ties (NaN: unknown, kept)
    payload: str = ""  # the item as JSON, returned with hits so they need no store read
    stamp: int = 0  # the indexing stamp of a conversation host's upsert (read-your-writes)
    columns: tuple[float, float, float] | None = None  # (created_at, sim_time, importance), NaN: none;
    #                                                    None: unknown, the shard keeps what it has


class ShardHit(NamedTuple):
    """One search result. ``score`` is in [0, 1]; see :mod:`memray.index.scorer`."""

    namespace: Namespace
    doc_id: str
    score: float
    recency: float
    payload: str = ""  # "" when the shard has none (rebuilt from the store): hydrate from the store


@runtime_checkable
class VectorIndex(Protocol):
    """A cosine-similarity index over L2-normalised float32 vectors keyed by int64 labels.

    ``search`` clamps ``k`` to the live items: it returns ``k' <= k`` columns and never raises on
    a small or empty index. Rows of the result are ordered by similarity, highest first.
    """

    @property
    def dim(self) -> int: ...

    def __len__(self) -> int: ...

    def add(self, labels: Labels, vectors: Matrix) -> None:
        """Upsert: a label already present has its vector replaced."""
        ...

    def delete(self, labels: Labels) -> int:
        """Remove labels (unknown ones are ignored); returns how many were removed."""
        ...

    def search(self, query: Matrix, k: int) -> tuple[Labels, Matrix]:
        """``query`` is float32[dim] or [q, dim]; returns (labels int64[q, k'], sims float32[q, k'])."""
        ...

    def items(self) -> tuple[Labels, Matrix]:
        """Every live (label, vector), for rebuilding another index from this one."""
        ...

    def save(self, directory: str) -> None:
        """Write the index under ``directory`` (atomic: a crash leaves the old or the new one)."""
        ...


# -- input checks ------------------------------------------------------------------------------


def normalise(vectors: Any, dim: int) -> np.ndarray:
    """Rows L2-normalised as float32 (a zero row stays zero)."""
    arr = np.asarray(vectors, dtype=np.float32)
    arr = arr.reshape(1, -1) if arr.ndim == 1 else arr
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.ascontiguousarray(arr / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def checked_items(items: list[IndexItem], dim: int, where: str, model_id: str) -> list[tuple[IndexItem, Any]]:
    """Each item with its namespace a :class:`Namespace`, its numbers typed and its vector a
    float32[dim] L2-normalised (or None), paired with that vector; raises on the first bad one.
    The vectors of the whole batch are normalised in one call (a row each of one matrix), and
    each item is built once, after it."""
    from memray.index.columns import checked_columns

    vectors: list[np.ndarray] = []
    fields: list[tuple[Any, ...]] = []
    for item in items:
        doc_id, vec = item.doc_id, item.vector
        if not isinstance(doc_id, str) or not doc_id:
            raise ValidationError("doc_id", doc_id, "must be a non-empty string")
        if vec is not None:
            vec = np.asarray(vec, dtype=np.float32).reshape(-1)
            if vec.shape[0] != dim:
                raise ModelMismatchError(
                    f"vector of dim {vec.shape[0]} for doc_id={doc_id!r} does not fit {where} "
                    f"(model {model_id!r}, dim {dim}); re-embed with the index's model (run the backfill job)"
                )
            vectors.append(vec)
        cols = None if item.columns is None else checked_columns(doc_id, item.columns)
        fields.append((as_namespace(item.namespace), doc_id, vec is not None, item, cols))
    unit = iter(normalise(np.stack(vectors), dim) if vectors else ())
    checked: list[tuple[IndexItem, Any]] = []
    for ns, doc_id, has_vector, item, cols in fields:
        row = next(unit) if has_vector else None
        fixed = IndexItem(ns, doc_id, row, item.text, float(item.recency), item.payload, int(item.stamp), cols)
        checked.append((fixed, row))
    return checked


def as_labels(labels: Any) -> Labels:
    arr = np.asarray(labels, dtype=np.int64).reshape(-1)
    # (a few labels, what a shard's upsert adds to a conversation: Python's min of the list costs
    # a fifth of numpy's, which was more than the add itself)
    if arr.size and (min(arr.tolist()) if arr.size <= 64 else int(arr.min())) < 0:
        raise ValidationError("labels", labels, "must be non-negative int64")
    return arr


def as_matrix(vectors: Any, dim: int, n: int | None = None) -> Matrix:
    """``vectors`` as a C-contiguous float32[n, dim]; a wrong shape raises ModelMismatchError."""
    arr = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or arr.shape[1] != dim or (n is not None and arr.shape[0] != n):
        raise ModelMismatchError(
            f"vectors of shape {arr.shape} do not fit an index of dim {dim}"
            + (f" for {n} labels" if n is not None else "")
            + "; re-embed with the index's model (run the backfill job)"
        )
    return arr


def as_queries(query: Any, dim: int) -> Matrix:
    return as_matrix(query, dim)


def empty_result(q: int) -> tuple[Labels, Matrix]:
    return np.zeros((q, 0), dtype=np.int64), np.zeros((q, 0), dtype=np.float32)


# -- atomic files ------------------------------------------------------------------------------


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` durably (see :func:`memray.files.atomic_write`)."""
    atomic_write(path, lambda fh: fh.write(data))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """JSON (UTF-8) with the guarantee of :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())


def atomic_save_npy(path: str | Path, arr: npt.NDArray[Any]) -> None:
    """An ``.npy`` file (``allow_pickle=False``) with the guarantee of :func:`atomic_write_bytes`."""
    atomic_write(path, lambda fh: np.save(fh, arr, allow_pickle=False))


def atomic_save_rows(path: str | Path, blocks: list[npt.NDArray[Any]], dim: int) -> None:
    """The ``.npy`` file :func:`atomic_save_npy` makes of the float32 rows of ``blocks`` one after
    another (``float32[rows, dim]``, byte for byte), written a block at a time: a shard's
    snapshot holds thousands of small namespaces' vectors, and concatenating them first copied
    the whole matrix (120,000 x 384: 184 MB) for nothing."""
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False}

    def write(fh: BinaryIO) -> None:
        np.lib.format.write_array_header_1_0(fh, {**header, "shape": (sum(len(b) for b in blocks), dim)})
        for block in blocks:
            fh.write(np.ascontiguousarray(block, dtype=np.float32).reshape(-1, dim).data)

    atomic_write(path, write)


def read_json(path: str | Path) -> Any:
    with open(path, "rb") as fh:
        return json.loads(fh.read().decode())


# -- generation-named index files ---------------------------------------------------------------

META = "meta.json"


def next_generation(directory: str | Path) -> int:
    """The generation number the next save of an index in ``directory`` uses."""
    meta = Path(directory) / META
    if meta.exists():
        return int(read_json(meta).get("gen", 0)) + 1
    return 1


def commit_generation(directory: str | Path, meta: dict[str, Any], keep: set[str]) -> None:
    """Publish a save: write ``meta.json`` atomically (the commit point), then remove every file
    of older generations (anything not in ``keep`` and not ``meta.json``). Before the commit the
    previous generation stays complete and readable; after it the new one is."""
    directory = Path(directory)
    atomic_write_json(directory / META, meta)
    for entry in directory.iterdir():
        if entry.name != META and entry.name not in keep and entry.is_file():
            entry.unlink()
    fsync_dir(directory)
