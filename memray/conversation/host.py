"""`ConversationHost`: many virtual conversation actors in one real actor.

A Ray actor is a whole process (~75 MB, ~1 s to start), so thousands of agents cannot each get
one. Each conversation is instead a :class:`~memray.conversation.state.Conversation` living in
one of a few hosts, chosen by a stable hash of its key. The host runs one event loop: each
call's synchronous part runs whole, so a conversation's seqs are assigned in the order its
calls arrive, whichever caller made them (Ray does not order calls on async actors; the host
does not need it to).

The write path — seqs, the ledger, persistence, dead letters and what follows a commit — is
:class:`~memray.conversation.write_path.WritePath`; the host holds the conversations, serves reads,
deletes and erasure, and owns the lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from typing import Any, cast

from memray.config import EmbedderConfig, MemoryConfig
from memray.conversation.ledger import AckLedger
from memray.conversation.read_your_writes import RecentAnswers, Tail
from memray.conversation.removal import MessageRemoval
from memray.conversation.state import Conversation, overlay
from memray.conversation.summarizer import build_summarizer
from memray.conversation.summary import SummaryKeeper
from memray.conversation.title import Titler
from memray.conversation.write_path import WritePath
from memray.embedding.active import resolve_config
from memray.embedding.cache import CachedEmbedder
from memray.embedding.factory import build_embedder
from memray.embedding.pipeline import EmbeddingPipeline, PendingItem
from memray.errors import ClosedError, DeadLetterError
from memray.ids import ConversationKey, Namespace, conversation_namespace
from memray.index.client import ShardClient
from memray.index.keeper import LEVEL_SETTLE_S, level_all
from memray.index.router import ShardRouter
from memray.metrics import LagRecorder, rss_bytes
from memray.models import Message, MessageFilter
from memray.models.filter import ALL_MESSAGES
from memray.models.wire import MessageBatch, MessageList
from memray.rpc.client import resend
from memray.store.base import ConversationSnapshot
from memray.store.partitions import StorePartitions
from memray.store.rows import row_to_message
from memray.text import estimate_tokens, forget_texts

__all__ = ["ConversationHost"]

log = logging.getLogger(__name__)


class ConversationHost:
    def __init__(self, host_id: int, config: MemoryConfig, store: StorePartitions, shards: list[ShardClient]) -> None:
        self.host_id = host_id
        self.config = config
        self._store = store
        self._shards = shards
        self._conversations: dict[ConversationKey, Conversation] = {}
        self._loading: dict[ConversationKey, asyncio.Future[Conversation]] = {}
        self._closed = False
        self._started = False
        self._starting: asyncio.Task[None] | None = None
        self._lag = LagRecorder(str(host_id))
        self._ledger = AckLedger(os.path.join(config.root, "hosts", f"host-{host_id}.ledger"))
        self._lost: dict[ConversationKey, dict[str, int]] = {}  # resolved at start, not yet reported
        # present while an incarnation runs: found at start, the last one did not close
        self._open_marker = os.path.join(config.root, "hosts", f"host-{host_id}.open")
        self._leveling: asyncio.Task[None] | None = None
        # conversation -> ids an earlier incarnation committed and had not indexed, queued again
        # at start: read-your-writes tails hold them until indexed (:meth:`_sweep`)
        self._swept: dict[ConversationKey, set[str]] = {}
        self.leveled_on_restart: int | None = None  # vectors that leveling sent, once it is done
        self.lost_on_restart = 0

    async def start(self) -> None:
        """Build the embedder, router, committer and pipeline (in the actor's own process), and
        resolve the ledger a previous incarnation left. Idempotent; concurrent callers wait for
        one start; a host restarted by Ray starts itself on its first call. A failed start (the
        store down) is tried again by the next call."""
        task = self._starting
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._starting = asyncio.get_running_loop().create_task(self._start())
        await asyncio.shield(task)

    async def _start(self) -> None:
        if not self._started:
            self._build()
        # into self._lost, with what earlier incarnations still owed to a flush
        self.lost_on_restart += len(await self._writes.resolve_ledger())
        await self._sweep()
        if os.path.exists(self._open_marker):
            # The last incarnation stopped without closing: vectors its pipeline stored (or marked)
            # may not have reached their shards, since the store and the shard take a batch at
            # once. Level every shard with the store, in the background.
            if self._leveling is None:
                self._leveling = asyncio.get_running_loop().create_task(self._level_shards())
        else:
            os.makedirs(os.path.dirname(self._open_marker), exist_ok=True)
            with open(self._open_marker, "w"):
                pass

    async def _sweep(self, page: int = 10_000) -> None:
        """Queue what an earlier incarnation committed and had not yet indexed when it stopped
        (its embedding pipeline stopped with it): the items of this host's conversations that
        have no vector of the model, and on host 0 the long-term memories' too. Until the shards
        confirm them, they stay in their conversations' read-your-writes tails, as the earlier
        incarnation kept them (a caller's search trusts what a context says is indexed)."""
        model_id = self._pipeline.model_id
        if model_id == "none":  # no embedder: nothing is ever embedded, so nothing is pending
            return
        after: tuple[Namespace, str] | None = None
        while True:
            rows = await self._store.pending_embeddings(model_id, page, after)
            mine = [PendingItem(ns, doc_id, text, math.nan) for ns, doc_id, text in rows if self._owns(ns)]
            for item in mine:
                ns = item.namespace
                if ns.kind == "conv":
                    self._swept.setdefault(ConversationKey(ns.app, ns.user_id, ns.scope), set()).add(item.doc_id)
            # recency and columns unknown here (NaN, None): the shard keeps what it holds for them
            self._pipeline.submit(mine)
            if len(rows) < page:
                return
            after = (rows[-1][0], rows[-1][1])

    def _owns(self, ns: Namespace) -> bool:
        """Whether this host embeds ``ns``'s items: a conversation's host, or host 0 for the rest."""
        if ns.kind != "conv":
            return self.host_id == 0
        return ConversationKey(ns.app, ns.user_id, ns.scope).route(self.config.hosts) == self.host_id

    async def _level_shards(self) -> None:
        try:
            self.leveled_on_restart = (await level_all(self._store, self._shards, settle_s=LEVEL_SETTLE_S)).sent
        except Exception as exc:  # the store is down: the shards' own leveling and the next restart remain
            log.warning("host %d could not level the shards after a restart: %r", self.host_id, exc)

    def _build(self) -> None:
        self._started = True
        self.config = resolve_config(self.config)  # a re-embedding job may have switched models
        self._router = ShardRouter(self._shards)
        self._embedder = build_embedder(self.config.embedder)
        self._pipeline = EmbeddingPipeline(
            self._embedder, self._store, self._router, batch_size=max(self.config.embedder.batch_size, 2048)
        )
        self._pipeline.on_indexed = self._on_indexed
        summarizer = build_summarizer(self.config.summarizer)
        self._keeper = (
            None
            if summarizer is None
            else SummaryKeeper(self._store, summarizer, self.config.summarizer, estimate_tokens)
        )
        titler = None
        if self.config.summarizer.titles and hasattr(summarizer, "title"):
            titler = Titler(self._store, summarizer)  # type: ignore[arg-type]
        self._writes = WritePath(
            self.host_id,
            self.config,
            self._store,
            self._ledger,
            self._lag,
            self._pipeline,
            self._keeper,
            lambda: self._conversations.values(),
            titler,
            lost=self._lost,
        )
        self._removal = MessageRemoval(self._store, self._router, self._pipeline, self._keeper)

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
                snaps = await self._store.load_conversations(todo, self.config.buffer_window)
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
        conv = Conversation.loaded(key, snap, self.config.buffer_window, self._writes.make_chain)
        conv.lost = self._lost.pop(key, None)
        swept = self._swept.pop(key, None)
        if swept:
            conv.not_indexed(swept)
        return conv

    # -- writes -----------------------------------------------------------------------------
    @resend(retried=True)  # a retry says so: the host returns the seqs the first attempt gave
    async def add(
        self,
        key: ConversationKey,
        messages: list[Message],
        durable: bool = False,
        retried: bool = False,
        block: bool = True,
    ) -> list[int]:
        """Add messages; their seqs, in order. ``retried``: the caller sent this call before and
        may not have had the answer (its host died): ids it sent keep the seqs they got. Past
        ``max_unpersisted`` it waits for room, or with ``block=False`` raises Backpressure."""
        return (await self.add_many([(key, messages)], durable, retried, block))[0]

    @resend(retried=True)  # a retry says so: the host returns the seqs the first attempt gave
    async def add_many(
        self,
        batch: list[tuple[ConversationKey, list[Message]]] | MessageBatch,
        durable: bool = False,
        retried: bool = False,
        block: bool = True,
    ) -> list[list[int]]:
        """Add to many conversations in one call (admitted whole); seqs per conversation, in order."""
        batch = batch.decode() if isinstance(batch, MessageBatch) else batch
        by_key = {c.key: c for c in await self._get_many([k for k, _ in batch])}
        work = [(by_key[k], msgs) for k, msgs in batch]
        out = await self._writes.assign(work, retried, block)
        return await self._writes.durable(work, out) if durable else out

    async def flush(
        self, key: ConversationKey | None = None, timeout_s: float | None = None, report: bool = True
    ) -> None:
        """Make everything acknowledged so far durable (one conversation, or all of this host's).

        Raises :class:`DeadLetterError` naming the messages of these conversations that could not
        be stored since the last flush (the rest is durable), and StoreError if the store cannot
        be reached within ``timeout_s`` (default ``write_timeout_s``; the messages stay pending).
        ``report=False`` leaves the dead letters for the conversations' own next flush (a driver
        that leaves a shared memray must not take other drivers' reports with it).

        Every loss not yet reported is raised, whatever the host did since its restart: a host
        Ray restarted starts here (resolving its ledger), and conversations with losses to report
        are loaded, settled or not."""
        if not self._started and not report:
            return  # nothing acknowledged here since the (re)start, and nothing to report
        await self.start()
        owed = [k for k in self._lost if key is None or k == key] if report else []
        if owed:
            await self._get_many(owed)  # not held since the restart: load them so their losses are reported
        convs = (
            [self._conversations[key]]
            if key is not None and key in self._conversations
            # all of a host's conversations: only those with a write to wait for or a loss to
            # report (thousands are idle)
            else (
                []
                if key is not None
                else [c for c in self._conversations.values() if not c.buffer.settled or c.lost or c.failed]
            )
        )
        timeout_s = self.config.write_timeout_s if timeout_s is None else timeout_s
        await self._writes.flush_all(convs, timeout_s, report, report)

    async def wait_indexed(self, timeout_s: float | None = None) -> bool:
        """Flush, then wait until every durable message has been embedded and indexed (False on
        timeout, e.g. while the embedder fails and the items wait for their retry). Dead letters
        are left for the conversations' own flushes to report."""
        await self.start()
        await asyncio.gather(*(c.flush(timeout_s) for c in list(self._conversations.values())))
        return await self._pipeline.wait_idle(timeout_s, retries=True)

    # -- reads ------------------------------------------------------------------------------
    async def messages(self, key: ConversationKey, where: MessageFilter = ALL_MESSAGES) -> list[Message]:
        """The conversation's messages that ``where`` keeps: from the buffer when it holds them
        all, else from the store with the buffer's not-yet-durable ones laid over them."""
        conv = await self._get(key)
        limit = where.limit
        if where.recent_only and conv.covers(where.before_seq, limit):
            held = [m for m in conv.buffer.recent() if where.keeps(m)]
            return MessageList(held[-limit:] if limit else held if limit is None else [])
        rows = await self._store.get_messages(key, where)
        return MessageList(overlay([row_to_message(r) for r in rows], conv.buffer.unsettled(), limit, where.keeps))

    async def recent_many(self, requests: list[tuple[ConversationKey, int]]) -> list[tuple[list[Message], Tail]]:
        """The most recent ``limit`` messages of many conversations, each with its read-your-writes
        tail (context() calls, batched)."""
        convs = await self._get_many([key for key, _ in requests])
        out: list[tuple[list[Message], Tail] | None] = [None] * len(requests)
        slow = []  # conversations whose recent messages the buffer alone does not hold
        for i, (conv, (key, limit)) in enumerate(zip(convs, requests)):
            if conv.covers(None, limit):
                out[i] = (MessageList(conv.buffer.recent(limit)), self._tail(key))
            else:
                slow.append(i)
        if slow:
            recent = await asyncio.gather(*(self.messages(requests[i][0], MessageFilter(requests[i][1])) for i in slow))
            for i, msgs in zip(slow, recent):
                out[i] = (msgs, self._tail(requests[i][0]))
        return RecentAnswers(cast(list[tuple[list[Message], Tail]], out))  # pickles as one block of columns

    def _tail(self, key: ConversationKey) -> Tail:
        """The read-your-writes tail of a conversation (:mod:`memray.conversation.read_your_writes`):
        the messages acknowledged that the index may not hold yet (none if not loaded here).

        While this host levels the shards after an incarnation that stopped without closing,
        any message that incarnation committed may be missing from its shard (embedded in the
        store, its shard upsert lost): every message held stands in the tail until then, so a
        caller does not take this answer as word that what it wrote is indexed."""
        conv = self._conversations.get(key)
        if conv is None:
            return Tail([], 0)
        return conv.unindexed_tail(everything=self._leveling is not None and not self._leveling.done())

    def _on_indexed(self, items: list[PendingItem], stamp: int) -> None:
        """The shards confirmed ``items``: they leave their conversations' tails."""
        by_ns: dict[Namespace, list[PendingItem]] = {}
        for item in items:
            by_ns.setdefault(item.namespace, []).append(item)
        for ns, group in by_ns.items():
            if ns.kind != "conv":
                continue
            key = ConversationKey(ns.app, ns.user_id, ns.scope)
            conv = self._conversations.get(key)
            if conv is not None:
                conv.indexed(group, stamp)
            elif (swept := self._swept.get(key)) is not None:
                swept.difference_update(item.doc_id for item in group)
                if not swept:
                    del self._swept[key]

    async def last_seq(self, key: ConversationKey) -> tuple[int, int]:
        """(last assigned seq, last durable seq)."""
        conv = await self._get(key)
        return conv.last_seq, conv.durable_seq

    # -- deletes ----------------------------------------------------------------------------
    async def evict(self, key: ConversationKey) -> None:
        """Forget a conversation's in-memory state before a delete: pending writes are dropped
        and an in-flight write is awaited, so nothing lands after the delete."""
        conv = self._conversations.pop(key, None)
        owed = self._lost.pop(key, None)
        self._swept.pop(key, None)
        if conv is None:
            if owed and self._started:
                self._writes.keep_unreported()  # its losses leave the file of those owed to a flush
            return
        conv.deleted = True
        conv.buffer.drain()
        self._writes.forget(key)
        await conv.close()
        if self._started:
            self._writes.compact_ledger()  # its acknowledgements leave the ledger file too
            self._writes.keep_unreported()  # and its losses the file of those owed to a flush
        ns = conversation_namespace(key)
        self._pipeline.forget(lambda n: n == ns)
        if self._keeper is not None:
            self._keeper.forget(key)

    async def delete_messages(self, key: ConversationKey, ids: list[str], timeout_s: float = 60.0) -> dict[str, int]:
        """Delete some messages of a conversation (:meth:`MessageRemoval.delete`). They leave the
        ledger too: a restart must not record a deleted message as lost."""
        conv = await self._get(key)  # (first: a restarted host builds its removal when it starts)
        done = await self._removal.delete(conv, ids, timeout_s)
        self._writes.compact_ledger()
        return done

    async def clear(self, key: ConversationKey, timeout_s: float = 60.0) -> dict[str, int]:
        """Delete every message the conversation has acknowledged so far (:meth:`MessageRemoval.clear`),
        from the ledger too."""
        conv = await self._get(key)  # (first: a restarted host builds its removal when it starts)
        done = await self._removal.clear(conv, timeout_s)
        self._writes.compact_ledger()
        return done

    async def count_messages(self, key: ConversationKey, ids: list[str] | None = None) -> dict[str, int]:
        """What this host holds of the conversation's messages (:meth:`MessageRemoval.count`)."""
        await self.start()
        return self._removal.count(key, self._conversations.get(key), ids)

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
        for by_key in (self._lost, self._swept):  # what is kept for conversations not loaded
            for k in [k for k in by_key if k.app == app and k.user_id == user_id]:
                del by_key[k]
        self._writes.compact_ledger()
        self._writes.keep_unreported()
        self._pipeline.forget(lambda n: n.app == app and n.user_id == user_id)
        await self._pipeline.wait_idle(timeout_s)
        return len(keys)

    async def count_user(self, app: str, user_id: str) -> dict[str, int]:
        """What this host holds of the user in memory: conversations, and items queued (or
        awaiting a retry) for embedding. Both are 0 after :meth:`evict_user`."""
        await self.start()
        return {
            "conversations": sum(1 for k in self._conversations if k.app == app and k.user_id == user_id),
            "queued": self._pipeline.count(lambda n: n.app == app and n.user_id == user_id)
            + sum(1 for r in self._ledger.read() if r.key.app == app and r.key.user_id == user_id),
        }

    async def clear_caches(self) -> int:
        """Empty this process's embedding cache (keyed by hashes of texts: not by user) and its
        memos keyed by texts (``memray.text.forget_texts``: term counts, static vectors); the
        entries dropped."""
        await self.start()
        cached = self._embedder.cache.clear() if isinstance(self._embedder, CachedEmbedder) else 0
        return cached + forget_texts()

    # -- lifecycle and stats ----------------------------------------------------------------
    async def set_embedder(self, config: EmbedderConfig) -> str:
        """Embed new writes with the model ``config`` describes from now on (the re-embedding
        job's switch). Returns its model id. Idempotent."""
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
            "writing": sum(c.buffer.writing_count for c in self._conversations.values()),
            "commits": self._writes.committer.commits,
            "rows": self._writes.committer.rows,
            "embedded": self._pipeline.embedded,
            "embedding_failures": self._pipeline.failures,
            "embedding_error": self._pipeline.last_error,
            "dead_letters": self._writes.dead_letters,
            "lost_on_restart": self.lost_on_restart,
            "leveled_on_restart": self.leveled_on_restart,
            "rss_bytes": rss_bytes(),
        }

    async def ping(self) -> bool:
        return True

    async def durable_lag(self, reset: bool = False, samples: bool = False) -> dict[str, Any]:
        """Acknowledged → committed lag of this host's messages since the last reset: count,
        p50/p95/p99/max in seconds (measured in the host, per message), and ``pending``
        (acknowledged, not yet durable); ``samples`` adds every lag kept."""
        return self._lag.summary(reset, samples)

    async def close(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Flush every conversation, drain the embedding pipeline, stop. Returns within
        ``timeout_s`` (default ``write_timeout_s``) plus a few seconds whatever the store does,
        with a report: ``unpersisted`` (acknowledged messages not durable, e.g. the store was
        down) and ``unpersisted_in`` (their conversations, at most 20), ``dead_letters``
        (rejected since the last flush), ``error`` (why, or None)."""
        report: dict[str, Any] = {"host": self.host_id, "unpersisted": 0, "dead_letters": 0, "error": None}
        if self._closed or not self._started:
            self._closed = True
            return report
        self._closed = self._writes.admission.closed = True  # callers waiting for room: ClosedError
        timeout = self.config.write_timeout_s if timeout_s is None else timeout_s
        convs = list(self._conversations.values())
        try:  # losses of an earlier incarnation were reported when it restarted: not again here
            await self._writes.flush_all(convs, timeout, report_lost=False)
        except DeadLetterError as exc:
            report["dead_letters"] = len(exc.letters)
            report["error"] = str(exc)
        except Exception as exc:
            report["error"] = f"{type(exc).__name__}: {exc}"
        unsettled = [(c.key, len(c.buffer.unsettled())) for c in convs if not c.deleted]
        report["unpersisted"] = sum(n for _, n in unsettled)
        report["unpersisted_in"] = [[k.app, k.user_id, k.conversation_id] for k, n in unsettled if n][:20]
        for c in convs:  # nothing keeps retrying after close
            c.stop()
        await self._pipeline.wait_idle(min(timeout, 30.0))
        indexed = not self._pipeline.unconfirmed()
        await self._pipeline.close()
        if self._leveling is not None and not self._leveling.done():
            self._leveling.cancel()
            indexed = False  # not known: the next incarnation levels the shards
        if not report["unpersisted"]:
            self._ledger.reset()  # everything acknowledged is durable: nothing to resolve next time
            if indexed:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self._open_marker)
        self._ledger.close()
        return report
