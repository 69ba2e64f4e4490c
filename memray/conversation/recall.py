"""`Recall`: search and context assembly for a conversation, run where the caller is.

A scoped search is one call to one shard (the query is embedded in the caller's process by the
:class:`~memray.embedding.query.QueryEncoder`). Hits carry the message JSON the shard keeps, so
they need no store read (the store is read only for items a rebuilt shard holds without it).

Read-your-writes (:mod:`memray.conversation.tail`), in one call:

- ``search``: this process keeps what it added and has not yet seen indexed (:class:`Written`);
  the search tells the shard those seqs, the shard says which it holds, and the rest are scored
  here with the shard's BM25 statistics. So a search right after an ``add`` finds it (in the
  conversation, and with ``scope="user"`` in every conversation of the user this process wrote
  to); what another process added is found once indexed (normally well under a second).
- ``context``: asks the conversation's host for the recent messages anyway, and the host adds the
  conversation's tail (what *any* writer added that the shard has not confirmed), so context
  sees every message acknowledged before the call.

``context()`` asks the host while the shard answers the recall, concurrently. Any failure on the
recall path gives the recent messages with ``degraded=True`` and a reason; it never raises to
the agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import numpy as np

from memray.conversation.client import HostClient
from memray.conversation.context import assemble
from memray.conversation.instructions import render_instructions
from memray.conversation.tail import Tail, TailSearch, score_tails
from memray.conversation.working_memory import WorkingMemory
from memray.conversation.written import Tails, Written
from memray.embedding.query import Encoded, QueryEncoder
from memray.ids import ConversationKey, Namespace, conversation_namespace
from memray.index.base import ShardHit
from memray.index.lexical import Bm25Stats
from memray.index.search import Query
from memray.metrics import DEGRADED_RECALLS, SEARCH_LATENCY
from memray.models import Context, Hit, Merge, Message, RetrievalMode, Scope
from memray.rpc.batch import Coalescer
from memray.scoring import Stream, Window
from memray.store.base import WMScope
from memray.store.partitions import StorePartitions
from memray.store.rows import row_to_message

if TYPE_CHECKING:
    from memray.index.router import RouterResult, ShardRouter

__all__ = ["Recall", "SearchResults"]

log = logging.getLogger(__name__)


class SearchResults(list[Hit]):
    """A list of hits that also says whether the search was degraded (a shard down)."""

    degraded: bool = False
    reason: str | None = None


class Recall:
    def __init__(
        self,
        encoder: QueryEncoder,
        router: ShardRouter,
        store: StorePartitions,
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
        #: What this process added and has not seen indexed (searches find it).
        self.written = Written()
        self._recent_batches: dict[str, Coalescer[tuple[ConversationKey, int], tuple[list[Message], Tail]]] = {}
        #: The newest recent messages context() keeps even when the summary covers them
        #: (``SummarizerConfig.keep_messages``; the facade sets it).
        self.keep_messages = 6
        self._extras_batch: Coalescer[tuple[ConversationKey, WMScope], tuple[str | None, str | None, int]] = Coalescer(
            lambda requests: self._store.context_extras(requests)
        )

    # -- search -----------------------------------------------------------------------------
    async def search(
        self,
        key: ConversationKey,
        query: str,
        limit: int,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        scope: Scope = "conversation",
        stream: Stream | None = None,
        window: Window | None = None,
    ) -> SearchResults:
        """``stream``: memory-stream scoring; ``window``: time bounds (:mod:`memray.scoring`)."""
        return await self._search(key, query, limit, min_score, mode, scope, None, stream, window)

    async def search_app(
        self,
        app: str,
        query: str,
        limit: int,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        stream: Stream | None = None,
        window: Window | None = None,
    ) -> SearchResults:
        """Every conversation of ``app`` (all users): fans out to every shard, merges the top
        ``limit``. Sees what is indexed (no read-your-writes tail: that would ask every host)."""
        t0 = time.perf_counter()
        encoded = await self._encode(query, mode)
        result = await self._router.search_app(app, "conv", encoded.query(query, limit, min_score, (), stream, window))
        out = SearchResults(await self._hydrate(result.hits, {}))
        return _finish(out, result.degraded, result.reason, encoded.failed, "app", t0)

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
        host_tail: Awaitable[Tail] | None,
        stream: Stream | None = None,
        window: Window | None = None,
    ) -> SearchResults:
        """A search; its read-your-writes tail is this process's unseen writes (``host_tail``
        None), or the conversation's host's tail (context())."""
        t0 = time.perf_counter()
        encoded = await self._encode(query, mode)
        unseen = self.written.unseen(key, scope)
        if host_tail is not None:  # the host's tail covers this conversation, whoever wrote to it
            unseen[key] = {}
        watch = tuple((conversation_namespace(k), tuple(seq for seq, _ in mine.values())) for k, mine in unseen.items())
        request = encoded.query(query, limit, min_score, watch, stream, window)

        def run() -> Awaitable[RouterResult]:
            if scope == "conversation":
                return self._router.search([conversation_namespace(key)], request)
            return self._router.search_user(key.app, key.user_id, "conv", request)

        tail_failure = None
        if host_tail is None:
            result = await run()
            tails = self.written.seen(key, result.held)
        else:
            answered, got = await asyncio.gather(run(), host_tail, return_exceptions=True)
            if isinstance(answered, BaseException):
                raise answered
            result = answered
            if isinstance(got, BaseException):
                if not isinstance(got, Exception):
                    raise got
                tail_failure = f"messages not yet indexed were not searched (their host failed: {got})"
            elif got.stamp > result.stamps.get(conversation_namespace(key), 0):
                result = await run()  # the host saw an upsert confirmed that the shard's answer predates
            tails = self.written.seen(key, result.held)
            tails.pop(key, None)
            if not isinstance(got, BaseException):
                tails[key] = got
        hits, from_tail = self._merge(result.hits, tails, encoded, request, result.stats)
        out = SearchResults(await self._hydrate(hits, from_tail))
        reason = "; ".join(r for r in (result.reason, tail_failure) if r) or None
        return _finish(out, result.degraded or tail_failure is not None, reason, encoded.failed, scope, t0)

    def _merge(
        self, hits: list[ShardHit], tails: Tails, encoded: Encoded, request: Query, stats: Bm25Stats
    ) -> tuple[list[ShardHit], dict[tuple[Namespace, str], Message]]:
        """The shard's hits and the tails' messages scored as the shard would (one batch of the
        scoring kernel, :func:`~memray.conversation.tail.score_tails`), best ``request.k`` first.
        A message in a tail is newer than (or absent from) the shard's copy: the tail's version wins."""
        pending = [(conversation_namespace(k), t.messages) for k, t in tails.items() if t.messages]
        if not pending:
            return hits, {}
        vectors = None
        embedder = self.encoder.embedder
        if encoded.vector is not None and embedder is not None and getattr(embedder, "recomputable", False):
            vectors = np.asarray(embedder.embed([m.text for _, msgs in pending for m in msgs]), dtype=np.float32)
        merged = score_tails([TailSearch(request, stats, hits, pending, vectors)], self._neighbour_weight)[0]
        return merged, {(ns, m.id): m for ns, msgs in pending for m in msgs}

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
        stream: Stream | None = None,
    ) -> Context:
        recent_call = asyncio.ensure_future(self._recent(host, key, limit))
        extras_call = self._extras(key, wm)
        if not query or semantic_limit <= 0:
            (only_recent, _), (summary_text, note, through) = await asyncio.gather(recent_call, extras_call)
            return assemble(self._uncovered(only_recent, through), [], merge, summary_text, note, token_budget)

        async def host_tail() -> Tail:  # the conversation's tail comes with its recent messages
            return (await recent_call)[1]

        recall_call = self._search(key, query, semantic_limit + limit, min_score, mode, scope, host_tail(), stream)
        got_recent, extras, recalled = await asyncio.gather(
            recent_call, extras_call, recall_call, return_exceptions=True
        )
        if isinstance(got_recent, BaseException):
            raise got_recent
        summary, block, through = (None, None, 0) if isinstance(extras, BaseException) else extras
        recent = self._uncovered(got_recent[0], through)
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

    def _uncovered(self, recent: list[Message], through: int) -> list[Message]:
        """``recent`` without the messages the summary covers (seq <= ``through``): the summary
        stands for them in the prompt. The newest ``keep_messages`` stay whatever it covers.
        Recalled messages are not filtered: they are the verbatim detail a summary loses."""
        if through <= 0:
            return recent
        keep = len(recent) - self.keep_messages
        return [m for i, m in enumerate(recent) if i >= keep or (m.seq or 0) > through]

    async def _extras(self, key: ConversationKey, wm: WorkingMemory) -> tuple[str | None, str | None, int]:
        """The summary text, the working-memory block (None when there is none) and the seq the
        summary covers through: one store call for all the context() calls running at once (see
        :class:`Coalescer`)."""
        summary, raw, through = await self._extras_batch.get((key, wm.spec.scope))
        note = wm.value_of(raw, 0)
        block = render_instructions(wm.spec, note.text) if note.content is not None else None
        return summary, block, int(through)


def _finish(
    out: SearchResults, degraded: bool, reason: str | None, failed: str | None, scope: str, t0: float
) -> SearchResults:
    reasons = [r for r in (failed, reason) if r]
    out.degraded, out.reason = degraded or failed is not None, "; ".join(reasons) or None
    SEARCH_LATENCY.observe(time.perf_counter() - t0, {"scope": scope})
    if degraded:
        DEGRADED_RECALLS.inc(1, {"scope": scope})
    return out
