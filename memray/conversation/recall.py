"""`Recall`: search and context assembly for a conversation, run where the caller is.

A scoped search is one call to one shard (the query is embedded in the caller's process by the
:class:`~memray.embedding.query.QueryEncoder`). Hits carry the message JSON the shard keeps, so
they need no store read (the store is read only for items a rebuilt shard holds without it).

Read-your-writes (:mod:`memray.conversation.read_your_writes`), in one call: ``search`` scores
what this process added and has not yet seen indexed (:class:`Written`), ``context`` the
conversation's tail from its host (what *any* writer added that the shard has not confirmed),
so a context sees every message acknowledged before the call.

``context()`` asks the host while the shard answers the recall, concurrently. Any failure on the
recall path gives the recent messages with ``degraded=True`` and a reason; it never raises to
the agent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, TypeVar

import numpy as np

from memray.conversation.client import HostClient
from memray.conversation.context import assemble
from memray.conversation.instructions import render_instructions
from memray.conversation.read_your_writes import Tail, Tails, TailSearch, Written, score_tails
from memray.conversation.reads import ContextRead, SearchRead
from memray.conversation.working_memory import WorkingMemory
from memray.embedding.query import Encoded, QueryEncoder
from memray.ids import ConversationKey, Namespace, conversation_namespace
from memray.index.base import ShardHit
from memray.index.router import RouterResult, ShardRouter
from memray.index.search import NamespaceSearch, ShardSearch, UserSearch
from memray.metrics import DEGRADED_RECALLS, SEARCH_LATENCY
from memray.models import Context, Hit, Message, RetrievalMode, Scope
from memray.ranking import Stream
from memray.rpc.batch import Answer, Coalescer, unwrap
from memray.sim_time import Window
from memray.store.partitions import StorePartitions
from memray.store.rows import payload_message, row_to_message

__all__ = ["Recall", "SearchResults", "CONTEXT_STEP"]

log = logging.getLogger(__name__)


class SearchResults(list[Hit]):
    """A list of hits that also says whether the search was degraded (a shard down)."""

    degraded: bool = False
    reason: str | None = None


_NOT_ASKED = LookupError("not asked")  # a placeholder every slot of a batch's answer overwrites

#: The most reads one coalesced batch of single calls carries.
MAX_BATCH = 65536
#: In one process, the most contexts a step of ``context_many`` makes (:attr:`Recall.step`). A
#: 1,000-agent tick in process (``examples/tick.py``, 25 ticks, two alternated pairs): ticks 3-24
#: 980 and 894 ms on average in one step, 641 and 665 ms in steps of 200, and no context scored
#: a tail after the first ticks (all its tail shown), where ~90% did.
CONTEXT_STEP = 200


_Refs = dict[tuple[str, str, str, str], Message]
T = TypeVar("T")


class _Found(NamedTuple):
    """One search's hits (the shard's, merged with its read-your-writes tail) before they are
    messages, and whether and why it was degraded."""

    hits: list[ShardHit]
    from_tail: dict[tuple[Namespace, str], Message]
    degraded: bool
    reason: str | None


class _Searched(NamedTuple):
    """One search of a batch, as far as the shard's answer: what was asked and what came back."""

    key: ConversationKey
    scope: Scope
    encoded: Encoded
    request: ShardSearch
    result: RouterResult
    shown: frozenset[str] = frozenset()  # a context's: the ids of the recent messages it shows


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
        #: The most contexts :meth:`context_many` makes in one step (None: a batch at once). In one
        #: process the cores share memray's event loop, and a step of 1,000 contexts held it for
        #: ~150 ms at a time: the persist wheel's writes and the indexing behind them waited, a
        #: context's read-your-writes tail grew to ~5-9 messages, and scoring the tails was a
        #: quarter of a tick. Steps of 200 let them run in between (the facade sets it in process;
        #: in Ray mode the hosts and shards do that work in their own processes).
        self.step: int | None = None
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
        tails = [self.written.seen(r.key, res.held) for r, res in zip(reads, results)]
        return await self._hydrate_many(self._found(searched, tails, t0))

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
        reason = "; ".join(r for r in (encoded.failed, result.reason) if r) or None
        _count(result.degraded, "app", t0)
        found = _Found(result.hits, {}, result.degraded or encoded.failed is not None, reason)
        (hits,) = await self._hydrate_many([found])
        return unwrap(hits)

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
        # a context shows each text once (_pick): copies of a question asked again must not fill its hits
        request = encoded.query(query, k, min_score, watch, stream, window, distinct=host_tail)
        if scope == "conversation":
            return NamespaceSearch([conversation_namespace(key)], request)
        return UserSearch(key.app, key.user_id, "conv", request)

    def _found(
        self, searched: list[_Searched], tails: list[Tails], t0: float, failures: Sequence[str | None] | None = None
    ) -> list[Answer[_Found]]:
        """Each search's hits merged with its read-your-writes ``tails`` (``failures``: why a
        search's tail could not be had, which degrades it); its latency and degradation counted."""
        try:
            merged = self._merge(searched, tails)
        except Exception as exc:  # the tails could not be scored (the embedder failed): no search can answer
            return [exc] * len(searched)
        out: list[Answer[_Found]] = []
        for n, (s, (hits, from_tail)) in enumerate(zip(searched, merged)):
            failure = failures[n] if failures is not None else None
            reason = "; ".join(r for r in (s.encoded.failed, s.result.reason, failure) if r) or None
            degraded = s.result.degraded or failure is not None
            _count(degraded, s.scope, t0)
            out.append(_Found(hits, from_tail, degraded or s.encoded.failed is not None, reason))
        return out

    async def _hydrate_many(self, found: list[Answer[_Found]]) -> list[Answer[SearchResults]]:
        """Each search's hits as :class:`Hit` objects (messages from :func:`_message`), or the
        error that kept it from them."""
        refs, failed = await self._payloadless(found)
        out: list[Answer[SearchResults]] = []
        for f in found:
            if isinstance(f, BaseException):
                out.append(f)
                continue
            error = _failure(f, failed)
            if error is not None:
                out.append(error)
                continue
            hits = SearchResults(
                Hit(message=m, score=h.score, conversation_id=h.namespace.scope)
                for h in f.hits
                if (m := _message(h, f.from_tail, refs)) is not None  # a hit deleted meanwhile is dropped
            )
            hits.degraded, hits.reason = f.degraded, f.reason
            out.append(hits)
        return out

    def _merge(
        self, searched: list[_Searched], tails: list[Tails]
    ) -> list[tuple[list[ShardHit], dict[tuple[Namespace, str], Message]]]:
        """Each search's shard hits and its tails' messages scored as the shard would, best ``k``
        first: the tails of the whole batch in one call of the scoring kernel
        (:func:`~memray.conversation.read_your_writes.score_tails`). A message in a tail is newer
        than (or absent from) the shard's copy: the tail's version wins."""
        out: list[tuple[list[ShardHit], dict[tuple[Namespace, str], Message]]] = [(s.result.hits, {}) for s in searched]
        scored: list[int] = []
        batch: list[TailSearch] = []
        for n, (s, tail) in enumerate(zip(searched, tails)):
            pending = [(conversation_namespace(k), t.messages) for k, t in tail.items() if t.messages]
            if _shown_only(s, pending):
                ns, msgs = pending[0]
                replaced = {m.id for m in msgs}
                out[n] = ([h for h in s.result.hits if not (h.namespace == ns and h.doc_id in replaced)], {})
            elif pending:
                scored.append(n)
                out[n] = (s.result.hits, {(ns, m.id): m for ns, msgs in pending for m in msgs})
                batch.append(TailSearch(s.request.query, s.result.stats, s.result.hits, pending))
        if not batch:
            return out
        embedder = self.encoder.embedder
        if embedder is not None and getattr(embedder, "recomputable", False):  # one embed call for the batch
            wanted = [i for i, n in enumerate(scored) if searched[n].encoded.vector is not None]
            texts = [m.text for i in wanted for _, msgs in batch[i].tails for m in msgs]
            if texts:
                vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
                start = 0
                for i in wanted:
                    size = sum(len(msgs) for _, msgs in batch[i].tails)
                    batch[i] = batch[i]._replace(vectors=vectors[start : start + size])
                    start += size
        for n, hits in zip(scored, score_tails(batch, self._neighbour_weight)):
            out[n] = (hits, out[n][1])
        return out

    async def _payloadless(
        self, found: Sequence[Answer[_Found] | None]
    ) -> tuple[_Refs, dict[tuple[str, str], Exception]]:
        """The messages of hits the shard holds without a payload (a shard rebuilt from the store
        keeps none) and not from a tail, read from the store: one call per user for the whole
        batch. Returns them by (app, user, conversation, id), and the users whose call failed."""
        missing: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for f in found:
            if f is not None and not isinstance(f, BaseException):
                for h in f.hits:
                    if not h.payload and (h.namespace, h.doc_id) not in f.from_tail:
                        missing.setdefault((h.namespace.app, h.namespace.user_id), []).append(
                            (h.namespace.scope, h.doc_id)
                        )
        refs: _Refs = {}
        failed: dict[tuple[str, str], Exception] = {}
        if not missing:
            return refs, failed
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
                refs[(app, user_id, r.conversation_id, r.id)] = row_to_message(r)
        return refs, failed

    # -- context ----------------------------------------------------------------------------
    async def context(self, read: ContextRead) -> Context:
        """One context; those running at the same time are answered together (:meth:`context_many`)."""
        return unwrap(await self._contexts.get(read))

    async def context_many(self, reads: list[ContextRead]) -> list[Answer[Context]]:
        """Many contexts with one call per host (recent messages and tails), one to the store
        (summaries and working memories) and one per shard (the recalls) for each :attr:`step`
        of them, answered in order; each answer is what :meth:`context` would return, or the
        error it would raise (its host failed: a context cannot be made without its recent
        messages)."""
        step = self.step or len(reads) or 1
        out: list[Answer[Context]] = []
        for i in range(0, len(reads), step):
            out += await self._context_step(reads[i : i + step])
        return out

    async def _context_step(self, reads: list[ContextRead]) -> list[Answer[Context]]:
        recent = asyncio.ensure_future(self._recent_many([(r.key, r.limit) for r in reads]))
        extras = asyncio.ensure_future(self._extras_many(reads))
        try:
            found = await self._recall_many(reads, recent, extras)
            got, summaries = await recent, await extras
            refs, failed = await self._payloadless(found)
        finally:  # cancelled, or a BaseException: nothing left running
            for task in (recent, extras):
                if not task.done():
                    task.cancel()
        shown = [
            [] if isinstance(g, BaseException) else self._uncovered(g[0], extra) for g, extra in zip(got, summaries)
        ]
        picked = [_pick(r, f, s, refs) for r, f, s in zip(reads, found, shown)]
        short = [i for i, (r, f, p) in enumerate(zip(reads, found, picked)) if _cut_short(r, f, p)]
        cut_short: dict[int, str] = {}
        if short:  # recalls cut short by what the context shows already search deeper, once
            try:
                deeper = await self._recall_many(
                    [reads[i] for i in short],
                    _done([got[i] for i in short]),
                    _done([summaries[i] for i in short]),
                    DEEPER,
                )
                more, more_failed = await self._payloadless(deeper)
            except Exception as exc:  # the first answers stand, said to be degraded
                cut_short = {i: f"recall cut short, its deeper search failed: {exc!r}" for i in short}
            else:
                refs, failed = {**refs, **more}, {**failed, **more_failed}
                for i, f in zip(short, deeper):
                    found[i], picked[i] = f, _pick(reads[i], f, shown[i], refs)
        out: list[Answer[Context]] = []
        for i, (r, got_recent, extra, f) in enumerate(zip(reads, got, summaries, found)):
            recent_msgs, recalled = shown[i], picked[i]
            if isinstance(got_recent, BaseException):
                out.append(got_recent)
                continue
            if got_recent[0]:
                self.written.confirmed(r.key, got_recent[1], got_recent[0][-1].seq or 0)
            summary, block, _ = (None, None, 0) if isinstance(extra, BaseException) else extra
            reasons: list[str] = []
            failure: BaseException | None = None  # why the recall failed (a single call: degraded)
            if isinstance(f, BaseException):
                failure = f
            elif f is not None:
                failure = _failure(f, failed)
            if failure is not None:
                reasons.append(f"recall failed: {failure!r}")
                recalled = []
            elif f is not None and not isinstance(f, BaseException):
                if f.reason:
                    reasons.append(f.reason)
                if i in cut_short:
                    reasons.append(cut_short[i])
            if isinstance(extra, BaseException):
                reasons.append(f"summary/working memory unavailable: {extra!r}")
            ctx = assemble(recent_msgs, recalled, r.merge, summary, block, r.token_budget)
            if failure is not None or isinstance(extra, BaseException) or i in cut_short:
                DEGRADED_RECALLS.inc(1, {"scope": "context"})  # (a degraded search counted itself)
            if reasons or (f is not None and not isinstance(f, BaseException) and f.degraded):
                ctx = ctx.model_copy(update={"degraded": True, "reason": "; ".join(reasons) or None})
            out.append(ctx)
        return out

    async def _recall_many(
        self,
        reads: list[ContextRead],
        recent: asyncio.Future[list[Answer[tuple[list[Message], Tail]]]],
        extras: asyncio.Future[list[Answer[tuple[str | None, str | None, int]]]],
        depth: int = 1,
    ) -> list[Answer[_Found] | None]:
        """The recall of each context that searches (None for the others): its search, merged
        with the conversation's tail from its host's answer (``recent``; ``extras`` says which
        of the recent messages the context shows). A search asks for ``depth`` times the hits
        a context can use (:func:`_wanted`)."""
        at = [i for i, r in enumerate(reads) if r.recalls]
        out: list[Answer[_Found] | None] = [None] * len(reads)
        if not at:
            return out
        t0 = time.perf_counter()
        asked = [reads[i] for i in at]
        encoded = await self._encode_many([(r.query or "", r.mode) for r in asked])
        requests = [
            self._request(r.key, r.scope, r.query or "", _wanted(r) * depth, r.min_score, e, r.stream, None, True)
            for r, e in zip(asked, encoded)
        ]
        results = await self._router.search_many(requests)
        got = await recent
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
        extra = await extras
        searched: list[_Searched] = []
        tails: list[Tails] = []
        failures: list[str | None] = []
        for i, r, e, q, res, t in zip(at, asked, encoded, requests, results, tails_of):
            tail = self.written.seen(r.key, res.held, skip=r.key)  # the host's tail covers the conversation
            if isinstance(t, BaseException):
                searched.append(_Searched(r.key, r.scope, e, q, res))
                failures.append(f"messages not yet indexed were not searched (their host failed: {t})")
            else:
                shown = frozenset(m.id for m in self._uncovered(t[0], extra[i]))
                searched.append(_Searched(r.key, r.scope, e, q, res, shown))
                tail[r.key] = t[1]
                failures.append(None)
            tails.append(tail)
        for i, f in zip(at, self._found(searched, tails, t0, failures)):
            out[i] = f
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

    def _uncovered(self, recent: list[Message], extra: Answer[tuple[str | None, str | None, int]]) -> list[Message]:
        """``recent`` without the messages the summary (``extra``: summary, block, the seq it
        covers through) covers: the summary stands for them in the prompt. The newest
        ``keep_messages`` stay whatever it covers. Recalled messages are not filtered: they are
        the verbatim detail a summary loses."""
        through = 0 if isinstance(extra, BaseException) else extra[2]
        if through <= 0:
            return recent
        keep = len(recent) - self.keep_messages
        return [m for i, m in enumerate(recent) if i >= keep or (m.seq or 0) > through]


