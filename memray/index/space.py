"""`Space`: one namespace of a shard — its label map, recency, payloads, lexical and vector index.

Doc ids (message or entry ids) map to int64 labels through a per-namespace dict (a counter, never
a hash, so labels cannot collide). Each item keeps a recency float (the seq of a message, the
timestamp of an entry) for tie-breaks; in conversation namespaces recency is the seq, and
``by_recency`` finds a message's neighbours for :func:`memray.index.fusion.neighbour_support`.
``stamp`` is the highest indexing stamp of any upsert applied here: a conversation host stamps
its upserts, and read-your-writes compares stamps (see :mod:`memray.conversation.tail`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex
from memray.index.lexical import LexicalIndex
from memray.ids import Namespace

__all__ = ["Space", "normalise"]


def normalise(vectors: Any, dim: int) -> np.ndarray:
    """Rows L2-normalised as float32 (a zero row stays zero)."""
    arr = np.asarray(vectors, dtype=np.float32)
    arr = arr.reshape(1, -1) if arr.ndim == 1 else arr
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.ascontiguousarray(arr / np.where(norms > 0, norms, 1.0), dtype=np.float32)


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
        self.next_label = 0
        self.stamp = 0
        self.vectors: ExactIndex | HnswIndex = ExactIndex(dim)
        self.staged: ExactIndex | HnswIndex | None = None  # the next model's vectors (not snapshotted)
        self.retired: ExactIndex | HnswIndex | None = None  # the previous model's, until released
        self.lexical = LexicalIndex()
        self.dirty = True

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
        if self.by_recency is not None:
            if old is not None and self.by_recency.get(old) == doc_id:
                del self.by_recency[old]
            self.by_recency[recency] = doc_id

    def neighbours(self, doc_id: str) -> tuple[str | None, str | None]:
        """The messages just before and after ``doc_id`` by seq (None where there is none, and
        always outside conversation namespaces)."""
        if self.by_recency is None:
            return None, None
        seq = self.recency[doc_id]
        return self.by_recency.get(seq - 1.0), self.by_recency.get(seq + 1.0)

    def remove(self, doc_id: str) -> bool:
        label = self.labels.pop(doc_id, None)
        if label is None:
            return False
        del self.docs[label]
        recency = self.recency.pop(doc_id)
        if self.by_recency is not None and self.by_recency.get(recency) == doc_id:
            del self.by_recency[recency]
        self.payload.pop(doc_id, None)
        self.lexical.delete(doc_id)
        for index in (self.vectors, self.staged, self.retired):
            if index is not None:
                index.delete(np.array([label], dtype=np.int64))
        self.dirty = True
        return True
