import asyncio

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memray.conversation.persist import PersistChain
from memray.errors import StoreError


class FakeWriter:
    """A store that commits the drained items, or fails the next ``fail`` writes; ``started``
    holds the loop time each write started at."""

    def __init__(self) -> None:
        self.pending: list[int] = []
        self.durable: list[int] = []
        self.fail = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.writes = 0
        self.started: list[float] = []

    async def write(self) -> int:
        self.started.append(asyncio.get_running_loop().time())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        batch, self.pending = self.pending, []
        try:
            await asyncio.sleep(0)
            self.writes += 1
            if self.fail:
                self.fail -= 1
                self.pending[:0] = batch  # the messages stay pending
                raise RuntimeError("store down")
            self.durable.extend(batch)
            return self.durable[-1] if self.durable else 0
        finally:
            self.in_flight -= 1


def run(coro):
    return asyncio.run(coro)


def test_debounce_coalesces_writes_and_resets_on_each_schedule():
    async def main():
        loop = asyncio.get_running_loop()
        w = FakeWriter()
        chain = PersistChain.solo(w.write, debounce_s=0.05, max_wait_s=10)
        scheduled = []
        for i in range(1, 6):
            w.pending.append(i)
            chain.schedule()
            scheduled.append(loop.time())
            await asyncio.sleep(0.02)  # each schedule pushes the deadline out
        while not chain.idle:  # wait on state: the loop may be slow on a busy machine
            await asyncio.sleep(0.01)
        assert w.durable == [1, 2, 3, 4, 5] and chain.last_durable_seq == 5
        # a write is due only once debounce_s has passed since the last schedule: the last
        # write starts that long after the last schedule, and there are no more writes than gaps
        # between schedules that outlasted the debounce, + 1 (one write when the loop kept time;
        # a write due in one of those gaps may also take a message scheduled as it started)
        assert w.started[-1] - scheduled[-1] >= 0.05 - 1e-3
        gaps = sum(1 for a, b in zip(scheduled, scheduled[1:]) if b - a >= 0.05 - 1e-3)
        assert 1 <= w.writes <= gaps + 1

    run(main())


def test_a_chain_scheduled_faster_than_its_debounce_is_still_written_within_max_wait():
    # an agent adding every 20 ms to a conversation debounced at 50 ms: without the bound
    # nothing would be written until the adds stop
    async def main():
        loop = asyncio.get_running_loop()
        w = FakeWriter()
        chain = PersistChain.solo(w.write, debounce_s=0.05, max_wait_s=0.1)
        for i in range(1, 21):
            w.pending.append(i)
            chain.schedule()
            await asyncio.sleep(0.02)
        last_schedule = loop.time()
        while not chain.idle:
            await asyncio.sleep(0.01)
        assert w.durable == list(range(1, 21))
        # ~0.4 s of schedules each closer than the debounce: written about every max_wait
        # (a slow loop only stretches the gaps, which makes more writes, not fewer)
        assert len(w.started) >= 2 and w.started[0] < last_schedule

    run(main())


def test_flush_writes_now_and_retries_failures():
    async def main():
        w = FakeWriter()
        chain = PersistChain.solo(w.write, debounce_s=10, backoff_s=0.001)
        w.pending.extend([1, 2])
        chain.schedule()
        w.fail = 3
        assert await chain.flush(timeout_s=5) == 2
        assert w.durable == [1, 2] and chain.failures == 3

    run(main())


def test_flush_times_out_but_keeps_retrying():
    async def main():
        w = FakeWriter()
        chain = PersistChain.solo(w.write, debounce_s=10, backoff_s=0.01, backoff_max_s=0.01)
        w.pending.append(1)
        chain.schedule()
        w.fail = 10_000
        with pytest.raises(StoreError, match="stay pending"):
            await chain.flush(timeout_s=0.05)
        w.fail = 0
        await chain.flush(timeout_s=5)
        assert w.durable == [1]

    run(main())


class ChainMachine(RuleBasedStateMachine):
    """The chain against a list: whatever is scheduled ends durable, in order, exactly once."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.w = FakeWriter()
        self.chain = self.loop.run_until_complete(self._make())
        self.model: list[int] = []
        self.n = 0

    async def _make(self) -> PersistChain:
        return PersistChain.solo(self.w.write, debounce_s=0.002, backoff_s=0.001, backoff_max_s=0.004)

    @rule(k=st.integers(1, 4))
    def add(self, k: int) -> None:
        async def go() -> None:
            for _ in range(k):
                self.n += 1
                self.w.pending.append(self.n)
                self.model.append(self.n)
                self.chain.schedule()

        self.loop.run_until_complete(go())

    @rule(k=st.integers(0, 3))
    def fail_next(self, k: int) -> None:
        self.w.fail = k

    @rule(ms=st.integers(0, 6))
    def wait(self, ms: int) -> None:
        self.loop.run_until_complete(asyncio.sleep(ms / 1000))

    @rule()
    def flush(self) -> None:
        self.loop.run_until_complete(self.chain.flush(timeout_s=10))
        assert self.w.durable == self.model
        assert self.chain.last_durable_seq == (self.model[-1] if self.model else 0)

    @invariant()
    def durable_is_a_prefix_in_order_without_duplicates(self) -> None:
        assert self.w.durable == self.model[: len(self.w.durable)]
        assert self.w.max_in_flight <= 1

    def teardown(self) -> None:
        self.loop.run_until_complete(self.chain.flush(timeout_s=10))
        assert self.w.durable == self.model
        self.loop.close()


TestChainMachine = ChainMachine.TestCase
TestChainMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