def _count(degraded: bool, scope: str, t0: float) -> None:
    """Record a search's latency (from ``t0``) and, if degraded by a shard or a tail, that."""
    SEARCH_LATENCY.observe(time.perf_counter() - t0, {"scope": scope})
    if degraded:
        DEGRADED_RECALLS.inc(1, {"scope": scope})


def _message(hit: ShardHit, from_tail: dict[tuple[Namespace, str], Message], refs: _Refs) -> Message | None:
    """The message of a hit: from its tail, its payload or the store (None: deleted meanwhile)."""
    msg = from_tail.get((hit.namespace, hit.doc_id))
    if msg is not None:
        return msg
    if hit.payload:
        return payload_message(hit.payload)
    ns = hit.namespace
    return refs.get((ns.app, ns.user_id, ns.scope, hit.doc_id))


#: How much deeper a context searches again when what it shows already cut its recall short.
DEEPER = 8


def _wanted(read: ContextRead) -> int:
    """The hits a context's search asks for: its recalled messages, and room for the recent
    ones it shows, which rank high (they are near the query in time and often in words)."""
    return read.semantic_limit + read.limit


def _pick(read: ContextRead, found: Answer[_Found] | None, shown: list[Message], refs: _Refs) -> list[Message]:
    """A context's recalled messages: the first ``semantic_limit`` of its hits that it does not
    show already, neither a shown message nor the text of one or of a message recalled before
    it (a question asked again and again is shown once: its copies would crowd out the answer)."""
    if found is None or isinstance(found, BaseException):
        return []
    ids, texts = {m.id for m in shown}, {m.text for m in shown}
    out: list[Message] = []
    for hit in found.hits:
        if len(out) == read.semantic_limit:
            break
        if hit.doc_id in ids:
            continue
        msg = _message(hit, found.from_tail, refs)  # (None: not found, deleted meanwhile)
        if msg is None or (msg.text and msg.text in texts):
            continue
        ids.add(msg.id)
        texts.add(msg.text)
        out.append(msg)
    return out


