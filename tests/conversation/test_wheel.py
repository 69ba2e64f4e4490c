"""The host's persist wheel: many chains, one timer, one task and one write per due slot.

The wheel tests drive :class:`PersistWheel` with a fake ``write_many`` (a list per owner, a gate
to hold a write in flight, failures on demand); the host tests run memray in-process on real
DuckDB partitions and count the store's commits. Every wait is on state (an event, a count),
never on a time."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import memray
from memray.conversation.persist import PersistWheel
from memray.errors import StoreError, UnavailableError


class FakeStore:
    """``write_many`` over owners that are names: commits each owner's pending items, or fails
    the owners in ``failing``; ``gate`` (when set) holds every write until it opens."""

    def __init__(self) -> None:
        self.pending: dict[str, list[int]] = {}
        self.durable: dict[str, list[int]] = {}
        self.calls: list[list[str]] = []
        self.failing: set[str] = set()
        self.fail_next: dict[str, int] = {}  # owner -> how many of its next writes fail
        self.in_flight: dict[str, int] = {}
        self.max_in_flight = 0
        self.error: Exception = RuntimeError("store down")
        self.gate: asyncio.Event | None = None
        self.delay_s = 0.0  # how long a write takes (the machine's writes overlap its next steps)
        self.started = asyncio.Event()
        self.cancelled = 0

    def put(self, owner: str, item: int) -> None:
        self.pending.setdefault(owner, []).append(item)

    async def write_many(self, owners: list[str]) -> list[int | Exception]:
        self.calls.append(owners)
        for o in owners:
            self.in_flight[o] = self.in_flight.get(o, 0) + 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight[o])
        taken = {o: self.pending.pop(o, []) for o in owners}
        self.started.set()
        try:
            await asyncio.sleep(self.delay_s)
            if self.gate is not None:
                await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            for o, items in taken.items():  # what a cancelled write took is pending again
                self.pending[o] = items + self.pending.get(o, [])
            raise
        finally:
            for o in owners:
                self.in_flight[o] -= 1
        out: list[int | Exception] = []
        for o, items in taken.items():
            if o in self.failing or self.fail_next.get(o, 0) > 0:
                self.fail_next[o] = max(self.fail_next.get(o, 0) - 1, 0)
                self.pending[o] = items + self.pending.get(o, [])
                out.append(self.error)
            else:
                self.durable.setdefault(o, []).extend(items)
                out.append(self.durable[o][-1] if self.durable[o] else 0)
        return out


def test_chains_due_together_are_written_by_one_call() -> None:
    async def main() -> None:
        store = FakeStore()
        wheel = PersistWheel(store.write_many, debounce_s=0.03, slot_s=0.01)
        chains = [wheel.chain(f"c{i}") for i in range(200)]
        for i, c in enumerate(chains):
            store.put(f"c{i}", i)
            c.schedule()
        await asyncio.gather(*(c.flush(timeout_s=10) for c in chains))  # flushed in one turn...
        assert len(store.calls) == 1 and len(store.calls[0]) == 200  # ...all in one write
        assert all(c.idle for c in chains)
        assert [store.durable[f"c{i}"] for i in range(200)] == [[i] for i in range(200)]
        # left to the timer: one write per slot the 200 deadlines fall in (one or two, unless the
        # machine stalls the loop between two schedules)
        loop = asyncio.get_running_loop()
        first = loop.time()
        for i, c in enumerate(chains):
            store.put(f"c{i}", 1000 + i)
            c.schedule()
        slots = math.ceil((loop.time() + 0.03) / 0.01) - math.ceil((first + 0.03) / 0.01) + 1
        while not all(c.idle for c in chains):
            await asyncio.sleep(0.005)
        assert 2 <= len(store.calls) <= 1 + slots and sum(len(call) for call in store.calls[1:]) == 200
        assert wheel.batches == len(store.calls) and wheel.writes == 400
        assert all(c.last_durable_seq == 1000 + i for i, c in enumerate(chains))

    asyncio.run(main())


def test_a_chain_rescheduled_while_its_write_is_in_flight_is_written_again_after() -> None:
    async def main() -> None:
        store = FakeStore()
        store.gate = asyncio.Event()
        wheel = PersistWheel(store.write_many, debounce_s=60.0)
        chain, other = wheel.chain("a"), wheel.chain("b")
        store.put("a", 1)
        chain.schedule()
        first = asyncio.create_task(chain.flush(timeout_s=10))
        await store.started.wait()
        store.put("a", 2)
        chain.schedule()  # while 1 is in flight
        store.put("b", 7)
        other.schedule()
        second = asyncio.create_task(chain.flush(timeout_s=10))
        other_flush = asyncio.create_task(other.flush(timeout_s=10))
        for _ in range(5):
            await asyncio.sleep(0)
        assert store.calls == [["a"], ["b"]]  # no second write of "a" while its first is in flight
        assert chain.last_durable_seq == 0 and not chain.idle
        store.gate.set()
        assert await first == 1
        assert await second == 2 and await other_flush == 7
        assert store.durable == {"a": [1, 2], "b": [7]}
        assert [call for call in store.calls if "a" in call] == [["a"], ["a"]]

    asyncio.run(main())


def test_a_failing_store_is_retried_a_flush_times_out_then_everything_lands() -> None:
    async def main() -> None:
        store = FakeStore()
        wheel = PersistWheel(store.write_many, debounce_s=60.0, backoff_s=0.001, backoff_max_s=0.002, slot_s=0.001)
        chains = {o: wheel.chain(o) for o in ("up", "down1", "down2")}
        for i, (o, c) in enumerate(chains.items()):
            store.put(o, i + 1)
            c.schedule()
            c.now()  # all three start in the same turn: one batch
        store.failing = {"down1", "down2"}
        assert await chains["up"].flush(timeout_s=10) == 1  # a failing neighbour holds up no one
        with pytest.raises(StoreError, match="stay pending") as err:
            await chains["down1"].flush(timeout_s=0.05)
        assert isinstance(err.value.__cause__, RuntimeError)
        failures = chains["down1"].failures
        while chains["down1"].failures < failures + 2:  # the retries go on in the background
            await asyncio.sleep(0.001)
        store.failing = set()
        assert await chains["down1"].flush(timeout_s=10) == 2
        assert await chains["down2"].flush(timeout_s=10) == 3
        assert store.durable == {"up": [1], "down1": [2], "down2": [3]}
        assert chains["down1"].last_error is None and chains["down2"].failures >= 2
        assert store.calls[0] == ["up", "down1", "down2"]  # one batch; the retries only the failed

    asyncio.run(main())


def test_an_unavailable_store_is_polled_at_most_a_quarter_second_apart() -> None:
    async def main() -> None:
        store = FakeStore()
        store.error = UnavailableError("the store is restarting")
        wheel = PersistWheel(store.write_many, debounce_s=60.0, backoff_s=0.1, backoff_max_s=60.0)
        chain = wheel.chain("a")
        store.put("a", 1)
        chain.schedule()
        store.failing = {"a"}
        chain.now()
        while chain.failures < 2:
            await asyncio.sleep(0.01)
        assert chain._delay == 0.25  # 0.1, then capped at UNAVAILABLE_BACKOFF_MAX_S, not doubled to 0.4
        store.failing = set()
        assert await chain.flush(timeout_s=10) == 1

    asyncio.run(main())


def test_stop_cancels_a_batch_once_every_chain_in_it_stopped_and_schedules_nothing_more() -> None:
    async def main() -> None:
        store = FakeStore()
        store.gate = asyncio.Event()
        wheel = PersistWheel(store.write_many, debounce_s=0.001, slot_s=0.001)
        a, b = wheel.chain("a"), wheel.chain("b")
        for name, c in (("a", a), ("b", b)):
            store.put(name, 1)
            c.schedule()
            c.now()
        await store.started.wait()
        a.stop()
        await asyncio.sleep(0)
        assert store.cancelled == 0  # b still wants its write
        b.stop()
        while store.cancelled == 0:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert a.idle is False and a._batch is None and b._batch is None
        store.gate.set()
        store.put("a", 2)
        a.schedule()  # stopped: nothing is armed
        a.now()
        for _ in range(10):
            await asyncio.sleep(0.002)
        assert len(store.calls) == 1 and store.durable == {} and store.pending == {"a": [1, 2], "b": [1]}
        # a stopped chain is still written when flushed (a host's last flush), and stopping it
        # again while that write is in flight cancels nothing
        store.gate = asyncio.Event()
        store.started.clear()
        flushed = asyncio.create_task(b.flush(timeout_s=10))
        await store.started.wait()
        b.stop()
        store.gate.set()
        assert await flushed == 1 and store.durable == {"b": [1]} and store.cancelled == 1

    asyncio.run(main())


def test_many_conversations_flushed_together_make_one_commit_per_partition(tmp_path) -> None:
    cfg = memray.MemoryConfig(
        path=str(tmp_path / "m"), mode="inprocess", hosts=1, shards=1, stores=2, debounce_ms=600_000
    )
    with memray.open(config=cfg) as mem:
        convs = [mem.conversation(user_id=f"u{i}", conversation_id="c") for i in range(40)]
        host = mem.internals.deployment.hosts[0]
        before = mem.internals.run(host.stats())
        mem.add_many([(c, [{"role": "user", "content": f"hello {i}"}]) for i, c in enumerate(convs)])
        assert mem.internals.run(host.stats())["rows"] == before["rows"]  # the debounce holds them
        mem.flush()
        after = mem.internals.run(host.stats())
        assert after["rows"] - before["rows"] == 40 and after["commits"] - before["commits"] == 2
        assert all([m.text for m in c.messages()] == [f"hello {i}"] for i, c in enumerate(convs))
        assert all(c.durable_seq() == 1 for c in convs)


class WheelMachine(RuleBasedStateMachine):
    """Three chains on one wheel against a list each: whatever is scheduled ends durable, in
    order, exactly once, never two writes of one chain at a time, whatever fails when."""

    NAMES = ("a", "b", "c")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = FakeStore()
        self.store.delay_s = 0.001
        wheel = PersistWheel(
            self.store.write_many, debounce_s=0.002, backoff_s=0.001, backoff_max_s=0.004, slot_s=0.001
        )
        self.chains = {o: wheel.chain(o) for o in self.NAMES}
        self.model: dict[str, list[int]] = {o: [] for o in self.NAMES}
        self.n = 0

    @rule(owner=st.sampled_from(NAMES), k=st.integers(1, 3))
    def add(self, owner: str, k: int) -> None:
        async def go() -> None:
            for _ in range(k):
                self.n += 1
                self.store.put(owner, self.n)
                self.model[owner].append(self.n)
                self.chains[owner].schedule()

        self.loop.run_until_complete(go())

    @rule(owner=st.sampled_from(NAMES), k=st.integers(0, 3))
    def fail_next(self, owner: str, k: int) -> None:
        self.store.fail_next[owner] = k

    @rule(owner=st.sampled_from(NAMES))
    def hurry(self, owner: str) -> None:
        async def go() -> None:
            self.chains[owner].now()

        self.loop.run_until_complete(go())

    @rule(ms=st.integers(0, 4))
    def wait(self, ms: int) -> None:
        self.loop.run_until_complete(asyncio.sleep(ms / 1000))

    @rule(owner=st.sampled_from(NAMES))
    def flush(self, owner: str) -> None:
        self.loop.run_until_complete(self.chains[owner].flush(timeout_s=10))
        assert self.store.durable.get(owner, []) == self.model[owner]
        assert self.chains[owner].last_durable_seq == (self.model[owner][-1] if self.model[owner] else 0)

    @rule()
    def settle(self) -> None:
        """Left alone (no flush), every scheduled write lands: the wheel loses no chain."""

        async def go() -> None:
            async with asyncio.timeout(10):
                while not all(c.idle for c in self.chains.values()):
                    await asyncio.sleep(0.001)

        self.loop.run_until_complete(go())
        assert all(self.store.durable.get(o, []) == self.model[o] for o in self.NAMES)

    @invariant()
    def durable_is_a_prefix_in_order_without_duplicates(self) -> None:
        for owner in self.NAMES:
            durable = self.store.durable.get(owner, [])
            assert durable == self.model[owner][: len(durable)]
        assert self.store.max_in_flight <= 1

    def teardown(self) -> None:
        for owner in self.NAMES:
            self.loop.run_until_complete(self.chains[owner].flush(timeout_s=10))
            assert self.store.durable.get(owner, []) == self.model[owner]
        self.loop.close()


TestWheelMachine = WheelMachine.TestCase
TestWheelMachine.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
