"""`ShardRouter`: sends index calls to the right :class:`~memray.index.shard.VectorShard` actors.

A user's namespaces all live on shard ``user_hash(app, user_id) % n`` (the rule the store uses
too), so a user-scoped search touches one shard; :meth:`ShardRouter.search_app` fans out to every
shard concurrently and merges the top ``k`` by score (see :mod:`memray.index.scorer` for what
scores mean). Scores are absolute, so hits of different shards merge by them directly; BM25
statistics are per shard, so an app-wide lexical score is BM25 over that shard's part of the app.

Writes propagate errors (the caller retries; the store stays the truth). Searches never raise:
a shard that fails (down: ``UnavailableError``, or any other error) contributes nothing and the
result is flagged ``degraded`` with a reason naming the shard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Iterator
from itertools import repeat
from typing import Any, NamedTuple, TypeVar

from memray.ids import Namespace, as_namespace, user_hash
from memray.index.base import IndexItem, ShardHit
from memray.index.client import ShardClient
from memray.index.lexical import Bm25Stats
from memray.index.scorer import top_hits
from memray.index.search import AppSearch, NamespaceSearch, Query, ShardReply, ShardSearch, UserSearch
from memray.index.wire import ItemBatch, SearchBatch
from memray.rpc.batch import Coalescer

__all__ = ["ShardRouter", "RouterResult"]

T = TypeVar("T")


class RouterResult(NamedTuple):
    hits: list[ShardHit]
    degraded: bool
    reason: str | None
    stats: Bm25Stats  # of everything searched (see ShardReply)
    stamps: dict[Namespace, int]  # indexing stamps of the query's watched namespaces
    held: dict[Namespace, list[int]]  # of the watched seqs, those indexed


async def _all(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Await every call concurrently; if any failed, raise the first error after all settle."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


class ShardRouter:
    """Routes upserts, deletes, drops and searches to ``shards``."""

    def __init__(self, shards: list[ShardClient]) -> None:
        self._batches: dict[int, Coalescer[ShardSearch, ShardReply | Exception]] = {}
        if not shards:
            raise ValueError("ShardRouter needs at least one shard")
        self.shards = shards

    def shard_of(self, app: str, user_id: str) -> int:
        return user_hash(app, user_id) % len(self.shards)

    def _group(self, refs: Iterable[T], ns_of: Any) -> dict[int, list[T]]:
        groups: dict[int, list[T]] = {}
        for ref in refs:
            ns = ns_of(ref)
            groups.setdefault(self.shard_of(ns[0], ns[1]), []).append(ref)
        return groups

    # -- writes ---------------------------------------------------------------------------

    async def upsert(self, items: list[IndexItem], model_id: str) -> int:
        groups = self._group(items, lambda item: item.namespace)
        counts = await _all(self.shards[s].upsert(ItemBatch(part), model_id) for s, part in groups.items())
        return sum(counts)

    async def delete(self, refs: list[tuple[Namespace, str]]) -> int:
        groups = self._group(refs, lambda ref: ref[0])
        counts = await _all(self.shards[s].delete(part) for s, part in groups.items())
        return sum(counts)

    async def drop(self, app: str, user_id: str, kind: str | None = None, scope: str | None = None) -> int:
        removed: int = await self.shards[self.shard_of(app, user_id)].drop(app, user_id, kind, scope)
        return removed

    async def count_user(self, app: str, user_id: str) -> int:
        count: int = await self.shards[self.shard_of(app, user_id)].count_user(app, user_id)
        return count

    async def snapshot(self) -> None:
        await _all(shard.snapshot() for shard in self.shards)

    # -- reads ----------------------------------------------------------------------------

    async def search(self, namespaces: list[Namespace], query: Query) -> RouterResult:
        """Search ``namespaces`` (normally one user's, hence one shard). ``query.model_id``: the
        query vector's model (shards answer from that model's indexes only; see VectorShard.search)."""
        return await self._gather(self._fanout(NamespaceSearch(namespaces, query)), query)

    async def search_user(self, app: str, user_id: str, kind: str, query: Query) -> RouterResult:
        """Search every namespace of one user and ``kind``: one shard."""
        return await self._gather(self._fanout(UserSearch(app, user_id, kind, query)), query)

    async def search_app(self, app: str, kind: str, query: Query) -> RouterResult:
        """Search every namespace of ``app`` and ``kind`` on every shard; merge the top ``k``."""
        return await self._gather(self._fanout(AppSearch(app, kind, query)), query)

    async def search_many(self, requests: list[ShardSearch]) -> list[RouterResult]:
        """Many searches (each as :meth:`search`, :meth:`search_user` or :meth:`search_app` would
        make it) with one ``search_many`` call per shard they touch, answered in order. A shard
        that fails degrades the searches that touched it, as a single search would be."""
        fanouts = [self._fanout(request) for request in requests]
        by_shard: dict[int, list[ShardSearch]] = {}
        for fanout in fanouts:
            for s, part in fanout.items():
                by_shard.setdefault(s, []).append(part)
        order = list(by_shard)
        calls = await asyncio.gather(
            *(self.shards[s].search_many(SearchBatch(by_shard[s])) for s in order), return_exceptions=True
        )
        replies: dict[int, Iterator[ShardReply | BaseException]] = {}
        for s, got in zip(order, calls):
            if isinstance(got, BaseException) and not isinstance(got, Exception):
                raise got  # CancelledError, KeyboardInterrupt: not a shard failure
            replies[s] = iter(got) if not isinstance(got, BaseException) else repeat(got)
        out = []
        for request, fanout in zip(requests, fanouts):
            shards = list(fanout)
            out.append(self._combine(shards, [_reply(next(replies[s])) for s in shards], request.query))
        return out

    def _fanout(self, request: ShardSearch) -> dict[int, ShardSearch]:
        """The part of ``request`` each shard answers."""
        if isinstance(request, NamespaceSearch):
            groups = self._group(request.namespaces, lambda ns: ns)
            return {s: NamespaceSearch(part, request.query) for s, part in groups.items()}
        if isinstance(request, UserSearch):
            return {self.shard_of(request.app, request.user_id): request}
        return {s: request for s in range(len(self.shards))}

    async def _search_on(self, shard: int, request: ShardSearch) -> ShardReply | BaseException:
        """One search on ``shard``, batched with the searches other callers make at the same time
        into one ``search_many`` actor call (its error returned, not raised)."""
        batch = self._batches.get(shard)
        if batch is None:
            client = self.shards[shard]
            batch = self._batches[shard] = Coalescer(
                lambda requests: client.search_many(SearchBatch(requests)), max_batch=256
            )
        return _reply(await batch.get(request))

    async def _gather(self, calls: dict[int, ShardSearch], query: Query) -> RouterResult:
        order = list(calls)
        results = await asyncio.gather(*(self._search_on(s, calls[s]) for s in order), return_exceptions=True)
        return self._combine(order, results, query)

    def _combine(self, order: list[int], results: list[ShardReply | BaseException], query: Query) -> RouterResult:
        """One search's answer from the replies (or errors) of the shards in ``order``."""
        hits: list[ShardHit] = []
        stats: list[Bm25Stats] = []
        stamps: dict[Namespace, int] = {}
        held: dict[Namespace, list[int]] = {}
        failures: list[str] = []
        for s, result in zip(order, results):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # CancelledError, KeyboardInterrupt: not a shard failure
                failures.append(f"{self.shards[s].label} failed: {type(result).__name__}: {result}")
            else:
                # (each as it came when it is of its class already: pickling keeps the classes)
                hits.extend(hit if type(hit) is ShardHit else ShardHit(*hit) for hit in result.hits)
                stats.append(result.stats if type(result.stats) is Bm25Stats else Bm25Stats(*result.stats))
                for ns, stamp in result.stamps.items():
                    key = as_namespace(ns)
                    stamps[key] = max(stamp, stamps.get(key, 0))
                for ns, seqs in result.held.items():
                    held.setdefault(as_namespace(ns), []).extend(seqs)
        reason = "; ".join(failures) if failures else None
        floor = query.min_score if query.stream is None else 0.0  # a stream score is not a relevance: shards applied it
        merged = stats[0] if len(stats) == 1 else Bm25Stats.merge(stats)  # (one shard: nothing to merge)
        return RouterResult(top_hits(hits, query.k, floor), bool(failures), reason, merged, stamps, held)


def _reply(result: ShardReply | BaseException) -> ShardReply | BaseException:
    """A shard's answer to one search of a ``search_many`` call: its reply (rebuilt as a
    :class:`ShardReply`: Ray returns plain tuples) or its error."""
    return result if isinstance(result, BaseException) else ShardReply(*result)
