"""`ConversationHost`: many virtual conversation actors in one real actor.

A Ray actor is a whole process (~75 MB, ~1 s to start), so thousands of agents cannot each get
one. Each conversation is instead a :class:`~memray.conversation.core.Conversation` living in
one of a few hosts, chosen by a stable hash of its key. The host runs one event loop: each
call's synchronous part runs whole, so a conversation's seqs are assigned in the order its
calls arrive, whichever caller made them (Ray does not order calls on async actors; the host
does not need it to).

Writes: add → buffer (seq assigned, acknowledged) → persist chain (debounced) → group commit
(one store transaction for many conversations) → embedding pipeline (vectors after the durable
write) → shards. Summaries are folded in the background once the unsummarised history passes
the trigger.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from memray.config import EmbedderConfig, MemoryConfig
from memray.conversation.buffer import MessageBuffer
from memray.conversation.commit import GroupCommitter
from memray.conversation.core import Conversation, matches, overlay
from memray.conversation.persist import PersistChain
from memray.conversation.tail import Tail, TailKeeper
from memray.conversation.title import Titler
from memray.embedding.pipeline import EmbeddingPipeline, PendingItem
from memray.errors import ClosedError
from memray.ids import ConversationKey
from memray.index.columns import columns_of
from memray.metrics import LagRecorder
from memray.models import Message
from memray.runtime.ref import ActorRef
from memray.scoring import Window
from memray.store.base import ConversationSnapshot
from memray.store.rows import (
    MessageRow, Namespace, conversation_namespace, message_payload, message_to_row, row_to_message,
)

__all__ = ["ConversationHost"]

log = logging.getLogger(__name__)


class ConversationHost:
    def __init__(self, host_id: int, config: MemoryConfig, store: ActorRef, shards: list[ActorRef]) -> None:
        self.host_id = host_id
        self.config = config
        self._store = store
        self._shards = shards
        self._conversations: dict[ConversationKey, Conversation] = {}
        self._loading: dict[ConversationKey, asyncio.Future[Conversation]] = {}
        self._closed = False
        self._started = False
        self._lag = LagRecorder(str(host_id))

    async def start(self) -> None:
        """Build the embedder, router, committer and pipeline (in the actor's own process).
        Idempotent; a host restarted by Ray starts itself on its first call."""
        if self._started:
            return
        self._started = True
        from memray.conversation.summary import SummaryKeeper, build_summarizer
        from memray.embedding import build_embedder
        from memray.embedding.active import resolve_config

        self.config = resolve_config(self.config)  # a re-embedding job may have switched models
        from memray.index.router import ShardRouter
        from memray.text import estimate_tokens

        self._estimate = estimate_tokens
        self._committer = GroupCommitter(self._store)
        self._router = ShardRouter(self._shards)
        self._embedder = build_embedder(self.config.embedder)
        self._pipeline = EmbeddingPipeline(
            self._embedder, self._store, self._router, batch_size=max(self.config.embedder.batch_size, 2048)
        )
        self._pipeline.on_indexed = self._on_indexed
        summarizer = build_summarizer(self.config.summarizer)
        self._keeper = None if summarizer is None else SummaryKeeper(self._store, summarizer, self.config.summarizer, estimate_tokens)
        self._titler: Titler | None = None
        if self.config.summarizer.titles and hasattr(summarizer, "title"):
            self._titler = Titler(self._store, summarizer)  # type: ignore[arg-type]
        if self.host_id == 0:
            await self._pipeline.sweep()

    # -- conversations in memory ------------------------------------------------------------
    async def _get(self, key: ConversationKey) -> Conversation:
        conv = self._conversations.get(key)
        return conv if conv is not None else (await self._get_many([key]))[0]

    async def _get_many(self, keys: list[ConversationKey]) -> list[Conversation]:
        """The conversations of ``keys``, loading the missing ones with one store call.
        Concurrent callers asking for the same key share its load."""
        if self._closed:
            raise ClosedError("this memray host is closed; open memray again")
        await self.start()
        todo = [k for k in dict.fromkeys(keys) if k not in self._conversations and k not in self._loading]
        if todo:
            loop = asyncio.get_running_loop()
            futures = {k: loop.create_future() for k in todo}
            self._loading.update(futures)
            try:
                snaps = await self._store.call("load_conversations", todo, self.config.buffer_window)
                for k, snap in zip(todo, snaps):
                    self._conversations[k] = conv = self._make(k, snap)
                    futures[k].set_result(conv)
            except BaseException as exc:
                for f in futures.values():
                    if not f.done():
                        f.set_exception(exc)
                        f.exception()  # retrieved: the waiters re-raise it
                raise
            finally:
                for k in todo:
                    del self._loading[k]
        return [self._conversations.get(k) or await self._loading[k] for k in keys]

    def _make(self, key: ConversationKey, snap: ConversationSnapshot) -> Conversation:
        window = self.config.buffer_window
        buffer = MessageBuffer(window)
        for row in snap.recent:
            buffer.put_durable(row_to_message(row))
        conv = Conversation(key, buffer, self._make_chain, snap.last_seq, whole=len(snap.recent) < window)
        if snap.last_seq == 0:
            conv.unsummarized_tokens = 0  # a new conversation: count as it grows, no store read
        return conv

    def _make_chain(self, conv: Conversation) -> PersistChain:
        return PersistChain(
            lambda: self._write(conv), self.config.debounce_ms / 1000.0,
            self.config.retry_backoff_s, self.config.retry_backoff_max_s,
        )

    # -- writes -----------------------------------------------------------------------------
    async def add(self, key: ConversationKey, messages: list[Message], durable: bool = False) -> list[int]:
        conv = await self._get(key)
        seqs = conv.add(messages)
        self._lag.acked(key, [m.id for m in messages])
        if durable:
            await conv.flush()
        return seqs

    async def add_many(self, batch: list[tuple[ConversationKey, list[Message]]], durable: bool = False) -> list[list[int]]:
        """Add to many conversations in one call; seqs per conversation, in input order."""
        convs = await self._get_many([k for k, _ in batch])
        by_key = {c.key: c for c in convs}
        out = [by_key[k].add(msgs) for k, msgs in batch]
        now = time.monotonic()
        for k, msgs in batch:
            self._lag.acked(k, [m.id for m in msgs], now)
        if durable:
            await asyncio.gather(*(c.flush() for c in by_key.values()))
        return out

    async def _write(self, conv: Conversation) -> int:
        """Persist what ``conv`` has pending; return the highest seq now durable."""
        if conv.deleted:
            conv.buffer.drain()
            return conv.durable_seq
        msgs = conv.buffer.drain()
        if not msgs:
            return conv.durable_seq
        ids = [m.id for m in msgs]
        rows = [message_to_row(conv.key, m) for m in msgs]
        try:
            corrections = await self._committer.submit(rows)
        except BaseException:
            conv.buffer.mark_pending(ids)
            raise
        conv.buffer.settle(ids)
        self._lag.committed(conv.key, ids)
        corrected = {c[3]: c for c in corrections}
        for mid in corrected:  # an id the store already held: it keeps its original seq
            conv.buffer.discard(mid)
        rows = [r._replace(seq=corrected[r.id][4], created_at=corrected[r.id][5]) if r.id in corrected else r for r in rows]
        self._after_commit(conv, rows)
        return max((m.seq or 0) for m in msgs if m.id not in corrected) if len(corrected) < len(msgs) else conv.durable_seq

    def _after_commit(self, conv: Conversation, rows: list[MessageRow]) -> None:
        ns = conversation_namespace(conv.key)
        self._pipeline.submit([
            PendingItem(ns, r.id, r.text, float(r.seq), message_payload(r), columns_of(r.created_at, r.sim_time, r.importance))
            for r in rows if r.text
        ])
        if self._titler is not None:
            self._titler.consider(conv.key, rows)
        if self._keeper is None:
            return
        if conv.unsummarized_tokens >= 0:
            conv.unsummarized_tokens += sum(self._estimate(r.text) for r in rows)
        if (conv.unsummarized_tokens < 0 or conv.unsummarized_tokens >= self.config.summarizer.trigger_tokens) and not conv.summarizing:
            conv.summarizing = True
            asyncio.get_running_loop().create_task(self._summarize(conv))

    async def _summarize(self, conv: Conversation) -> None:
        assert self._keeper is not None
        try:
            await self._keeper.maybe_update(conv.key, conv.durable_seq)
            counted = self._keeper.pending_tokens(conv.key)
            conv.unsummarized_tokens = counted if counted is not None else 0
        except Exception as exc:  # the summary is retried on the next write
            log.warning("summary of %s failed: %r", conv.key, exc)
        finally:
            conv.summarizing = False

    async def flush(self, key: ConversationKey | None = None, timeout_s: float | None = None) -> None:
        """Make everything acknowledged so far durable (one conversation, or all of this host's)."""
        if not self._started:
            return
        convs = [self._conversations[key]] if key is not None and key in self._conversations else (
            [] if key is not None else [c for c in self._conversations.values() if not c.buffer.settled]
        )  # all of a host's conversations: only those with a write to wait for (thousands are idle)
        await asyncio.gather(*(c.flush(timeout_s) for c in convs))

    async def wait_indexed(self, timeout_s: float | None = None) -> bool:
        """Flush, then wait until every durable message has been embedded and indexed (False on
        timeout, e.g. while the embedder fails and the items wait for their retry)."""
        await self.start()
        await self.flush(timeout_s=timeout_s)
        return await self._pipeline.wait_idle(timeout_s, retries=True)

    # -- reads ------------------------------------------------------------------------------
    async def messages(
        self, key: ConversationKey, limit: int | None = None, before_seq: int | None = None,
        after_seq: int | None = None, roles: list[str] | None = None, metadata: dict[str, Any] | None = None,
        window: Window | None = None, agent_id: str | None = None, sub_agent_id: str | None = None,
    ) -> list[Message]:
        conv = await self._get(key)
        def keep(m: Message) -> bool:
            return matches(m, before_seq, after_seq, roles, metadata, window, agent_id, sub_agent_id)

        filtered = window is not None or agent_id is not None or sub_agent_id is not None
        if after_seq is None and roles is None and not metadata and not filtered and conv.covers(before_seq, limit):
            held = [m for m in conv.buffer.recent() if keep(m)]
            return held[-limit:] if limit else held if limit is None else []
        rows = await self._store.call("get_messages", key, limit, before_seq, after_seq, roles, metadata,
                                      window, agent_id, sub_agent_id)
        return overlay([row_to_message(r) for r in rows], conv.buffer.unsettled(), limit, keep)

    async def recent_many(self, requests: list[tuple[ConversationKey, int]]) -> list[tuple[list[Message], Tail]]:
        """The most recent ``limit`` messages of many conversations, each with its read-your-writes
        tail (context() calls, batched)."""
        recent = await asyncio.gather(*(self.messages(key, limit) for key, limit in requests))
        return [(msgs, self._tail(key)) for msgs, (key, _) in zip(recent, requests)]

    async def tails(self, keys: list[ConversationKey]) -> list[Tail]:
        """The read-your-writes tail of each conversation (:mod:`memray.conversation.tail`): the
        messages acknowledged that the index may not hold yet. A conversation this host has not
        loaded has none (loading it is not needed to know that)."""
        return [self._tail(key) for key in keys]

    def _tail(self, key: ConversationKey) -> Tail:
        conv = self._conversations.get(key)
        return TailKeeper.tail(conv) if conv is not None else Tail([], 0)

    def _on_indexed(self, items: list[PendingItem], stamp: int) -> None:
        """The shards confirmed ``items``: they leave their conversations' tails."""
        by_ns: dict[Namespace, list[PendingItem]] = {}
        for item in items:
            by_ns.setdefault(item.namespace, []).append(item)
        for ns, group in by_ns.items():
            conv = self._conversations.get(ConversationKey(ns.app, ns.user_id, ns.scope))
            if conv is not None and ns.kind == "conv":
                TailKeeper.indexed(conv, group, stamp)

    async def last_seq(self, key: ConversationKey) -> tuple[int, int]:
        """(last assigned seq, last durable seq)."""
        conv = await self._get(key)
        return conv.last_seq, conv.durable_seq

    # -- deletes ----------------------------------------------------------------------------
    async def evict(self, key: ConversationKey) -> None:
        """Forget a conversation's in-memory state before a delete: pending writes are dropped
        and an in-flight write is awaited, so nothing lands after the delete."""
        conv = self._conversations.pop(key, None)
        if conv is None:
            return
        conv.deleted = True
        conv.buffer.drain()
        self._lag.forget(key)
        await conv.close()
        ns = conversation_namespace(key)
        self._pipeline.forget(lambda n: n == ns)
        if self._keeper is not None:
            self._keeper.forget(key)

    async def delete_messages(self, key: ConversationKey, ids: list[str], timeout_s: float = 60.0) -> dict[str, int]:
        """Delete some messages of a conversation: from its buffer, from the store (with their
        vectors and exported rows) and from the shards. The conversation's writes are flushed
        first, so no pending write lands after the delete; queued embedding work for the
        messages is dropped and a batch in flight allowed to land before the vectors go. Seqs
        are not reused. Returns counts per store, ``vectors`` included."""
        conv = await self._get(key)
        await conv.flush(timeout_s)
        for message_id in ids:
            conv.buffer.discard(message_id)
        ns = conversation_namespace(key)
        refs = [(ns, i) for i in ids]
        self._pipeline.forget_items(refs)
        await self._pipeline.wait_idle(timeout_s)
        counts: dict[str, int] = await self._store.call("delete_messages", key, ids)
        counts["vectors"] = await self._router.delete(refs)
        return counts

    async def clear(self, key: ConversationKey, timeout_s: float = 60.0) -> dict[str, int]:
        """Delete every message the conversation has acknowledged so far, with their vectors,
        exported rows and its summary; the conversation, its working memory and its seqs stay
        (new messages continue after the last seq). Messages added while it runs are kept.
        Returns counts per store (``vectors`` included)."""
        conv = await self._get(key)
        upto = conv.last_seq
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while conv.summarizing and loop.time() < deadline:  # a fold in flight must not land afterwards
            await asyncio.sleep(0.01)
        await conv.flush(timeout_s)
        for msg in conv.buffer.recent():  # (no await since the flush: no write of these can start)
            if (msg.seq or 0) <= upto:
                conv.buffer.discard(msg.id)
        if conv.unindexed:
            conv.unindexed = {i: m for i, m in conv.unindexed.items() if (m.seq or 0) > upto} or None
        ns = conversation_namespace(key)
        self._pipeline.forget_if(lambda item: item.namespace == ns and item.recency <= upto)
        await self._pipeline.wait_idle(timeout_s)
        counts: dict[str, int]
        counts, ids = await self._store.call("clear_messages", key, upto)
        counts["vectors"] = await self._router.delete([(ns, i) for i in ids])
        if self._keeper is not None:
            self._keeper.forget(key)
        conv.unsummarized_tokens = -1  # recounted by the keeper on the next write
        return counts

    async def count_messages(self, key: ConversationKey, ids: list[str] | None = None) -> dict[str, int]:
        """What this host holds of the conversation's messages (only ``ids`` when given): in the
        buffer or the read-your-writes tail, and queued for embedding (a deletion check)."""
        await self.start()
        conv = self._conversations.get(key)
        wanted = None if ids is None else set(ids)
        ns = conversation_namespace(key)
        held: set[str] = set()
        if conv is not None:
            held = {m.id for m in conv.buffer.recent()} | set(conv.unindexed or ())
        queued = self._pipeline.count_if(lambda item: item.namespace == ns and (wanted is None or item.doc_id in wanted))
        return {"host_messages": len(held if wanted is None else held & wanted), "host_queued": queued}

    async def unconfirmed(self) -> list[tuple[Namespace, str]]:
        """Items this host committed and the shards have not confirmed yet (a fork re-reads them)."""
        await self.start()
        return self._pipeline.unconfirmed()

    async def evict_user(self, app: str, user_id: str, timeout_s: float = 60.0) -> int:
        """Forget every conversation of the user held here and their queued embedding work, and
        let an embedding batch already in flight land (so ``delete_user`` can remove what it
        writes). Returns the conversations evicted."""
        await self.start()
        keys = [k for k in self._conversations if k.app == app and k.user_id == user_id]
        await asyncio.gather(*(self.evict(k) for k in keys))
        self._pipeline.forget(lambda n: n.app == app and n.user_id == user_id)
        await self._pipeline.wait_idle(timeout_s)
        return len(keys)

    async def count_user(self, app: str, user_id: str) -> dict[str, int]:
        """What this host holds of the user in memory: conversations, and items queued (or
        awaiting a retry) for embedding. Both are 0 after :meth:`evict_user`."""
        await self.start()
        return {
            "conversations": sum(1 for k in self._conversations if k.app == app and k.user_id == user_id),
            "queued": self._pipeline.count(lambda n: n.app == app and n.user_id == user_id),
        }

    async def clear_caches(self) -> int:
        """Empty this process's embedding cache (its keys are hashes of texts, so one user's
        entries cannot be singled out). Returns the entries dropped."""
        await self.start()
        from memray.embedding.cache import CachedEmbedder

        return self._embedder.cache.clear() if isinstance(self._embedder, CachedEmbedder) else 0

    # -- lifecycle and stats ----------------------------------------------------------------
    async def set_embedder(self, config: EmbedderConfig) -> str:
        """Embed new writes with the model ``config`` describes from now on (the re-embedding
        job's switch). Returns its model id. Idempotent."""
        from memray.embedding import build_embedder

        await self.start()
        embedder = build_embedder(config)
        self.config = self.config.model_copy(update={"embedder": config})
        self._pipeline.set_embedder(embedder)
        return embedder.model_id if embedder is not None else "none"

    async def stats(self) -> dict[str, Any]:
        await self.start()
        return {
            "host": self.host_id,
            "pid": os.getpid(),
            "conversations": len(self._conversations),
            "pending": sum(c.buffer.pending_count for c in self._conversations.values()),
            "commits": self._committer.commits,
            "rows": self._committer.rows,
            "embedded": self._pipeline.embedded,
            "embedding_failures": self._pipeline.failures,
            "embedding_error": self._pipeline.last_error,
            "rss_bytes": _rss_bytes(),
        }

    async def ping(self) -> bool:
        return True

    async def durable_lag(self, reset: bool = False, samples: bool = False) -> dict[str, Any]:
        """Acknowledged → committed lag of this host's messages since the last reset: count,
        p50/p95/p99/max in seconds (measured in the host, per message), and ``pending``
        (acknowledged, not yet durable); ``samples`` adds every lag kept."""
        return self._lag.summary(reset, samples)

    async def close(self) -> None:
        """Flush every conversation, drain the embedding pipeline, stop."""
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        await self.flush()
        await self._pipeline.wait_idle(30.0)
        await self._pipeline.close()


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
