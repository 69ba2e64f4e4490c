"""`Recall`: search and context assembly for a conversation, run where the caller is.

A scoped search is one call to one shard (the query is embedded in the caller's process), plus
one store read to hydrate the hits: that is the whole distance from the floor (a round trip to a
shard). ``context()`` asks the host for the recent messages while the shard answers the recall,
concurrently. Any failure on the recall path gives the recent messages with ``degraded=True``
and a reason; it never raises to the agent. A query the embedder cannot embed (endpoint down,
wrong dimension) is searched lexically, flagged ``degraded`` with the embedder's error as reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Callable, Literal

from memray.conversation.context import assemble
from memray.conversation.working_memory import WorkingMemory, render_instructions
from memray.errors import EmbeddingError
from memray.ids import ConversationKey
from memray.metrics import DEGRADED_RECALLS, SEARCH_LATENCY
from memray.models import Context, Hit, Message, RetrievalMode
from memray.runtime.batch import Coalescer
from memray.runtime.ref import ActorRef
from memray.store.rows import conversation_namespace, row_to_message

if TYPE_CHECKING:
    from memray.embedding.base import Embedder
    from memray.index.base import ShardHit
    from memray.index.router import ShardRouter

__all__ = ["Recall", "SearchResults", "Scope", "Merge"]

log = logging.getLogger(__name__)

Scope = Literal["conversation", "user"]
Merge = Literal["append", "prepend", "interleave"]


class SearchResults(list[Hit]):
    """A list of hits that also says whether the search was degraded (a shard down)."""

    degraded: bool = False
    reason: str | None = None


class Recall:
    def __init__(self, embedder: Embedder | None, router: ShardRouter, store: ActorRef, default_mode: RetrievalMode) -> None:
        self._embedder = embedder
        self._router = router
        self._store = store
        self._mode = default_mode
        #: Called before each search (the facade checks there whether the active model changed).
        self.before_search: Callable[[], None] | None = None
        self._embedding: tuple[Embedder, Coalescer[str, Any]] | None = None
        self._recent_batches: dict[str, Coalescer[tuple[ConversationKey, int], list[Message]]] = {}
        self._extras_batch: Coalescer[tuple[ConversationKey, str], tuple[str | None, str | None]] = Coalescer(
            lambda requests: self._store.call("context_extras", requests)
        )

    def set_embedder(self, embedder: Embedder | None) -> None:
        """Embed queries with ``embedder`` from now on (after a re-embedding cutover)."""
        self._embedder = embedder

    async def search(
        self, key: ConversationKey, query: str, limit: int, min_score: float | None = None,
        mode: RetrievalMode | None = None, scope: Scope = "conversation",
    ) -> SearchResults:
        t0 = time.perf_counter()
        mode, vector, model_id, failed = await self._query(query, mode)
        if scope == "conversation":
            result = await self._router.search([conversation_namespace(key)], vector, query, limit, mode, min_score, model_id)
        else:
            result = await self._router.search_user(key.app, key.user_id, "conv", vector, query, limit, mode, min_score, model_id)
        out = SearchResults(await self._hydrate(result.hits))
        return _finish(out, result.degraded, result.reason, failed, scope, t0)

    async def search_app(
        self, app: str, query: str, limit: int, min_score: float | None = None, mode: RetrievalMode | None = None,
    ) -> SearchResults:
        """Every conversation of ``app`` (all users): fans out to every shard, merges the top ``limit``."""
        t0 = time.perf_counter()
        mode, vector, model_id, failed = await self._query(query, mode)
        result = await self._router.search_app(app, "conv", vector, query, limit, mode, min_score, model_id)
        out = SearchResults(await self._hydrate(result.hits))
        return _finish(out, result.degraded, result.reason, failed, "app", t0)

    async def _query(
        self, query: str, mode: RetrievalMode | None
    ) -> tuple[RetrievalMode, Any, str | None, str | None]:
        """(mode, query vector, its model id, why the embedder could not be used). No embedder:
        lexical (documented, not degraded); a failing embedder: lexical, and the reason."""
        if self.before_search is not None:
            self.before_search()
        embedder = self._embedder  # one model for this query, whatever happens meanwhile
        mode = mode or self._mode
        if embedder is None or mode == "lexical":
            return "lexical", None, None, None
        try:
            vector = await self._embed_batch(embedder).get(query)
        except EmbeddingError as exc:  # the embedder is down or misconfigured: lexical only
            return "lexical", None, None, f"query embedding failed, lexical results only: {exc}"
        return mode, vector, embedder.model_id, None

    def _embed_batch(self, embedder: Embedder) -> Coalescer[str, Any]:
        """Queries of concurrent searches embedded in one batch (4x the throughput of one by one)."""
        if self._embedding is None or self._embedding[0] is not embedder:
            async def embed(queries: list[str]) -> list[Any]:
                return list(await asyncio.to_thread(embedder.embed, queries))

            batch: Coalescer[str, Any] = Coalescer(embed, max_batch=512)
            self._embedding = (embedder, batch)
        return self._embedding[1]

    def _recent(self, host: ActorRef, key: ConversationKey, limit: int) -> Awaitable[list[Message]]:
        """The host's recent messages, batched with the other context() calls to that host."""
        batch = self._recent_batches.get(host.label)
        if batch is None:
            batch = self._recent_batches[host.label] = Coalescer(lambda requests: host.call("recent_many", requests))
        return batch.get((key, limit))

    async def _hydrate(self, hits: list[ShardHit]) -> list[Hit]:
        """Hits as messages: from the shard's payload, or from the store where it has none
        (one store call per user whose hits lack a payload)."""
        missing: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for h in hits:
            if not h.payload:
                missing.setdefault((h.namespace.app, h.namespace.user_id), []).append((h.namespace.scope, h.doc_id))
        by_ref: dict[tuple[str, str, str, str], Message] = {}
        for (app, user_id), refs in missing.items():
            for r in await self._store.call("fetch_messages", app, user_id, refs):
                by_ref[(app, user_id, r.conversation_id, r.id)] = row_to_message(r)
        out = []
        for h in hits:
            ns = h.namespace
            msg = Message.model_validate_json(h.payload) if h.payload else by_ref.get((ns.app, ns.user_id, ns.scope, h.doc_id))
            if msg is not None:  # a hit deleted meanwhile is dropped
                out.append(Hit(message=msg, score=h.score, conversation_id=ns.scope))
        return out

    async def context(
        self, host: ActorRef, key: ConversationKey, wm: WorkingMemory, query: str | None, limit: int = 10, semantic_limit: int = 5,
        merge: Merge = "append", scope: Scope = "conversation", token_budget: int | None = None,
        mode: RetrievalMode | None = None,
    ) -> Context:
        recent_call = self._recent(host, key, limit)
        extras_call = self._extras(key, wm)
        if not query or semantic_limit <= 0:
            only_recent, (summary_text, note) = await asyncio.gather(recent_call, extras_call)
            return assemble(only_recent, [], merge, summary_text, note, token_budget)
        recall_call = self.search(key, query, semantic_limit + limit, None, mode, scope)
        got_recent, extras, recalled = await asyncio.gather(recent_call, extras_call, recall_call, return_exceptions=True)
        if isinstance(got_recent, BaseException):
            raise got_recent
        recent = got_recent
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
            degraded, reason = True, (reason + "; " if reason else "") + f"summary/working memory unavailable: {extras!r}"
        ctx = assemble(recent, hits, merge, summary, block, token_budget)
        if isinstance(recalled, BaseException) or isinstance(extras, BaseException):  # (a degraded search counted itself)
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
