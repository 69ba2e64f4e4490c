"""Backpressure: a host holds at most ``max_unpersisted`` acknowledged messages that are not
durable yet. Past it a caller waits for room or, with ``block=False``, gets ``Backpressure`` and
nothing is written. Every wait here is on state (a future, a counter), never on time."""

from __future__ import annotations

import asyncio
import pickle

import pytest

import memray
from memray.conversation.admission import Admission
from memray.ids import ConversationKey


class Backlog:
    """The host's count of acknowledged, not yet durable messages, and its hurry calls."""

    def __init__(self) -> None:
        self.pending = 0
        self.hurried = 0

    def admission(self, bound: int, timeout_s: float = 30.0) -> Admission:
        return Admission(0, bound, lambda: self.pending, self.hurry, timeout_s)

    def hurry(self) -> None:
        self.hurried += 1


async def acknowledge(adm: Admission, backlog: Backlog, n: int, block: bool = True) -> None:
    async with adm.admit(n, block):
        backlog.pending += n


def test_calls_within_the_bound_pass_and_one_past_it_is_refused_without_blocking() -> None:
    async def run() -> None:
        backlog = Backlog()
        adm = backlog.admission(10)
        await acknowledge(adm, backlog, 6)
        await acknowledge(adm, backlog, 4)
        with pytest.raises(memray.Backpressure) as err:
            await acknowledge(adm, backlog, 1, block=False)
        assert backlog.pending == 10 and err.value.pending == 10 and err.value.bound == 10
        assert "block=True" in str(err.value) and adm.refused == 1
        back = pickle.loads(pickle.dumps(err.value))
        assert (back.host, back.pending, back.bound) == (0, 10, 10)

    asyncio.run(run())


def test_waiters_are_admitted_in_arrival_order_as_commits_free_room() -> None:
    async def run() -> None:
        backlog = Backlog()
        adm = backlog.admission(10)
        await acknowledge(adm, backlog, 10)
        order: list[str] = []

        async def call(name: str, n: int) -> None:
            await acknowledge(adm, backlog, n)
            order.append(name)

        big = asyncio.create_task(call("big", 8))
        small = asyncio.create_task(call("small", 1))
        while adm.waiting < 2:
            await asyncio.sleep(0)
        assert backlog.hurried == 1  # the queue formed: pending writes skip their debounce
        backlog.pending = 5  # a commit made 5 durable: not room for the 8 at the head
        adm.released()
        await asyncio.sleep(0)
        assert order == [] and adm.waiting == 2  # the small one does not overtake
        backlog.pending = 2
        adm.released()
        await big
        assert order == ["big"] and backlog.pending == 10 and adm.waiting == 1  # 2 + 8: full again
        backlog.pending = 0
        adm.released()
        await small
        assert order == ["big", "small"] and backlog.pending == 1
        # a call larger than the whole bound is admitted once the backlog is empty
        backlog.pending = 0
        await acknowledge(adm, backlog, 25)
        assert backlog.pending == 25

    asyncio.run(run())


def test_a_wait_that_finds_no_room_in_time_raises_and_lets_the_next_one_in() -> None:
    async def run() -> None:
        backlog = Backlog()
        adm = backlog.admission(4, timeout_s=0.05)
        await acknowledge(adm, backlog, 4)
        with pytest.raises(memray.Backpressure) as err:
            await acknowledge(adm, backlog, 3)
        assert err.value.waited_s == 0.05 and adm.waiting == 0
        backlog.pending = 0
        adm.released()
        await acknowledge(adm, backlog, 3, block=False)
        assert backlog.pending == 3

    asyncio.run(run())


def keys_on_each_host(hosts: int) -> list[ConversationKey]:
    """One conversation key per host (by the stable route)."""
    found: dict[int, ConversationKey] = {}
    i = 0
    while len(found) < hosts:
        key = ConversationKey.of("default", f"u{i}", "c")
        found.setdefault(key.route(hosts), key)
        i += 1
    return [found[h] for h in range(hosts)]


def test_a_full_host_refuses_or_waits_and_a_wait_writes_at_once(tmp_path) -> None:
    # the debounce is far longer than the test: only backpressure's hurry makes anything durable
    cfg = memray.MemoryConfig(
        path=str(tmp_path / "m"), mode="inprocess", hosts=2, max_unpersisted=3, debounce_ms=600_000
    )
    with memray.open(config=cfg) as mem:
        full, other = (mem.conversation(k.user_id, k.conversation_id) for k in keys_on_each_host(2))
        full.add([{"role": "user", "content": f"m{i}"} for i in range(3)])
        with pytest.raises(memray.Backpressure) as err:
            full.add({"role": "user", "content": "refused"}, block=False)
        assert err.value.pending == 3 and [m.text for m in full.messages()] == ["m0", "m1", "m2"]
        # add_many across both hosts: the full host's items are refused, the other's written
        with pytest.raises(memray.Backpressure) as err:
            mem.add_many(
                [(other, [{"role": "user", "content": "kept"}]), (full, [{"role": "user", "content": "no"}])],
                block=False,
            )
        assert err.value.refused == [1]
        assert [m.text for m in other.messages()] == ["kept"]
        assert [m.text for m in full.messages()] == ["m0", "m1", "m2"]
        # a blocking add makes the backlog durable now (not after the debounce), then goes in
        assert full.add({"role": "user", "content": "m3"}) == [4]
        assert full.durable_seq() >= 3
        assert [m.text for m in full.messages()] == ["m0", "m1", "m2", "m3"]


def test_a_call_waiting_when_the_host_closes_is_told_so_and_writes_nothing() -> None:
    async def run() -> None:
        backlog = Backlog()
        adm = backlog.admission(2)
        await acknowledge(adm, backlog, 2)
        waiting = asyncio.create_task(acknowledge(adm, backlog, 1))
        while not adm.waiting:
            await asyncio.sleep(0)
        adm.closed = True  # what ConversationHost.close does, before its final flush
        backlog.pending = 0  # the flush made the backlog durable
        adm.released()
        with pytest.raises(memray.ClosedError):
            await waiting
        assert backlog.pending == 0
        with pytest.raises(memray.ClosedError):
            await acknowledge(adm, backlog, 1)

    asyncio.run(run())
