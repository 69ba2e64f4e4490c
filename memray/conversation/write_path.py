"""`WritePath`: how a host's acknowledged messages become durable.

add → buffer (seq assigned) → ledger (:mod:`.ledger`) → acknowledged → persist chain (debounced,
on the host's one persist wheel, :mod:`.persist`) → when a slot is due, :meth:`WritePath.write_many`
drains every due conversation → group commit (one store transaction per partition for all of
them, :mod:`.group_commit`) → embedding pipeline (vectors after the durable write) → shards.
Summaries are folded in the background once the unsummarised history passes the trigger.

Seq integrity — the seq an ``add`` returns is the seq stored, and a seq once acknowledged is
never given to another message, across host kills and a store that stalls — rests on four rules:

1. Per message, not per call: an id keeps the seq it already has — the buffer's (as the call
   found it: the call's own earlier messages may push it out of the window), or the store's,
   asked for the ids the buffer does not hold that may have one (a retried call: always; a
   caller-named id: unless the buffer holds the whole conversation;
   :meth:`Conversation.needs_lookup`). The adds of one conversation take turns
   (``conv.last_queued_add``); when its turn comes, an add asks again for ids that left the
   buffer while it waited.
2. The store answers with the seq an id was *given* (:func:`memray.store.messages.assigned_seqs`):
   its message's, or its dead letter's (acknowledged, then lost in a restart).
3. Ledger before write: an add appends its ``(id, seq)`` pairs to the ledger with no await
   between giving the seqs and the append, so no row can reach the store that the ledger lacks.
   A host that restarts resolves its ledger against the store before it serves
   (:meth:`WritePath.resolve_ledger`): acknowledged messages the store lacks are recorded as
   ``lost`` dead letters with their seqs — which rule 2 then returns to a retry, whether the dead
   host's orphaned commit lands before that retry, after it, or never.
4. The store is the arbiter: a commit of an id it already holds keeps the stored seq (the first
   commit of an id wins) and says so; a durable add then answers with the stored seqs
   (:meth:`WritePath.durable`), and a buffered one, which answered already, is logged.

No wedge: rows the store rejects are dead-lettered (:mod:`memray.store.deadletter`) and
reported to the conversation's next ``flush`` (or durable add) as a
:class:`~memray.errors.DeadLetterError`; waits on the store are bounded by
``MemoryConfig.write_timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from memray.config import MemoryConfig
from memray.conversation.admission import Admission
from memray.conversation.group_commit import GroupCommitter, Outcome
from memray.conversation.ledger import AckLedger
from memray.conversation.persist import PersistChain, PersistWheel
from memray.conversation.state import Conversation
from memray.embedding.pipeline import EmbeddingPipeline, PendingItem
from memray.errors import DeadLetterError
from memray.ids import ConversationKey, conversation_namespace
from memray.index.columns import columns_of
from memray.metrics import DEAD_LETTERS, MESSAGES_LOST, LagRecorder
from memray.models import Message
from memray.rpc.batch import Coalescer
from memray.store.deadletter import DeadLetter
from memray.store.messages import Correction
from memray.store.partitions import StorePartitions
from memray.store.rows import MessageRow, message_payload, message_to_row
from memray.text import estimate_tokens

if TYPE_CHECKING:
    from memray.conversation.summary import SummaryKeeper
    from memray.conversation.title import Titler

__all__ = ["WritePath"]

log = logging.getLogger(__name__)


class _Drained(NamedTuple):
    """What one write took from a conversation's buffer: its messages, their ids, their rows,
    and the dead letters of those that could not be made rows."""

    msgs: list[Message]
    ids: list[str]
    rows: list[MessageRow]
    broken: list[DeadLetter]


def _pairs(msgs: list[Message], seqs: list[int]) -> list[tuple[str, int]]:
    return [(m.id, s) for m, s in zip(msgs, seqs)]


class WritePath:
    """The write path of one host's conversations (see the module docstring). ``held()`` gives
    the conversations the host holds (the ledger is compacted to theirs)."""

    def __init__(
        self,
        host_id: int,
        config: MemoryConfig,
        store: StorePartitions,
        ledger: AckLedger,
        lag: LagRecorder,
        pipeline: EmbeddingPipeline,
        keeper: SummaryKeeper | None,
        held: Callable[[], Iterable[Conversation]],
        titler: Titler | None = None,
        lost: dict[ConversationKey, dict[str, int]] | None = None,
    ) -> None:
        self.host_id = host_id
        self.config = config
        self._store = store
        self._ledger = ledger
        self._lag = lag
        self._pipeline = pipeline
        self._keeper = keeper
        self._held = held
        self._titler = titler
        self._estimate = estimate_tokens
        self.committer = GroupCommitter(store)
        self.wheel = PersistWheel(
            self.write_many, config.debounce_ms / 1000.0, config.retry_backoff_s, config.retry_backoff_max_s
        )
        self.admission = Admission(
            host_id, config.max_unpersisted, lambda: lag.pending, self.hurry, config.write_timeout_s
        )
        self._lookup: Coalescer[tuple[ConversationKey, list[str]], dict[str, int]] = Coalescer(
            store.assigned_seqs, 4096
        )
        self.dead_letters = 0
        # losses of earlier incarnations no caller has been told of, for conversations not held
        # here (a held conversation keeps its own in ``Conversation.lost``); both are mirrored in
        # ``host-<i>.lost`` so that a host killed again before a flush reports them still reports
        self.lost: dict[ConversationKey, dict[str, int]] = {} if lost is None else lost
        self._unreported = AckLedger(ledger.path[: -len(".ledger")] + ".lost")

    async def resolve_ledger(self) -> list[DeadLetter]:
        """Acknowledged messages of a previous incarnation that the store lacks become ``lost``
        dead letters (their seqs kept from reuse), counted and returned for the host to report;
        then a fresh ledger. Host 0 also resolves the ledgers of hosts that no longer exist (fewer
        ``hosts`` now)."""
        orphans = [AckLedger(p) for p in self._orphan_ledgers()] if self.host_id == 0 else []
        records = [r for ledger in [self._ledger, *orphans] for r in ledger.read()]
        letters: list[DeadLetter] = []
        if records:
            reason = (
                f"acknowledged (durable=False) but not yet stored when host {self.host_id} stopped: "
                "lost within the debounce window"
            )
            letters = await self._store.resolve_acknowledged([(r.key, r.id, r.seq) for r in records], reason)
            if letters:
                MESSAGES_LOST.inc(len(letters), {"host": str(self.host_id)})
                log.warning(
                    "host %d: %d acknowledged messages in %d conversations were not yet durable when it last "
                    "stopped (its process killed, or its actor restarted) and are lost; see Memory.dead_letters()",
                    self.host_id,
                    len(letters),
                    len({(d.app, d.user_id, d.conversation_id) for d in letters}),
                )
        self._ledger.reset()
        for ledger in orphans:
            os.remove(ledger.path)
        for d in letters:
            self.lost.setdefault(ConversationKey(d.app, d.user_id, d.conversation_id), {})[d.id] = d.seq
        for r in self._unreported.read():  # an earlier incarnation's, still owed to a flush
            self.lost.setdefault(r.key, {}).setdefault(r.id, r.seq)
        self.keep_unreported()
        return letters

    def keep_unreported(self) -> None:
        """Rewrite ``host-<i>.lost`` with the losses no flush has reported yet (those of
        conversations held here and of the others). Durability: as :meth:`AckLedger.rewrite`
        (survives the process). Called when they change: at start, after a report, on a delete."""
        held = [(c.key, sorted(c.lost.items())) for c in self._held() if c.lost]
        loose = [(k, sorted(pairs.items())) for k, pairs in self.lost.items() if pairs]
        if held or loose or os.path.exists(self._unreported.path):
            self._unreported.rewrite([*held, *loose])
            self._unreported.close()

    def _orphan_ledgers(self) -> list[str]:
        folder = os.path.dirname(self._ledger.path)
        names = os.listdir(folder) if os.path.isdir(folder) else []
        return [
            os.path.join(folder, n)
            for n in sorted(names)
            if n.startswith("host-")
            and n.endswith(".ledger")
            and n[5:-7].isdigit()
            and int(n[5:-7]) >= self.config.hosts
        ]

    def make_chain(self, conv: Conversation) -> PersistChain[Conversation]:
        return self.wheel.chain(conv)

    def hurry(self) -> None:
        """Every pending write starts now, not after its debounce (callers wait for room)."""
        for conv in self._held():
            if not conv.buffer.settled:
                conv.hurry()

    def forget(self, key: ConversationKey) -> None:
        """A conversation evicted: its acknowledged messages no longer count against the bound."""
        self._lag.forget(key)
        self.admission.released()

    async def assign(
        self, work: list[tuple[Conversation, list[Message]]], retried: bool, block: bool = True
    ) -> list[list[int]]:
        """Admit the call (backpressure, :mod:`.admission`), give the messages of each
        (conversation, messages) their seqs, in arrival order per conversation, then record them
        in the ledger and as acknowledged — before the caller hears of them.

        Fast path (almost every call): no id needs a store lookup and no earlier add of the
        conversation is waiting for one; everything runs synchronously. Otherwise the adds of
        that conversation form a queue (``conv.last_queued_add``): each waits for the one before it."""
        async with self.admission.admit(sum(len(msgs) for _, msgs in work), block):
            out = await self._assign(work, retried)
            now = time.monotonic()
            for conv, msgs in work:
                self._lag.acked(conv.key, [m.id for m in msgs], now)
                if self.admission.waiting:
                    conv.hurry()
        return out

    async def _assign(self, work: list[tuple[Conversation, list[Message]]], retried: bool) -> list[list[int]]:
        needs = [c.needs_lookup(msgs, retried) for c, msgs in work]
        slow = [i for i, (c, _) in enumerate(work) if needs[i] or c.last_queued_add is not None]
        out: list[list[int]] = [[] for _ in work]
        if not slow:  # no await from the first seq to the ledger: nothing is written before it
            for i, (c, msgs) in enumerate(work):
                out[i] = c.add(msgs, c.lost)
            self._ledger.append((c.key, _pairs(msgs, seqs)) for (c, msgs), seqs in zip(work, out))
            return out
        loop = asyncio.get_running_loop()
        queued: list[tuple[int, asyncio.Future[None] | None, asyncio.Future[None]]] = []
        for i, (c, msgs) in enumerate(work):
            if i in slow:
                fut: asyncio.Future[None] = loop.create_future()
                queued.append((i, c.last_queued_add, fut))
                c.last_queued_add = fut
            else:
                out[i] = c.add(msgs, c.lost)
        self._ledger.append((c.key, _pairs(msgs, out[i])) for i, (c, msgs) in enumerate(work) if i not in slow)
        try:
            found = await asyncio.gather(*(self._stored(work[i][0].key, needs[i]) for i, _, _ in queued))
            for (i, prev, fut), stored in zip(queued, found):
                conv, msgs = work[i]
                if prev is not None:
                    await prev
                # while it waited, ids of this add may have left the buffer (the adds before it,
                # a commit that settled them): ask for those too, until none is left to ask for
                asked = set(needs[i])
                while later := [m for m in conv.needs_lookup(msgs, retried) if m not in asked]:
                    asked.update(later)
                    stored = {**stored, **await self._stored(conv.key, later)}
                # no await from here to the ledger: a write may start at the next one, and
                # whatever can reach the store must be in the ledger a restarted host resolves
                out[i] = conv.add(msgs, {**(conv.lost or {}), **stored})
                self._ledger.append([(conv.key, _pairs(msgs, out[i]))])
                fut.set_result(None)
        finally:
            for i, _, fut in queued:
                if not fut.done():
                    fut.set_result(None)
                if work[i][0].last_queued_add is fut:
                    work[i][0].last_queued_add = None
        return out

    async def _stored(self, key: ConversationKey, ids: list[str]) -> dict[str, int]:
        return await self._lookup.get((key, ids)) if ids else {}

    async def write_many(self, convs: list[Conversation]) -> list[int | Exception]:
        """Persist what each of ``convs`` has pending, all in one group commit per partition
        (the persist wheel's batch); per conversation, the highest seq now settled (committed,
        or dead-lettered: a row the store rejects never blocks the rows after it), or the
        exception that failed its write (its messages pending again, to retry)."""
        out: list[int | Exception] = [0] * len(convs)
        work: list[tuple[int, _Drained]] = []
        for i, conv in enumerate(convs):
            drained = self._drain(conv)
            if drained is None:
                out[i] = conv.durable_seq
            else:
                work.append((i, drained))
        if not work:
            return out
        try:
            outcomes = await self._commit([d for _, d in work])
        except BaseException:  # cancelled (the host stopped): nothing is lost, all stays pending
            for i, d in work:
                convs[i].buffer.mark_pending(d.ids)
            raise
        committed: list[tuple[ConversationKey, list[str]]] = []
        indexed: list[PendingItem] = []
        for (i, d), outcome in zip(work, outcomes):
            if isinstance(outcome, Exception):
                convs[i].buffer.mark_pending(d.ids)
                out[i] = outcome
                continue
            committed.append((convs[i].key, d.ids))
            try:
                out[i] = self._settle(convs[i], d, outcome, indexed)
            except Exception as exc:  # what follows the commit failed: the retry finds nothing left
                out[i] = exc
        self._pipeline.submit(indexed)  # (once for the write, not per conversation)
        self._lag.committed(committed)
        self.admission.released()
        if self._ledger.due:
            self.compact_ledger()
        return out

    def _drain(self, conv: Conversation) -> _Drained | None:
        """Take ``conv``'s pending messages as rows (None: nothing to write)."""
        msgs = conv.buffer.drain()
        if conv.deleted or not msgs:
            return None
        rows: list[MessageRow] = []
        broken: list[DeadLetter] = []
        for m in msgs:
            try:
                rows.append(message_to_row(conv.key, m))
            except Exception as exc:  # cannot even be serialised: nothing to retry
                broken.append(
                    DeadLetter(
                        conv.key.app,
                        conv.key.user_id,
                        conv.key.conversation_id,
                        m.id,
                        m.seq or 0,
                        "rejected",
                        f"{type(exc).__name__}: {exc}"[:2000],
                        "",
                    )
                )
        return _Drained(msgs, [m.id for m in msgs], rows, broken)

    async def _commit(self, work: list[_Drained]) -> list[Outcome | Exception]:
        """Record the rows that could not be serialised, then commit the rest (one group commit
        per partition); a conversation whose dead letters could not be recorded is not committed."""
        broken = [letter for d in work for letter in d.broken]
        try:
            if broken:
                await self._store.record_dead_letters(broken)
        except Exception as failed:
            committed = iter(await self.committer.submit_many([d.rows for d in work if not d.broken]))
            return [failed if d.broken else next(committed) for d in work]
        return await self.committer.submit_many([d.rows for d in work])

    def _settle(self, conv: Conversation, drained: _Drained, outcome: Outcome, indexed: list[PendingItem]) -> int:
        """``conv``'s drained messages are committed or dead-lettered: settle the buffer and the
        tail, and pass the rows on (to ``indexed``, what the caller has embedded and indexed; to
        the title and the summary). (The caller records the lag of the whole write at once.)"""
        msgs, ids, _, _ = drained
        conv.buffer.settle(ids)
        rows, corrected = self._set_aside(conv, drained, outcome)
        self._after_commit(conv, rows, indexed)
        kept = [m.seq or 0 for m in msgs if m.id not in corrected]
        return max(kept) if kept else conv.durable_seq

    def _set_aside(
        self, conv: Conversation, drained: _Drained, outcome: Outcome
    ) -> tuple[list[MessageRow], dict[str, Correction]]:
        """What a commit did not take as given: rows dead-lettered (out of the buffer and the
        tail), ids the store held under other seqs (the store's seq kept), ids stored while
        outside the buffer. Returns the rows committed, with the store's seqs, and the
        corrections by id."""
        msgs, ids, rows, broken = drained
        rejected = [*broken, *outcome.rejected]
        bad = {d.id for d in broken} | set(outcome.rejected_ids)
        corrected = {c.id: c for c in outcome.corrections}
        if corrected:
            self._corrected(conv, msgs, corrected)
        gone = bad | set(corrected) | (conv.outside or set()).intersection(ids)
        for mid in gone:  # dead-lettered, or held by the store under an older seq: out of the tail
            conv.buffer.discard(mid)
        if conv.outside:
            conv.outside.difference_update(ids)
        if rejected:
            self._dead_lettered(conv, rejected)
        rows = [
            r._replace(seq=corrected[r.id].seq, created_at=corrected[r.id].created_at) if r.id in corrected else r
            for r in rows
            if r.id not in bad
        ]
        return rows, corrected

    def _corrected(self, conv: Conversation, msgs: list[Message], corrected: dict[str, Correction]) -> None:
        """The store already held some of ``msgs`` under another seq and kept it (it is the
        arbiter: the first commit of an id wins). A durable add waiting on them returns the
        store's seqs (:meth:`durable`); a buffered add has answered already, so say so."""
        conv.corrected += len(corrected)
        given = {m.id: m.seq for m in msgs}
        log.warning(
            "%d message(s) of %s were given seqs the store had given otherwise; stored seqs kept: %s",
            len(corrected),
            conv.key,
            "; ".join(f"{i!r} {given.get(i)} -> {c.seq}" for i, c in list(corrected.items())[:3]),
        )

    async def durable(self, work: list[tuple[Conversation, list[Message]]], seqs: list[list[int]]) -> list[list[int]]:
        """Make ``work`` (conversations with the messages an add gave ``seqs``) durable, and
        return the seqs as stored: if a commit found one of its ids already stored under
        another seq while it waited, the store's word is read back for its ids."""
        before = [c.corrected for c, _ in work]
        await self.flush_all(list({c.key: c for c, _ in work}.values()), self.config.write_timeout_s)
        changed = [i for i, (c, _) in enumerate(work) if c.corrected != before[i]]
        if changed:
            found = await self._store.stored_seqs([(work[i][0].key, [m.id for m in work[i][1]]) for i in changed])
            for i, stored in zip(changed, found):
                seqs[i] = [stored.get(m.id, s) for m, s in zip(work[i][1], seqs[i])]
        return seqs

    def _dead_lettered(self, conv: Conversation, letters: list[DeadLetter]) -> None:
        conv.report(letters)
        self.dead_letters += len(letters)
        DEAD_LETTERS.inc(len(letters), {"host": str(self.host_id)})
        log.warning(
            "%d message(s) of %s rejected by the store and recorded as dead letters: %s",
            len(letters),
            conv.key,
            "; ".join(f"{d.id!r} seq {d.seq}: {d.error}" for d in letters[:3]),
        )

    def compact_ledger(self) -> None:
        """Rewrite the ledger with only what is not yet durable (conversations held here)."""
        self._ledger.rewrite((c.key, [(m.id, m.seq or 0) for m in c.buffer.unsettled()]) for c in self._held())

    def _after_commit(self, conv: Conversation, rows: list[MessageRow], indexed: list[PendingItem]) -> None:
        ns = conversation_namespace(conv.key)
        indexed += (
            PendingItem(
                ns, r.id, r.text, float(r.seq), message_payload(r), columns_of(r.created_at, r.sim_time, r.importance)
            )
            for r in rows
            if r.text
        )
        if self._titler is not None:
            self._titler.consider(conv.key, rows)
        if self._keeper is None:
            return
        if conv.unsummarized_tokens >= 0:
            conv.unsummarized_tokens += sum(self._estimate(r.text) for r in rows)
        if (
            conv.unsummarized_tokens < 0 or conv.unsummarized_tokens >= self.config.summarizer.trigger_tokens
        ) and not conv.summarizing:
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

    async def flush_one(
        self, conv: Conversation, timeout_s: float | None, report_lost: bool = True, report_failed: bool = True
    ) -> None:
        await conv.flush(timeout_s)
        letters = conv.take_failed() if report_failed else []
        if conv.lost and report_lost:  # lost in a restart, unless a retried add has stored them since
            lost, conv.lost = conv.lost, None
            self.keep_unreported()
            stored = (await self._store.stored_seqs([(conv.key, list(lost))]))[0]
            reason = f"acknowledged (durable=False) but not yet stored when host {self.host_id} stopped"
            letters += [
                DeadLetter(conv.key.app, conv.key.user_id, conv.key.conversation_id, i, s, "lost", reason, "")
                for i, s in lost.items()
                if i not in stored
            ]
        if letters:
            raise DeadLetterError(
                [(d.app, d.user_id, d.conversation_id, d.id, d.seq, d.kind, d.error) for d in letters]
            )

    async def flush_all(
        self, convs: list[Conversation], timeout_s: float | None, report_lost: bool = True, report_failed: bool = True
    ) -> None:
        results = await asyncio.gather(
            *(self.flush_one(c, timeout_s, report_lost, report_failed) for c in convs), return_exceptions=True
        )
        DeadLetterError.raise_gathered(results)