def _cut_short(read: ContextRead, found: Answer[_Found] | None, picked: list[Message]) -> bool:
    """Whether a context recalled fewer messages than it asked for while its search came back
    full (so it may hold more): what the context shows already took the places."""
    if found is None or isinstance(found, BaseException) or len(picked) >= read.semantic_limit:
        return False
    return len(found.hits) >= _wanted(read)


def _done(value: T) -> asyncio.Future[T]:
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    future.set_result(value)
    return future


def _shown_only(searched: _Searched, pending: list[tuple[Namespace, list[Message]]]) -> bool:
    """Whether the only tail of a context's search is its own conversation's, every message of
    it among the recent messages the context shows. Then scoring it changes nothing: a recalled
    message that is shown already is dropped, and a tail message only takes the place of the
    shard's copy of itself (the other hits keep their scores: :func:`score_tails`). In a
    simulation's tick that is the common case (the messages just added are the recent ones)."""
    if not searched.shown or len(pending) != 1 or pending[0][0] != conversation_namespace(searched.key):
        return False
    return all(m.id in searched.shown for m in pending[0][1])


def _failure(found: _Found, failed: dict[tuple[str, str], Exception]) -> Exception | None:
    """The store error that kept one of ``found``'s hits from being read, if any."""
    if failed:
        for h in found.hits:
            if not h.payload and (h.namespace, h.doc_id) not in found.from_tail:
                error = failed.get((h.namespace.app, h.namespace.user_id))
                if error is not None:
                    return error
    return None
