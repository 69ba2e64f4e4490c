"""Acknowledged == stored, under host kills and a paused store: a Hypothesis state machine.

The host core runs against the real history store (a DuckDB file) behind a ref that can be
*paused*: while paused, its calls wait in a queue, as calls to a SIGSTOPped store actor wait in
its socket; resuming runs them in an order Hypothesis draws (the store actor serves callers in
no promised order). A host is *killed* by abandoning its event loop, as SIGKILL ends a process:
none of its code runs again, but the calls it already sent to the store stay queued there and
run when the store resumes — for nobody (orphans). A fresh host core over the same store and
ledger file then takes over, as Ray restarts the actor, and every call the dead host had not
answered is sent to it again with ``retried=True``, as the facade's ``RetryingRef`` does.

Batches are durable or buffered, of random sizes, to two conversations whose buffers hold 4
messages (so retries and re-adds reach past them); some re-add earlier ids by name. After every
step, every acknowledged id the store holds is stored at its acknowledged seq, and no seq is
held twice. At the end (store resumed, everything flushed) every durably acknowledged message
is stored, and every buffered one is stored or recorded as ``lost`` under its seq.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memray.config import MemoryConfig
from memray.conversation.host import ConversationHost
from memray.errors import DeadLetterError
from memray.ids import ConversationKey
from memray.index.client import ShardClient
from memray.index.shard import VectorShard
from memray.models import Message, TextPart
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.partitions import StorePartitions

KEYS = [ConversationKey("app", f"u{i}", "c") for i in range(2)]
TURNS = 200  # loop turns a step lets the live host run (everything it can do without the store)


@dataclass
class Queued:
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    reply: asyncio.Future[Any]


class PausableRef:
    """An ActorRef to a core in this process whose calls run inline, or wait while paused."""

    def __init__(self, obj: Any, label: str) -> None:
        self.obj = obj
        self.label = label
        self.paused = False
        self.queue: list[Queued] = []

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        if not self.paused:
            return getattr(self.obj, method)(*args, **kwargs)
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queue.append(Queued(method, args, kwargs, reply))
        return await reply

    def resume(self, order: list[int]) -> None:
        """Run the queued calls in ``order`` (a permutation of their positions)."""
        self.paused = False
        queue, self.queue = self.queue, []
        for i in order:
            q = queue[i]
            try:
                result = getattr(self.obj, q.method)(*q.args, **q.kwargs)
            except Exception as exc:
                if not q.reply.done():
                    q.reply.set_exception(exc)
                continue
            if not q.reply.done():  # (a killed host's reply is set and never read)
                q.reply.set_result(result)


@dataclass
class Call:
    """An add the caller is waiting on: resent to a restarted host until it answers."""

    key: ConversationKey
    msgs: list[Message]
    durable: bool
    task: asyncio.Task[list[int]] | None = None


@dataclass
class Incarnation:
    """One life of the host: its core and the event loop its process would run."""

    host: ConversationHost
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    def run(self, turns: int = TURNS) -> None:
        async def turn() -> None:
            for _ in range(turns):
                await asyncio.sleep(0)

        self.loop.run_until_complete(turn())

    def stop(self) -> None:
        while tasks := asyncio.all_tasks(self.loop):
            for task in tasks:
                task.cancel()
            self.loop.run_until_complete(asyncio.wait(tasks))
        self.loop.close()


class AckedIsStored(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="memray-seq-sm-"))
        self.config = MemoryConfig(
            path=str(self.root),
            mode="inprocess",
            hosts=1,
            shards=1,
            debounce_ms=0,
            buffer_window=4,
            embedder={"kind": "none"},
            summarizer={"kind": "none"},
        )
        self.db = HistoryStore(self.config.store_path)
        self.db.open()
        self.store = PausableRef(self.db, "history store")
        shard = VectorShard(
            0, str(self.root / "vectors" / "shard-0"), self.config.embedder.dim, "none", self.config.index
        )
        shard.open()
        self.shard = PausableRef(shard, "shard 0")
        self.dead: list[Incarnation] = []
        self.life = self._incarnation()
        self.calls: list[Call] = []
        self.acked: dict[tuple[ConversationKey, str], tuple[int, bool]] = {}  # -> (seq, durable)
        self.sent = 0

    def _incarnation(self) -> Incarnation:
        stores = StorePartitions([StoreClient(self.store)])  # type: ignore[arg-type]
        return Incarnation(ConversationHost(0, self.config, stores, [ShardClient(self.shard)]))  # type: ignore[arg-type]

    def _send(self, call: Call, retried: bool) -> None:
        call.task = self.life.loop.create_task(self.life.host.add(call.key, call.msgs, call.durable, retried))

    def _collect(self) -> None:
        """Record the answers that came back; a call that failed (not a kill) is resent."""
        for call in list(self.calls):
            if call.task is None or not call.task.done():
                continue
            self.calls.remove(call)
            error = call.task.exception()
            if isinstance(error, DeadLetterError):  # a durable add named earlier losses: not acknowledged
                continue
            if error is not None:
                raise error
            for m, seq in zip(call.msgs, call.task.result()):
                known = self.acked.get((call.key, m.id))
                assert known is None or known[0] == seq, (call.key, m.id, known, seq)
                self.acked[(call.key, m.id)] = (seq, call.durable or (known is not None and known[1]))

    def _step(self) -> None:
        self.life.run()
        self._collect()

    # -- rules ----------------------------------------------------------------------------
    @rule(conv=st.integers(0, 1), size=st.integers(1, 9), durable=st.booleans(), named=st.booleans())
    def add(self, conv: int, size: int, durable: bool, named: bool) -> None:
        msgs = []
        for _ in range(size):
            self.sent += 1
            text = [TextPart(text=f"message {self.sent}")]
            msgs.append(
                Message(id=f"n{self.sent}", role="user", parts=text) if named else Message(role="user", parts=text)
            )
        call = Call(KEYS[conv], msgs, durable)
        self.calls.append(call)
        self._send(call, retried=False)
        self._step()

    @precondition(lambda self: bool(self.acked))
    @rule(data=st.data(), durable=st.booleans())
    def readd(self, data: st.DataObject, durable: bool) -> None:
        """Old messages sent again by name (an edit): each keeps the seq it was acknowledged with."""
        key = data.draw(st.sampled_from(sorted({k for k, _ in self.acked})))
        ids = sorted(i for k, i in self.acked if k == key)
        chosen = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=9, unique=True))
        msgs = [Message(id=i, role="user", parts=[TextPart(text=f"{i} edited")]) for i in chosen]
        call = Call(key, msgs, durable)
        self.calls.append(call)
        self._send(call, retried=False)
        self._step()

    @rule()
    def kill_host(self) -> None:
        """SIGKILL: the host's loop never runs again; what it sent the store stays queued there."""
        self.dead.append(self.life)
        self.life = self._incarnation()
        for call in self.calls:
            self._send(call, retried=True)
        self._step()

    @precondition(lambda self: not self.store.paused)
    @rule()
    def pause_store(self) -> None:
        self.store.paused = True

    @precondition(lambda self: self.store.paused)
    @rule(data=st.data())
    def resume_store(self, data: st.DataObject) -> None:
        self.store.resume(data.draw(st.permutations(range(len(self.store.queue)))))
        self._step()

    @rule()
    def wait(self) -> None:
        self._step()

    # -- what must hold -------------------------------------------------------------------
    @invariant()
    def acknowledged_seqs_are_stored_seqs(self) -> None:
        for key in KEYS:
            rows = self.db.get_messages(key)
            seqs = [r.seq for r in rows]
            assert len(seqs) == len(set(seqs)), f"a seq stored twice in {key}: {sorted(seqs)}"
            for r in rows:
                acked = self.acked.get((key, r.id))
                assert acked is None or acked[0] == r.seq, f"{r.id} acknowledged at {acked[0]}, stored at {r.seq}"

    def teardown(self) -> None:
        try:
            if self.store.paused:
                self.store.resume(list(range(len(self.store.queue))))
            for _ in range(20):
                self._step()
                if not self.calls:
                    break
            assert not self.calls, "calls still unanswered with the store up"
            for key in KEYS:
                flush = self.life.loop.create_task(self.life.host.flush(key))
                self.life.run()
                assert flush.done()
                if flush.exception() is not None:
                    assert isinstance(flush.exception(), DeadLetterError)  # buffered losses, named
            self.acknowledged_seqs_are_stored_seqs()
            stored = {(key, r.id): r.seq for key in KEYS for r in self.db.get_messages(key)}
            lost = {(KEY_OF(d), d.id): d.seq for d in self.db.dead_letters(limit=100_000) if d.kind == "lost"}
            for (key, mid), (seq, durable) in self.acked.items():
                if durable:
                    assert stored.get((key, mid)) == seq, f"durably acknowledged {mid} (seq {seq}) is not stored"
                else:
                    assert seq in (stored.get((key, mid)), lost.get((key, mid))), f"{mid} (seq {seq}) vanished"
            by_seq = {(k, s): i for (k, i), s in stored.items()}
            for (key, mid), seq in lost.items():
                assert by_seq.get((key, seq), mid) == mid, f"lost {mid}'s seq {seq} given to another message"
        finally:
            for life in [*self.dead, self.life]:  # (after the checks: the dead may run again now)
                life.stop()
            self.db.close()
            shutil.rmtree(self.root, ignore_errors=True)


def KEY_OF(letter: Any) -> ConversationKey:  # noqa: N802
    return ConversationKey(letter.app, letter.user_id, letter.conversation_id)


#: ``MEMRAY_SEQ_EXAMPLES=400`` for a longer run (400 x 40 steps found every race fixed so far).
EXAMPLES = int(os.environ.get("MEMRAY_SEQ_EXAMPLES", "40"))
AckedIsStored.TestCase.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_acknowledged_is_stored = AckedIsStored.TestCase
