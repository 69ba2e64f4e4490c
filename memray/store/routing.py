"""How a partitioned history store answers each call, declared on the call itself.

A user's rows all live on one partition (:func:`~memray.store.layout.partition_of`). Each
:class:`~memray.store.history.HistoryStore` method that a store of many partitions answers carries
one :func:`route` beside its priority, and :class:`~memray.store.partitions.StorePartitions`
runs it from there:

- :data:`by_key` / :data:`by_user`: a call about one conversation (its ``key``) or one user (its
  ``app``, ``user_id``) goes to that user's partition;
- :func:`split`: a batch (commits, vectors, lookups) is split by partition — the ``items``
  parameter, each item's user given by ``user`` — sent to each partition at once, and the answers
  merged (:func:`in_order` puts one-answer-per-item back in the order of the request);
- :func:`each`: an app-wide call (dead letters, pending embeddings, recovery digests) goes to
  every partition and the answers are merged;
- :data:`first`: the server's API keys, kept by the first partition.

A method with no route is one partition's own (``pid``, ``scan_index_rows``, ``version``…): it is
called on a partition's client, or :class:`~memray.store.partitions.StorePartitions` offers a
fan-out of its own with another signature (``versions()``, ``index_pages()``).

A route names the parameters it reads; :meth:`Route.bind` checks they exist when the router is
built (at import), so a route that disagrees with its method's signature cannot load.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from memray.ids import ConversationKey, Namespace
from memray.rpc.client import Calls
from memray.store.deadletter import CommitResult, DeadLetter
from memray.store.layout import partition_of
from memray.store.messages import Correction
from memray.store.rows import EmbeddingRow, MessageRow

__all__ = [
    "Route",
    "Router",
    "route",
    "route_of",
    "by_key",
    "by_user",
    "first",
    "each",
    "split",
    "in_order",
    "concat",
    "flat",
    "by_user_or",
    "total",
    "nothing",
    "every",
    "sum_counts",
    "sorted_union",
    "by_ref",
    "positions",
    "commit_results",
    "digest",
    "row_user",
    "key_user",
    "first_key_user",
    "ns_user",
    "ref_user",
]

F = TypeVar("F", bound=Callable[..., Any])
_ROUTE = "__memray_route__"

#: A bound route: ``router(clients, args, kwargs)`` answers the call over the partitions' clients.
Router = Callable[[Sequence[Calls], tuple[Any, ...], dict[str, Any]], Awaitable[Any]]
#: The answers of a split call: each with the positions (in the request's items) it answers for.
Parts = list[tuple[list[int], Any]]


class Route(Protocol):
    def bind(self, method: Callable[..., Any]) -> Router:
        """The router of ``method`` (TypeError if it lacks a parameter this route reads)."""
        ...


def route(how: Route) -> Callable[[F], F]:
    """Declare how a partitioned store answers the decorated store method."""

    def declare(method: F) -> F:
        setattr(method, _ROUTE, how)
        return method

    return declare


def route_of(method: Callable[..., Any]) -> Route | None:
    """The route declared on ``method`` (None: a partition's own call)."""
    how: Route | None = getattr(method, _ROUTE, None)
    return how


def _argument(method: Callable[..., Any], name: str) -> tuple[int, Any]:
    """The position (after ``self``) and default of ``method``'s parameter ``name``."""
    params = list(inspect.signature(method).parameters.values())[1:]
    for i, p in enumerate(params):
        if p.name == name:
            return i, p.default
    raise TypeError(f"{method.__qualname__} has no parameter {name!r} for its route to read")


def _reader(method: Callable[..., Any], name: str) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    i, default = _argument(method, name)
    return lambda args, kwargs: args[i] if i < len(args) else kwargs.get(name, default)


@dataclass(frozen=True)
class _ByKey:
    def bind(self, method: Callable[..., Any]) -> Router:
        name, key = method.__name__, _reader(method, "key")

        def run(clients: Sequence[Calls], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
            k: ConversationKey = key(args, kwargs)
            return clients[partition_of(k.app, k.user_id, len(clients))]._call(name, *args, **kwargs)

        return run


@dataclass(frozen=True)
class _ByUser:
    #: where a call without a user (``app`` or ``user_id`` None) goes; None: it must name one
    otherwise: Route | None = None

    def bind(self, method: Callable[..., Any]) -> Router:
        name, app, user = method.__name__, _reader(method, "app"), _reader(method, "user_id")
        otherwise = self.otherwise.bind(method) if self.otherwise else None

        def run(clients: Sequence[Calls], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Awaitable[Any]:
            a, u = app(args, kwargs), user(args, kwargs)
            if otherwise is not None and (a is None or u is None):
                return otherwise(clients, args, kwargs)
            return clients[partition_of(a, u, len(clients))]._call(name, *args, **kwargs)

        return run


@dataclass(frozen=True)
class _First:
    def bind(self, method: Callable[..., Any]) -> Router:
        name = method.__name__
        return lambda clients, args, kwargs: clients[0]._call(name, *args, **kwargs)


@dataclass(frozen=True)
class each:  # noqa: N801  (read as a route: ``@route(each(flat, cut="limit"))``)
    """Every partition, at once; ``merge`` their answers (in partition order). ``cut``: the
    parameter that bounds the merged answer's length (each partition's newest ``limit``, cut to
    ``limit``)."""

    merge: Callable[[list[Any]], Any]
    cut: str | None = None

    def bind(self, method: Callable[..., Any]) -> Router:
        name, merge = method.__name__, self.merge
        bound = _reader(method, self.cut) if self.cut else None

        async def run(clients: Sequence[Calls], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            merged = merge(list(await asyncio.gather(*(c._call(name, *args, **kwargs) for c in clients))))
            return merged[: bound(args, kwargs)] if bound else merged

        return run


@dataclass(frozen=True)
class split:  # noqa: N801  (read as a route: ``@route(split("rows", row_user, concat))``)
    """The batch in parameter ``items``, split by partition (``user(item)``: its app and user),
    each part sent to its partition at once; ``merge`` takes each answer with the positions in
    ``items`` of what it was asked about. With one partition the batch goes whole (an empty one
    nowhere)."""

    items: str
    user: Callable[[Any], tuple[str, str]]
    merge: Callable[[Parts], Any]

    def bind(self, method: Callable[..., Any]) -> Router:
        name, user, merge = method.__name__, self.user, self.merge
        i, _ = _argument(method, self.items)
        key = self.items

        async def run(clients: Sequence[Calls], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            items: Sequence[Any] = args[i] if i < len(args) else kwargs[key]

            def send(client: Calls, part: list[Any]) -> Awaitable[Any]:
                if i < len(args):
                    return client._call(name, *args[:i], part, *args[i + 1 :], **kwargs)
                return client._call(name, *args, **{**kwargs, key: part})

            if len(clients) == 1:
                return merge([(list(range(len(items))), await send(clients[0], _part(items, items)))] if items else [])
            groups: dict[int, list[int]] = {}
            for n, item in enumerate(items):
                groups.setdefault(partition_of(*user(item), len(clients)), []).append(n)
            answers = await asyncio.gather(
                *(send(clients[p], _part(items, [items[n] for n in where])) for p, where in groups.items())
            )
            return merge(list(zip(groups.values(), answers)))

        return run


def _part(items: Sequence[Any], part: Sequence[Any]) -> list[Any]:
    """A part of a batch as a list of the batch's own class: a list that pickles as columns
    (:class:`~memray.store.rows.RowList`) stays one on its way to the partition."""
    return type(items)(part) if isinstance(items, list) else list(part)


#: One conversation's call: the partition of its ``key``.
by_key: Route = _ByKey()
#: One user's call: the partition of its ``app`` and ``user_id``.
by_user: Route = _ByUser()
#: The first partition's call (the server's API keys live there).
first: Route = _First()


def by_user_or(otherwise: Route) -> Route:
    """:data:`by_user` when the call names a user; ``otherwise`` when ``app`` or ``user_id`` is None."""
    return _ByUser(otherwise)


# -- merges of split answers ---------------------------------------------------------------------
def in_order(parts: Parts) -> list[Any]:
    """One answer per item, back in the order of the request."""
    out: list[Any] = [None] * sum(len(where) for where, _ in parts)
    for where, answer in parts:
        for n, value in zip(where, answer):
            out[n] = value
    return out


def concat(parts: Parts) -> list[Any]:
    """Every part's answer items, one list."""
    return [x for _, answer in parts for x in answer]


def total(parts: Parts) -> int:
    return sum(n for _, n in parts)


def nothing(answers: list[Any]) -> None:
    """For calls that answer None (split or every partition)."""
    return None


def positions(parts: Parts) -> list[int]:
    """Answers that are positions in each part: positions in the request, ascending."""
    return sorted(where[p] for where, found in parts for p in found)


def commit_results(parts: Parts) -> CommitResult:
    corrections: list[Correction] = []
    rejected: list[DeadLetter] = []
    at: list[int] = []
    for where, answer in parts:
        result = CommitResult(*answer)
        corrections += result.corrections
        rejected += result.rejected
        at += [where[p] for p in result.positions]
    return CommitResult(corrections, rejected, at)


# -- merges of every partition's answers -----------------------------------------------------------
def flat(found: list[list[Any]]) -> list[Any]:
    """Every partition's answer items, in partition order."""
    return [x for part in found for x in part]


def every(found: list[bool]) -> bool:
    return all(found)


def sum_counts(found: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in found:
        for k, v in part.items():
            out[k] = out.get(k, 0) + int(v)
    return out


def by_ref(found: list[list[tuple[Namespace, str, Any]]]) -> list[tuple[Namespace, str, Any]]:
    """Every partition's ``(namespace, doc_id, ...)`` items in (namespace, doc_id) order: each
    partition's first ``limit`` past a cursor, merged, are the first ``limit`` of them all."""
    return sorted((x for part in found for x in part), key=lambda x: (x[0], x[1]))


def sorted_union(found: list[list[Any]]) -> list[Any]:
    return sorted({x for part in found for x in part})


def digest(found: list[tuple[int, int]]) -> tuple[int, int]:
    """``(count, checksum)`` over every partition (checksums add modulo 2**64)."""
    return sum(n for n, _ in found), sum(s for _, s in found) % (1 << 64)


# -- whose an item of a batch is -------------------------------------------------------------------
def row_user(row: MessageRow | DeadLetter) -> tuple[str, str]:
    return row.app, row.user_id


def key_user(key: ConversationKey) -> tuple[str, str]:
    return key.app, key.user_id


def first_key_user(request: tuple[ConversationKey, Any]) -> tuple[str, str]:
    return request[0].app, request[0].user_id


def ns_user(row: EmbeddingRow) -> tuple[str, str]:
    return row.namespace[0], row.namespace[1]


def ref_user(ref: tuple[Namespace, str]) -> tuple[str, str]:
    return ref[0][0], ref[0][1]
