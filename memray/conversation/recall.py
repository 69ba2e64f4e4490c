"""`Recall`: search and context assembly for a conversation, run where the caller is.

A scoped search is one call to one shard (the query is embedded in the caller's process by the
:class:`~memray.embedding.query.QueryEncoder`), made while the conversation's host is asked for
the read-your-writes tail (:mod:`memray.conversation.tail`): the messages acknowledged that the
shard may not hold yet, scored here with the shard's BM25 statistics. So a search or context
right after an ``add`` finds what it added, without waiting for indexing. Hits carry the message
JSON the shard keeps, so they need no store read (the store is read only for items a rebuilt
shard holds without it).

Scope ``"user"`` searches every conversation of the user on their shard; its read-your-writes
tail covers the handle's own conversation and every other conversation this process wrote to
(:meth:`Recall.note_written`); writes made by other processes to other conversations of the
user are found once indexed (normally well under a second).

``context()`` asks the host for the recent messages (with the tail) while the shard answers the
recall, concurrently. Any failure on the recall path gives the recent messages with
``degraded=True`` and a reason; it never raises to the agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from memray.conversation.client import HostClient
from memray.conversation.context import assemble
from memray.conversation.instructions import render_instructions
from memray.conversation.tail import Tail, score_tail, support_neighbours
from memray.conversation.working_memory import WorkingMemory
from memray.embedding.query import Encoded, QueryEncoder
from memray.ids import ConversationKey, Namespace, conversation_namespace
from memray.index.base import ShardHit
from memray.index.fusion import hit_order
from memray.metrics import DEGRADED_RECALLS, SEARCH_LATENCY
from memray.models import Context, Hit, Merge, Message, RetrievalMode, Scope
from memray.rpc.batch import Coalescer
from memray.store.base import WMScope
from memray.store.client import StoreClient
from memray.store.rows import row_to_message

if TYPE_CHECKING:
    from memray.index.router import RouterResult, ShardRouter

__all__ = ["Recall", "SearchResults"]

log = logging.getLogger(__name__)

#: How long a conversation this process wrote to stays in user-wide read-your-writes without a
#: search confirming its tail empty (a bound on memory for writers that never search).
WRITTEN_TTL_S = 60.0

Tails = dict[ConversationKey, Tail]


class SearchResults(list[Hit]):
    """A list of hits that also says whether the search was degraded (a shard down)."""

    degraded: bool = False
    reason: str | None = None


class Recall:
    def __init__(
        self,
        encoder: QueryEncoder,
        router: ShardRouter,
        store: StoreClient,
        default_mode: RetrievalMode,
        host_for: Callable[[ConversationKey], HostClient],
        neighbour_weight: float = 0.0,
    ) -> None:
        self.encoder = encoder
        self._router = router
        self._store = store
        self._mode = default_mode
        self._host_for = host_for
        self._neighbour_weight = neighbour_weight
        #: Called before each search (the facade checks there whether the active model changed).
        self.before_search: Callable[[], None] | None = None
        self._written: dict[tuple[str, str], dict[ConversationKey, float]] = {}
        self._recent_batches: dict[str, Coalescer[tuple[ConversationKey, int], tuple[list[Message], Tail]]] = {}
        self._tail_batches: dict[str, Coalescer[ConversationKey, Tail]] = {}
        self._extras_batch: Coalescer[tuple[ConversationKey, WMScope], tuple[str | None, str | None]] = Coalescer(
            lambda requests: self._store.context_extras(requests)
        )

    def note_written(self, keys: Iterable[ConversationKey]) -> None:
        """This process acknowledged writes to ``keys``: user-wide searches cover their tails."""
        now = time.monotonic()
        for key in keys:
            self._written.setdefault((key.app, key.user_id), {})[key] = now

    # -- search -----------------------------------------------------------------------------
    async def search(
        self,
        key: ConversationKey,
        query: str,
        limit: int,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        scope: Scope = "conversation",
    ) -> SearchResults:
        watched = self._watched(key, scope)
        return await self._search(key, query, limit, min_score, mode, scope, self._tails(watched), watched)

    async def search_app(
        self, app: str, query: str, limit: int, min_score: float | None = None, mode: RetrievalMode | None = None
    ) -> SearchResults:
        """Every conversation of ``app`` (all users): fans out to every shard, merges the top
        ``limit``. Sees what is indexed (no read-your-writes tail: that would ask every host)."""
        t0 = time.perf_counter()
        encoded = await self._encode(query, mode)
        result = await self._router.search_app(app, "conv", encoded.query(query, limit, min_score))
        out = SearchResults(await self._hydrate(result.hits, {}))
        return _finish(out, result.degraded, result.reason, encoded.failed, "app", t0)

    def _watched(self, key: ConversationKey, scope: Scope) -> list[ConversationKey]:
        if scope == "conversation":
            return [key]
        written = self._written.get((key.app, key.user_id), {})
        horizon = time.monotonic() - WRITTEN_TTL_S
        for old in [k for k, t in written.items() if t < horizon]:
            del written[old]
        return list(dict.fromkeys([key, *written]))

    async def _encode(self, query: str, mode: RetrievalMode | None) -> Encoded:
        if self.before_search is not None:
            self.before_search()
        return await self.encoder.encode(query, mode or self._mode)

    async def _search(
        self,
        key: ConversationKey,
        query: str,
        limit: int,
        min_score: float | None,
        mode: RetrievalMode | None,
        scope: Scope,
        tails_call: Awaitable[Tails],
        watched: list[ConversationKey],
    ) -> SearchResults:
        t0 = time.perf_counter()
        encoded = await self._encode(query, mode)
        watch = tuple(conversation_namespace(k) for k in watched)
        request = encoded.query(query, limit, min_score, watch)

        def run() -> Awaitable[RouterResult]:
            if scope == "conversation":
                return self._router.search([conversation_namespace(key)], request)
            return self._router.search_user(key.app, key.user_id, "conv", request)

        result, tails = await asyncio.gather(run(), tails_call, return_exceptions=True)
        if isinstance(result, BaseException):
            raise result
        tail_failure = None
        if isinstance(tails, BaseException):
            if not isinstance(tails, Exception):
                raise tails
            tail_failure, tails = f"messages not yet indexed were not searched (their host failed: {tails})", {}
        elif any(t.stamp > result.stamps.get(conversation_namespace(k), 0) for k, t in tails.items()):
            result = await run()  # the host saw an upsert confirmed that the shard's answer predates
        self._settle_written(key, tails)
        hits, from_tail = self._merge(result.hits, tails, encoded, request, result.stats)
        out = SearchResults(await self._hydrate(hits, from_tail))
        reason = "; ".join(r for r in (result.reason, tail_failure) if r) or None
        return _finish(out, result.degraded or tail_failure is not None, reason, encoded.failed, scope, t0)

    def _settle_written(self, key: ConversationKey, tails: Tails) -> None:
        written = self._written.get((key.app, key.user_id))
        if written:
            for k, tail in tails.items():
                if not tail.messages:
                    written.pop(k, None)
            if not written:
                del self._written[(key.app, key.user_id)]

    def _merge(
        self, hits: list[ShardHit], tails: Tails, encoded: Encoded, request: Any, stats: Any
    ) -> tuple[list[ShardHit], dict[tuple[Namespace, str], Message]]:
        """The shard's hits and the tails' scored messages, best ``request.k`` first. A message in
        a tail is newer than (or absent from) the shard's copy: the tail's version wins."""
        pending = [(conversation_namespace(k), m) for k, t in tails.items() for m in t.messages]
        if not pending:
            return hits, {}
        msgs = [m for _, m in pending]
        vectors = None
        embedder = self.encoder.embedder
        if encoded.vector is not None and embedder is not None and getattr(embedder, "recomputable", False):
            vectors = np.asarray(embedder.embed([m.text for m in msgs]), dtype=np.float32)
        scores = score_tail(msgs, request, stats, vectors)
        from_tail = {(ns, m.id): m for ns, m in pending}
        merged = [h for h in hits if (Namespace(*h.namespace), h.doc_id) not in from_tail]
        if self._neighbour_weight > 0.0:  # as the shard does (memray.index.fusion)
            for ns in {ns for ns, _ in pending}:
                at = [n for n, (n_ns, _) in enumerate(pending) if n_ns == ns]
                known = {int(h.recency): h.score for h in merged if Namespace(*h.namespace) == ns}
                for n, score in zip(
                    at,
                    support_neighbours(
                        [msgs[n].seq or 0 for n in at], [scores[n] for n in at], known, self._neighbour_weight
                    ),
                ):
                    scores[n] = score
        floor = request.min_score
        for (ns, msg), score in zip(pending, scores):
            if score > 0.0 if floor is None else score >= floor:
                merged.append(ShardHit(ns, msg.id, score, float(msg.seq or 0), ""))
        merged.sort(key=hit_order)
        return merged[: request.k], from_tail

    def _tails(self, keys: list[ConversationKey]) -> Awaitable[Tails]:
        """The read-your-writes tails of ``keys`` from their hosts (batched per host)."""

        async def fetch() -> Tails:
            got = await asyncio.gather(*(self._tail_batch(self._host_for(k)).get(k) for k in keys))
            return dict(zip(keys, got))

        return fetch()

    def _tail_batch(self, host: HostClient) -> Coalescer[ConversationKey, Tail]:
        batch = self._tail_batches.get(host.label)
        if batch is None:

            async def fetch(keys: list[ConversationKey]) -> list[Tail]:
                return [Tail(*t) for t in await host.tails(keys)]

            batch = self._tail_batches[host.label] = Coalescer(fetch)
        return batch

    async def _hydrate(self, hits: list[ShardHit], from_tail: dict[tuple[Namespace, str], Message]) -> list[Hit]:
        """Hits as messages: from the tail, from the shard's payload, or from the store where it
        has none (one store call per user whose hits lack a payload)."""
        missing: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for h in hits:
            if not h.payload and (Namespace(*h.namespace), h.doc_id) not in from_tail:
                missing.setdefault((h.namespace.app, h.namespace.user_id), []).append((h.namespace.scope, h.doc_id))
        by_ref: dict[tuple[str, str, str, str], Message] = {}
        for (app, user_id), refs in missing.items():
            for r in await self._store.fetch_messages(app, user_id, refs):
                by_ref[(app, user_id, r.conversation_id, r.id)] = row_to_message(r)
        out = []
        for h in hits:
            ns = Namespace(*h.namespace)
            msg = from_tail.get((ns, h.doc_id))
            if msg is None:
                msg = (
                    Message.model_validate_json(h.payload)
                    if h.payload
                    else by_ref.get((ns.app, ns.user_id, ns.scope, h.doc_id))
                )
            if msg is not None:  # a hit deleted meanwhile is dropped
                out.append(Hit(message=msg, score=h.score, conversation_id=ns.scope))
        return out

    # -- context ----------------------------------------------------------------------------
    def _recent(self, host: HostClient, key: ConversationKey, limit: int) -> Awaitable[tuple[list[Message], Tail]]:
        """The host's recent messages and tail, batched with the other context() calls to that host."""
        batch = self._recent_batches.get(host.label)
        if batch is None:

            async def fetch(requests: list[tuple[ConversationKey, int]]) -> list[tuple[list[Message], Tail]]:
                return [(msgs, Tail(*tail)) for msgs, tail in await host.recent_many(requests)]

            batch = self._recent_batches[host.label] = Coalescer(fetch)
        return batch.get((key, limit))

    async def context(
        self,
        host: HostClient,
        key: ConversationKey,
        wm: WorkingMemory,
        query: str | None,
        limit: int = 10,
        semantic_limit: int = 5,
        merge: Merge = "append",
        scope: Scope = "conversation",
        token_budget: int | None = None,
        mode: RetrievalMode | None = None,
        min_score: float | None = None,
    ) -> Context:
        recent_call = asyncio.ensure_future(self._recent(host, key, limit))
        extras_call = self._extras(key, wm)
        if not query or semantic_limit <= 0:
            (only_recent, _), (summary_text, note) = await asyncio.gather(recent_call, extras_call)
            return assemble(only_recent, [], merge, summary_text, note, token_budget)
        watched = self._watched(key, scope)

        async def tails() -> Tails:  # this conversation's tail comes with its recent messages
            others = [k for k in watched if k != key]
            own, rest = await asyncio.gather(recent_call, self._tails(others))
            return {key: own[1], **rest}

        recall_call = self._search(key, query, semantic_limit + limit, min_score, mode, scope, tails(), watched)
        got_recent, extras, recalled = await asyncio.gather(
            recent_call, extras_call, recall_call, return_exceptions=True
        )
        if isinstance(got_recent, BaseException):
            raise got_recent
        recent = got_recent[0]
        summary, block = (None, None) if isinstance(extras, BaseException) else extras
        degraded, reason = False, None
        hits: list[Message] = []
        if isinstance(recalled, BaseException):
            degraded, reason = True, f"recall failed: {recalled!r}"
        else:
            seen = {m.id for m in recent}
            hits = [h.message for h in recalled if h.message.id not in seen][:semantic_limit]
            degraded, reason = recalled.degraded, recalled.reason
        if isinstance(extras, BaseException):
            degraded, reason = (
                True,
                (reason + "; " if reason else "") + f"summary/working memory unavailable: {extras!r}",
            )
        ctx = assemble(recent, hits, merge, summary, block, token_budget)
        if isinstance(recalled, BaseException) or isinstance(
            extras, BaseException
        ):  # (a degraded search counted itself)
            DEGRADED_RECALLS.inc(1, {"scope": "context"})
        return ctx.model_copy(update={"degraded": degraded, "reason": reason})

    async def _extras(self, key: ConversationKey, wm: WorkingMemory) -> tuple[str | None, str | None]:
        """The summary text and the working-memory block (None when there is none): one store
        call for all the context() calls running at once (see :class:`Coalescer`)."""
        summary, raw = await self._extras_batch.get((key, wm.spec.scope))
        note = wm.value_of(raw, 0)
        block = render_instructions(wm.spec, note.text) if note.content is not None else None
        return summary, block


def _finish(
    out: SearchResults, degraded: bool, reason: str | None, failed: str | None, scope: str, t0: float
) -> SearchResults:
    reasons = [r for r in (failed, reason) if r]
    out.degraded, out.reason = degraded or failed is not None, "; ".join(reasons) or None
    SEARCH_LATENCY.observe(time.perf_counter() - t0, {"scope": scope})
    if degraded:
        DEGRADED_RECALLS.inc(1, {"scope": scope})
    return out
