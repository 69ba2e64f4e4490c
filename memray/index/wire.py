"""A shard's batched calls with their vectors as one matrix on the wire.

A shard's ``upsert`` takes thousands of items per call and its ``search_many`` thousands of
queries, each with its own vector. Pickled as they are, every vector is one out-of-band buffer
that Ray frames, copies and rebuilds on its own, and every named tuple (item, namespace, query)
goes through the pickler's per-object hook in Python; at 10,000 agents Ray unpickling a shard's
arguments was 16% of its samples (``benchmarks/index_wire_micro.py`` times both forms through a
Ray call). :class:`ItemBatch` and :class:`SearchBatch` are lists of the same objects that pickle
as plain tuples and lists, with the vectors stacked into one float32 matrix and rebuilt as rows
of it (views, not copies). In-process nothing is pickled and they are plain lists.

The replies stay named tuples: rebuilding them from plain tuples in Python cost more than the
pickler's hook (the same benchmark: 100 ms as objects, 157 ms as plain tuples, 5,000 replies).
:class:`ReplyBatch` pickles them with the standard library's pickler instead, into one bytes
object Ray carries as it is: Ray's cloudpickle calls a hook in Python for every object of a
class (each reply, hit, namespace and statistics), the standard pickler does not (the same
benchmark, two runs: 88.6-90.1 -> 66.4-68.1 ms a round trip of 5,000 replies; pickling them
alone 57-58 -> 29-31 ms of CPU).

A batch whose vectors do not stack (different lengths, not numbers) pickles as the objects
themselves, so the shard sees exactly what was sent and its checks name the bad item.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from memray.ids import Namespace, pack_namespaces, unpack_namespaces
from memray.index.base import IndexItem
from memray.index.search import AppSearch, NamespaceSearch, Query, ShardReply, ShardSearch, UserSearch

__all__ = ["ItemBatch", "SearchBatch", "ReplyBatch"]


def _stacked(vectors: list[Any]) -> tuple[list[int], np.ndarray] | None:
    """Where ``vectors`` are not None, and those as one float32 matrix; None where they do not stack."""
    at = [n for n, v in enumerate(vectors) if v is not None]
    try:
        rows = [np.asarray(vectors[n], dtype=np.float32).reshape(-1) for n in at]
        return at, np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
    except (TypeError, ValueError):
        return None


def _unstacked(n: int, at: list[int], matrix: np.ndarray) -> list[Any]:
    """The ``n`` vectors :func:`_stacked` packed: rows of ``matrix`` (views) at ``at``, None elsewhere."""
    vectors: list[Any] = [None] * n
    for i, row in zip(at, matrix):
        vectors[i] = row
    return vectors


class ItemBatch(list[IndexItem]):
    """The items of one ``upsert`` call (see the module docstring)."""

    def __reduce__(self) -> tuple[Any, ...]:
        stacked = _stacked([item.vector for item in self])
        if stacked is None:
            return (ItemBatch, (list(self),))
        spaces = pack_namespaces(tuple(item.namespace) for item in self)
        fields = list(zip(*((i.doc_id, i.text, i.recency, i.payload, i.stamp, i.columns) for i in self)))
        return (_items, (*spaces, fields, *stacked))


def _items(
    spaces: list[tuple[str, ...]], space_of: list[int], fields: list[tuple[Any, ...]], at: list[int], matrix: np.ndarray
) -> ItemBatch:
    vectors = _unstacked(len(space_of), at, matrix)
    doc_ids, texts, recency, payloads, stamps, columns = fields or ((),) * 6
    return ItemBatch(
        IndexItem(ns, *row)
        for ns, row in zip(
            unpack_namespaces(spaces, space_of), zip(doc_ids, vectors, texts, recency, payloads, stamps, columns)
        )
    )


class SearchBatch(list[ShardSearch]):
    """The searches of one ``search_many`` call (see the module docstring): each pickles as plain
    tuples (no per-object hook), its query's vector as a row of the batch's matrix."""

    def __reduce__(self) -> tuple[Any, ...]:
        stacked = _stacked([request.query.vector for request in self])
        if stacked is None or any(type(r) not in _KINDS or type(r.query) is not Query for r in self):
            return (SearchBatch, (list(self),))
        return (_searches, ([_plain_search(request) for request in self], *stacked))


_KINDS: dict[type, int] = {NamespaceSearch: 0, UserSearch: 1, AppSearch: 2}


def _plain_search(request: ShardSearch) -> tuple[Any, ...]:
    """``(kind, what it searches, the query without its vector and watch, the watch)``."""
    q = request.query
    query = tuple(q._replace(vector=None, watch=()))
    watch = [(tuple(ns), seqs) for ns, seqs in q.watch]
    if isinstance(request, NamespaceSearch):
        return (0, [tuple(ns) for ns in request.namespaces], query, watch)
    return (_KINDS[type(request)], tuple(request[:-1]), query, watch)


def _searches(plain: list[tuple[Any, ...]], at: list[int], matrix: np.ndarray) -> SearchBatch:
    out = SearchBatch()
    for (kind, what, q, watch), vector in zip(plain, _unstacked(len(plain), at, matrix)):
        query = Query._make(q)._replace(vector=vector, watch=tuple((Namespace(*ns), seqs) for ns, seqs in watch))
        if kind == 0:
            out.append(NamespaceSearch([Namespace(*ns) for ns in what], query))
        elif kind == 1:
            app, user_id, kind_of = what
            out.append(UserSearch(app, user_id, kind_of, query))
        else:
            app, kind_of = what
            out.append(AppSearch(app, kind_of, query))
    return out


class ReplyBatch(list[ShardReply | Exception]):
    """The replies of one ``search_many`` call (see the module docstring): pickled by the standard
    library's pickler into one bytes object; as they are if it cannot pickle one of them (a
    reply's error that only cloudpickle can, say)."""

    def __reduce__(self) -> tuple[Any, ...]:
        try:
            return (_replies, (pickle.dumps(list(self), protocol=pickle.HIGHEST_PROTOCOL),))
        except Exception:  # (pickle's errors are of many classes)
            return (ReplyBatch, (list(self),))


def _replies(data: bytes) -> ReplyBatch:
    return ReplyBatch(pickle.loads(data))
