"""`watched`: a call whose actor Ray has on no node, or whose placed process has stopped
answering, fails within the bound; a long call on a live actor is never cut. The actor's
placement comes from a scripted function (Ray's control plane in ``RayRef``;
``tests/runtime/test_unplaced.py`` runs the real thing on a cluster), its liveness from a
scripted probe (``tests/faults/test_bounds.py`` stops real processes)."""

from __future__ import annotations

import asyncio
import functools
import pickle
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from memray.errors import UnavailableError
from memray.rpc.ref import Liveness, Placement, watched

FAST = {"grace_s": 0.001, "every_s": 0.001}  # checks as often as the loop allows: the tests wait on them
UNPLACED = Placement("PENDING_CREATION", False, {"memray_store": 1.0})
ALIVE = Placement("ALIVE", True)


def run(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run the async test on its own loop (the suite has no async plugin), within a minute."""

    @functools.wraps(test)
    def sync(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 60))  # a watch that never fires fails, not hangs

    return sync


class Where:
    """Says ``answers`` in turn (the last one for ever), counting the questions."""

    def __init__(self, *answers: Placement | None | Exception) -> None:
        self.answers, self.asked = list(answers), 0

    async def __call__(self) -> Placement | None:
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        if isinstance(answer, Exception):
            raise answer
        return answer


class Probe:
    """A liveness probe that answers (``answers``) or never does, counting the probes sent."""

    def __init__(self, answers: bool) -> None:
        self.answers, self.sent = answers, 0

    async def __call__(self) -> None:
        self.sent += 1
        if not self.answers:
            await asyncio.Event().wait()  # a stopped process: the probe waits for ever


async def finish_after(reply: asyncio.Future[str], where: Where, checks: int) -> None:
    """Answer ``reply`` once the watch has asked ``checks`` times (waits on state, not on time)."""
    while where.asked < checks:
        await asyncio.sleep(0)
    reply.set_result("done")


@run
async def test_a_call_that_answers_within_the_grace_never_asks_where_its_actor_is() -> None:
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    reply.set_result("done")
    where = Where(UNPLACED)
    assert await watched(reply, where, "shard 0", bound_s=0.0) == "done"
    assert where.asked == 0


@run
async def test_a_call_to_an_actor_on_no_node_fails_once_the_bound_has_passed() -> None:
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    where = Where(UNPLACED)
    with pytest.raises(UnavailableError) as raised:
        await watched(reply, where, "history store 1", bound_s=0.05, **FAST)
    message = str(raised.value)
    assert message.startswith("history store 1 unavailable: Ray has had it on no node for at least 0.")
    assert "state PENDING_CREATION" in message and "memray_store: 1" in message
    assert "add a node that offers" in message and "open it with a configuration" in message
    assert raised.value.component == "history store 1"
    assert where.asked >= 2 and reply.cancelled()  # the bound ran from the first sighting; the call is dropped
    assert str(pickle.loads(pickle.dumps(raised.value))) == message  # it crosses Ray from a host


@pytest.mark.parametrize(
    "answers",
    [
        (ALIVE,),  # a live actor busy with a long call
        (Placement("RESTARTING", True),),  # placed and running its __init__ (a snapshot load)
        (RuntimeError("control plane down"),),  # cannot tell: never a reason to cut
        (None,),  # no such actor in the table (yet)
    ],
    ids=["alive", "starting", "check-fails", "unknown"],
)
@run
async def test_a_long_call_to_a_placed_actor_is_not_cut(answers: tuple[Placement | None | Exception, ...]) -> None:
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    where = Where(*answers)
    finisher = asyncio.create_task(finish_after(reply, where, checks=50))
    assert await watched(reply, where, "host 0", bound_s=0.0, **FAST) == "done"  # a bound of 0 would cut at once
    await finisher


@run
async def test_a_long_call_to_a_placed_actor_that_answers_its_probes_is_not_cut() -> None:
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    where, probe = Where(ALIVE), Probe(answers=True)
    finisher = asyncio.create_task(finish_after(reply, where, checks=50))
    assert await watched(reply, where, "shard 0", bound_s=0.01, liveness=Liveness(probe), **FAST) == "done"
    await finisher
    assert probe.sent >= 2  # asked while it ran: busy, but alive


class StallingWhere(Where):
    """:class:`Where` whose ``stall_at``-th answer blocks the loop for ``stall_s`` first (a
    loaded machine, a slow control plane)."""

    def __init__(self, stall_at: int, stall_s: float, *answers: Placement | None | Exception) -> None:
        super().__init__(*answers)
        self.stall_at, self.stall_s = stall_at, stall_s

    async def __call__(self) -> Placement | None:
        if self.asked == self.stall_at:
            time.sleep(self.stall_s)  # blocks the loop: the stall itself, not a wait for something
        return await super().__call__()


@run
async def test_a_stall_of_the_callers_own_loop_is_not_taken_for_the_actors_silence() -> None:
    """The watching loop is blocked for 5x the bound while the actor answers every probe at
    once: silence counts from a probe left unanswered, never from the last answer."""
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    where, probe = StallingWhere(5, 0.05, ALIVE), Probe(answers=True)
    finisher = asyncio.create_task(finish_after(reply, where, checks=10))
    assert await watched(reply, where, "shard 0", bound_s=0.01, liveness=Liveness(probe), **FAST) == "done"
    await finisher
    assert probe.sent >= 5


@run
async def test_a_call_to_a_placed_actor_that_stopped_answering_fails_once_the_bound_has_passed() -> None:
    """Ray has the actor ALIVE on its node, but its process answers nothing (SIGSTOP, hung, a
    node cut off that Ray has not declared dead yet): the call is cut, naming it."""
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    liveness = Liveness(Probe(answers=False))
    with pytest.raises(UnavailableError) as raised:
        await watched(reply, Where(ALIVE), "shard 1", bound_s=0.05, liveness=liveness, **FAST)
    message = str(raised.value)
    assert message.startswith("shard 1 unavailable: Ray has it alive, but its process has answered nothing for ")
    assert raised.value.waited_s >= 0.05
    assert reply.cancelled()
    assert str(pickle.loads(pickle.dumps(raised.value))) == message


@run
async def test_an_actor_placed_again_starts_the_bound_afresh() -> None:
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    where = Where(UNPLACED, UNPLACED, ALIVE, ALIVE, UNPLACED)  # away, back, away again for good
    with pytest.raises(UnavailableError):
        await watched(reply, where, "shard 1", bound_s=0.05, **FAST)
    assert where.asked > 5


@run
async def test_a_caller_that_gives_up_cancels_the_call() -> None:
    reply: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    where = Where(ALIVE)
    call = asyncio.create_task(watched(reply, where, "host 0", bound_s=1.0, **FAST))
    while where.asked < 3:
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert reply.cancelled()


def test_an_actor_is_stranded_only_while_no_live_node_offers_what_it_asks_for() -> None:
    restarting = Placement("RESTARTING", False, {"memray_store": 1.0})
    said = restarting.stranded({"CPU": 2.0})
    assert said.startswith(" (Ray has it on no node, state RESTARTING, and no live node offers memray_store: 1:")
    assert "add a node that offers" in said
    assert restarting.stranded({"CPU": 2.0, "memray_store": 1.0}) == ""  # it can come back: a restart, not a loss
    assert Placement("RESTARTING", False, {}).stranded({}) == ""  # asks for nothing special: every node can take it
    assert Placement("ALIVE", True, {"memray_store": 1.0}).stranded({}) == ""
