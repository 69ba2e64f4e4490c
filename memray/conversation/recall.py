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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from memray.conversation.client import HostClient
from memray.conversation.context import assemble
from memray.conversation.instructions import render_instructions
from memray.conversation.reads import ContextRead, SearchRead
from memray.conversation.tail import Tail, score_tail, support_neighbours
from memray.conversation.working_memory import WorkingMemory
from memray.conversation.written import Tails, Written
from memray.embedding.query import Encoded, QueryEncoder
from memray.ids import ConversationKey, Namespace, conversation_namespace
from memray.index.base import ShardHit
from memray.index.columns import columns_of
from memray.index.fusion import hit_order, rank
from memray.index.search import NamespaceSearch, ShardSearch, UserSearch
from memray.metrics import DEGRADED_RECALLS, SEARCH_LATENCY
from memray.models import Context, Hit, Message, RetrievalMode, Scope
from memray.rpc.batch import Answer, Coalescer, unwrap
from memray.scoring import Stream, Window
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


_NOT_ASKED = LookupError("not asked")  # a placeholder every slot of a batch's answer overwrites

#: The most reads one coalesced batch of single calls carries.
MAX_BATCH = 65536


class _Searched(NamedTuple):
    """One search of a batch, as far as the shard's answer: what was asked and what came back."""

    key: ConversationKey
    scope: Scope
    encoded: Encoded
    request: ShardSearch
    result: RouterResult


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
        #: The newest recent messages context() keeps even when the summary covers them
        #: (``SummarizerConfig.keep_messages``; the facade sets it).
        self.keep_messages = 6
        # single calls running at the same time are answered as one batch
        self._contexts: Coalescer[ContextRead, Answer[Context]] = Coalescer(self.context_many, MAX_BATCH)
        self._searches: Coalescer[SearchRead, Answer[SearchResults]] = Coalescer(self.search_many, MAX_BATCH)

    # -- search -----------------------------------------------------------------------------
    async def search(self, read: SearchRead) -> SearchResults:
        """One search; those running at the same time are answered together (:meth:`search_many`)."""
        return unwrap(await self._searches.get(read))

    async def search_many(self, reads: list[SearchRead]) -> list[Answer[SearchResults]]:
        """Many searches with one ``search_many`` call per shard, answered in order; each answer
        is what :meth:`search` would return, or the error it would raise."""
        t0 = time.perf_counter()
        encoded = await self._encode_many([(r.query, r.mode) for r in reads])
        requests = [
            self._request(r.key, r.scope, r.query, r.limit, r.min_score, e, r.stream, r.window, False)
            for r, e in zip(reads, encoded)
        ]
        results = await self._router.search_many(requests)
        searched = [_Searched(r.key, r.scope, e, q, res) for r, e, q, res in zip(reads, encoded, requests, results)]
        return await self._recalled(
            searched, [self.written.seen(r.key, res.held) for r, res in zip(reads, results)], t0
        )

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
        (encoded,) = await self._encode_many([(query, mode)])
        result = await self._router.search_app(app, "conv", encoded.query(query, limit, min_score, (), stream, window))
        (hits,) = await self._hydrate_many([(result.hits, {})])
        return _finish(SearchResults(unwrap(hits)), result.degraded, result.reason, encoded.failed, "app", t0)

    async def _encode_many(self, queries: list[tuple[str, RetrievalMode | None]]) -> list[Encoded]:
        if self.before_search is not None:
            self.before_search()
        return await self.encoder.encode_many([(text, mode or self._mode) for text, mode in queries])

    def _request(
        self,
        key: ConversationKey,
        scope: Scope,
        query: str,
        k: int,
        min_score: float | None,
        encoded: Encoded,
        stream: Stream | None,
        window: Window | None,
        host_tail: bool,
    ) -> ShardSearch:
        """The shard search of one read. It watches the conversations this process wrote to and
        has not seen indexed; with ``host_tail`` (context()) the conversation's host's tail covers
        the conversation itself, whoever wrote to it."""
        unseen = self.written.unseen(key, scope)
        if host_tail:
            unseen[key] = {}
        watch = tuple((conversation_namespace(k), tuple(seq for seq, _ in mine.values())) for k, mine in unseen.items())
        request = encoded.query(query, k, min_score, watch, stream, window)
        if scope == "conversation":
            return NamespaceSearch([conversation_namespace(key)], request)
        return UserSearch(key.app, key.user_id, "conv", request)

    async def _recalled(
        self, searched: list[_Searched], tails: list[Tails], t0: float, failures: Sequence[str | None] | None = None
    ) -> list[Answer[SearchResults]]:
        """Each search's hits merged with its read-your-writes ``tails``, hydrated and finished
        (``failures``: why a search's tail could not be had, which degrades it)."""
        merged: list[Answer[tuple[list[ShardHit], dict[tuple[Namespace, str], Message]]]] = []
        for s, tail in zip(searched, tails):
            try:
                merged.append(self._merge(s.result.hits, tail, s.encoded, s.request.query, s.result.stats))
            except Exception as exc:
                merged.append(exc)
        hydrated = iter(await self._hydrate_many([m for m in merged if not isinstance(m, BaseException)]))
        out: list[Answer[SearchResults]] = []
        for n, (s, m) in enumerate(zip(searched, merged)):
            hits = m if isinstance(m, BaseException) else next(hydrated)
            if isinstance(hits, BaseException):
                out.append(hits)
                continue
            failure = failures[n] if failures is not None else None
            reason = "; ".join(r for r in (s.result.reason, failure) if r) or None
            degraded = s.result.degraded or failure is not None
            out.append(_finish(SearchResults(hits), degraded, reason, s.encoded.failed, s.scope, t0))
        return out

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
        relevance = score_tail(msgs, request, stats, vectors)
        from_tail = {(ns, m.id): m for ns, m in pending}
        merged = [h for h in hits if (Namespace(*h.namespace), h.doc_id) not in from_tail]
        if self._neighbour_weight > 0.0:  # as the shard does (memray.index.fusion), before stream ranking
            for ns in {ns for ns, _ in pending}:
                at = [n for n, (n_ns, _) in enumerate(pending) if n_ns == ns]
                known = {
                    int(h.recency): h.score for h in merged if Namespace(*h.namespace) == ns and request.stream is None
                }
                for n, score in zip(
                    at,
                    support_neighbours(
                        [msgs[n].seq or 0 for n in at], [relevance[n] for n in at], known, self._neighbour_weight
                    ),
                ):
                    relevance[n] = score
        columns = np.array([columns_of(m.created_at, m.sim_time, m.importance) for m in msgs], dtype=np.float64)
        scores = rank(
            np.array(relevance, dtype=np.float64),
            columns.reshape(-1, 3),
            request.min_score,
            request.stream,
            request.window,
        )
        for (ns, msg), score in zip(pending, scores.tolist()):
            if score == score:  # NaN: not a hit (outside the window, or under the relevance floor)
                merged.append(ShardHit(ns, msg.id, score, float(msg.seq or 0), ""))
        merged.sort(key=hit_order)
        return merged[: request.k], from_tail

    async def _hydrate_many(
        self, found: list[tuple[list[ShardHit], dict[tuple[Namespace, str], Message]]]
    ) -> list[Answer[list[Hit]]]:
        """Each search's hits as messages: from the tail, from the shard's payload, or from the
        store where it has none (one store call per user whose hits lack a payload, for the whole
        batch; a search whose store call failed gets that error)."""
        missing: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for hits, from_tail in found:
            for h in hits:
                if not h.payload and (Namespace(*h.namespace), h.doc_id) not in from_tail:
                    missing.setdefault((h.namespace.app, h.namespace.user_id), []).append((h.namespace.scope, h.doc_id))
        by_ref: dict[tuple[str, str, str, str], Message] = {}
        failed: dict[tuple[str, str], BaseException] = {}
        if missing:
            users = list(missing)
            rows = await asyncio.gather(
                *(self._store.fetch_messages(app, user_id, missing[(app, user_id)]) for app, user_id in users),
                return_exceptions=True,
            )
            for (app, user_id), got in zip(users, rows):
                if isinstance(got, BaseException):
                    if not isinstance(got, Exception):
                        raise got
                    failed[(app, user_id)] = got
                    continue
                for r in got:
                    by_ref[(app, user_id, r.conversation_id, r.id)] = row_to_message(r)
        out: list[Answer[list[Hit]]] = []
        for hits, from_tail in found:
            error = next(
                (failed[u] for u in {(h.namespace.app, h.namespace.user_id) for h in hits} if u in failed), None
            )
            out.append(error if error is not None else self._hits(hits, from_tail, by_ref))
        return out

    @staticmethod
    def _hits(
        hits: list[ShardHit],
        from_tail: dict[tuple[Namespace, str], Message],
        by_ref: dict[tuple[str, str, str, str], Message],
    ) -> list[Hit]:
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
    async def context(self, read: ContextRead) -> Context:
        """One context; those running at the same time are answered together (:meth:`context_many`)."""
        return unwrap(await self._contexts.get(read))

    async def context_many(self, reads: list[ContextRead]) -> list[Answer[Context]]:
        """Many contexts with one call per host (recent messages and tails), one to the store
        (summaries and working memories) and one per shard (the recalls), answered in order; each
        answer is what :meth:`context` would return, or the error it would raise (its host
        failed: a context cannot be made without its recent messages)."""
        recent = asyncio.ensure_future(self._recent_many([(r.key, r.limit) for r in reads]))
        extras = asyncio.ensure_future(self._extras_many(reads))
        try:
            recalled = await self._recall_many(reads, recent)
            got, summaries = await recent, await extras
        finally:  # cancelled, or a BaseException: nothing left running
            for task in (recent, extras):
                if not task.done():
                    task.cancel()
        out: list[Answer[Context]] = []
        for r, got_recent, extra, found in zip(reads, got, summaries, recalled):
            if isinstance(got_recent, BaseException):
                out.append(got_recent)
                continue
            summary, block, through = (None, None, 0) if isinstance(extra, BaseException) else extra
            recent_msgs = self._uncovered(got_recent[0], through)
            reasons: list[str] = []
            hits: list[Message] = []
            if isinstance(found, BaseException):
                reasons.append(f"recall failed: {found!r}")
            elif found is not None:
                seen = {m.id for m in recent_msgs}
                hits = [h.message for h in found if h.message.id not in seen][: r.semantic_limit]
                if found.reason:
                    reasons.append(found.reason)
            if isinstance(extra, BaseException):
                reasons.append(f"summary/working memory unavailable: {extra!r}")
            degraded = isinstance(found, BaseException) or bool(found is not None and found.degraded)
            degraded = degraded or isinstance(extra, BaseException)
            ctx = assemble(recent_msgs, hits, r.merge, summary, block, r.token_budget)
            if isinstance(found, BaseException) or isinstance(extra, BaseException):
                DEGRADED_RECALLS.inc(1, {"scope": "context"})  # (a degraded search counted itself)
            if degraded:
                ctx = ctx.model_copy(update={"degraded": True, "reason": "; ".join(reasons) or None})
            out.append(ctx)
        return out

    async def _recall_many(
        self, reads: list[ContextRead], recent: asyncio.Future[list[Answer[tuple[list[Message], Tail]]]]
    ) -> list[Answer[SearchResults] | None]:
        """The recall of each context that searches (None for the others): its search, with the
        conversation's tail from its host's answer (``recent``)."""
        at = [i for i, r in enumerate(reads) if r.recalls]
        out: list[Answer[SearchResults] | None] = [None] * len(reads)
        if not at:
            return out
        t0 = time.perf_counter()
        asked = [reads[i] for i in at]
        encoded = await self._encode_many([(r.query or "", r.mode) for r in asked])
        requests = [
            self._request(
                r.key, r.scope, r.query or "", r.semantic_limit + r.limit, r.min_score, e, r.stream, None, True
            )
            for r, e in zip(asked, encoded)
        ]
        results = await self._router.search_many(requests)
        got = await asyncio.shield(recent)
        tails_of = [got[i] for i in at]
        # a shard answer older than the indexing its host has seen confirmed is asked again
        stale = [
            n
            for n, (r, res, t) in enumerate(zip(asked, results, tails_of))
            if not isinstance(t, BaseException) and t[1].stamp > res.stamps.get(conversation_namespace(r.key), 0)
        ]
        if stale:
            for n, res in zip(stale, await self._router.search_many([requests[n] for n in stale])):
                results[n] = res
        searched: list[_Searched] = []
        tails: list[Tails] = []
        failures: list[str | None] = []
        for r, e, q, res, t in zip(asked, encoded, requests, results, tails_of):
            searched.append(_Searched(r.key, r.scope, e, q, res))
            tail = self.written.seen(r.key, res.held)
            tail.pop(r.key, None)
            if isinstance(t, BaseException):
                failures.append(f"messages not yet indexed were not searched (their host failed: {t})")
            else:
                tail[r.key] = t[1]
                failures.append(None)
            tails.append(tail)
        for i, answer in zip(at, await self._recalled(searched, tails, t0, failures)):
            out[i] = answer
        return out

    async def _recent_many(
        self, requests: list[tuple[ConversationKey, int]]
    ) -> list[Answer[tuple[list[Message], Tail]]]:
        """The recent messages and tail of each conversation: one ``recent_many`` per host."""
        by_host: dict[str, tuple[HostClient, list[int]]] = {}
        for i, (key, _) in enumerate(requests):
            host = self._host_for(key)
            by_host.setdefault(host.label, (host, []))[1].append(i)
        calls = await asyncio.gather(
            *(host.recent_many([requests[i] for i in idx]) for host, idx in by_host.values()), return_exceptions=True
        )
        out: list[Answer[tuple[list[Message], Tail]]] = [_NOT_ASKED] * len(requests)
        for (_, idx), got in zip(by_host.values(), calls):
            if isinstance(got, BaseException) and not isinstance(got, Exception):
                raise got
            for n, i in enumerate(idx):
                out[i] = got if isinstance(got, BaseException) else (got[n][0], Tail(*got[n][1]))
        return out

    async def _extras_many(self, reads: list[ContextRead]) -> list[Answer[tuple[str | None, str | None, int]]]:
        """The summary text, the working-memory block (None when there is none) and the seq the
        summary covers through, of each conversation: one store call for them all."""
        try:
            rows = await self._store.context_extras([(r.key, r.wm.scope) for r in reads])
        except Exception as exc:
            return [exc] * len(reads)
        out: list[Answer[tuple[str | None, str | None, int]]] = []
        for r, (summary, raw, through) in zip(reads, rows):
            block = None
            if raw is not None:
                try:
                    wm = WorkingMemory(self._store, r.key.app, r.key.user_id, r.key.conversation_id, r.wm)
                    note = wm.value_of(raw, 0)
                    block = render_instructions(r.wm, note.text) if note.content is not None else None
                except Exception as exc:
                    out.append(exc)
                    continue
            out.append((summary, block, int(through)))
        return out

    def _uncovered(self, recent: list[Message], through: int) -> list[Message]:
        """``recent`` without the messages the summary covers (seq <= ``through``): the summary
        stands for them in the prompt. The newest ``keep_messages`` stay whatever it covers.
        Recalled messages are not filtered: they are the verbatim detail a summary loses."""
        if through <= 0:
            return recent
        keep = len(recent) - self.keep_messages
        return [m for i, m in enumerate(recent) if i >= keep or (m.seq or 0) > through]


def _finish(
    out: SearchResults, degraded: bool, reason: str | None, failed: str | None, scope: str, t0: float
) -> SearchResults:
    reasons = [r for r in (failed, reason) if r]
    out.degraded, out.reason = degraded or failed is not None, "; ".join(reasons) or None
    SEARCH_LATENCY.observe(time.perf_counter() - t0, {"scope": scope})
    if degraded:
        DEGRADED_RECALLS.inc(1, {"scope": scope})
    return out
