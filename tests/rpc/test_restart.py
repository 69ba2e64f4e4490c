"""`Restart`: once a call has found its actor dead, the calls made while Ray restarts it wait
and go out once Ray has it alive again, fail at once when Ray says it is dead for good, and
fail once it has been on no node for the bound. Where the actor is comes from a scripted
control plane (``tests/runtime/test_placement.py`` kills a real actor)."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from memray.errors import UnavailableError
from memray.rpc.ref import Placement, Restart
from tests.rpc.test_watch import Where, run

RESTARTING = Placement("RESTARTING", False)  # its old process is gone, no new one yet
STARTING = Placement("RESTARTING", True)  # a new process runs its __init__
ALIVE = Placement("ALIVE", True)
DEAD = Placement("DEAD", False)
POLL = 0.001  # as often as the loop allows: the tests wait on what was asked


async def answers() -> None:
    """The actor's process answers a probe."""


async def silent() -> None:
    """The actor's process answers nothing (stopped, hung)."""
    await asyncio.Event().wait()


class Gone:
    """A probe of the process that died, which the control plane may still have ALIVE: it fails
    until ``back`` is set, counting the probes."""

    def __init__(self) -> None:
        self.back, self.sent = False, 0

    async def __call__(self) -> None:
        self.sent += 1
        if not self.back:
            raise ConnectionError("the process is gone")


class Control:
    """A control plane whose answer the test sets (``where``), counting the questions."""

    def __init__(self, where: Placement) -> None:
        self.where, self.asked = where, 0

    async def __call__(self) -> Placement:
        self.asked += 1
        return self.where


async def asked(control: Control | Where, times: int) -> None:
    while control.asked < times:
        await asyncio.sleep(0)


@run
async def test_calls_pass_without_a_question_until_one_finds_the_actor_dead() -> None:
    control = Control(RESTARTING)
    restart = Restart(control, answers, "history store", bound_s=1.0, poll_s=POLL)
    await restart.passed()
    assert control.asked == 0 and not restart.holding


@run
async def test_calls_made_while_the_actor_restarts_wait_and_go_out_once_it_is_alive() -> None:
    control = Control(RESTARTING)
    restart = Restart(control, answers, "history store", bound_s=60.0, poll_s=POLL)
    restart.began()
    restart.began()  # a second call that found it dead: still one poll
    calls = [asyncio.create_task(restart.passed()) for _ in range(3)]
    await asked(control, 5)
    control.where = STARTING  # placed, still starting: still held
    await asked(control, control.asked + 5)
    assert restart.holding and not any(c.done() for c in calls)
    control.where = ALIVE
    assert await asyncio.gather(*calls) == [None, None, None]
    questions = control.asked
    await restart.passed()  # back: calls pass without a question again
    assert control.asked == questions and not restart.holding


@run
async def test_an_actor_the_control_plane_still_has_alive_is_back_only_once_its_process_answers() -> None:
    """Right after a kill Ray's table may still say ALIVE of the process that died."""
    probe = Gone()
    restart = Restart(Control(ALIVE), probe, "history store", bound_s=60.0, poll_s=POLL)
    restart.began()
    call = asyncio.create_task(restart.passed())
    while probe.sent < 5:
        await asyncio.sleep(0)
    assert restart.holding and not call.done()
    probe.back = True
    assert await call is None


@run
async def test_a_caller_that_gives_up_leaves_the_others_waiting() -> None:
    control = Control(RESTARTING)
    restart = Restart(control, answers, "shard 0", bound_s=60.0, poll_s=POLL)
    restart.began()
    quitter, stayer = asyncio.create_task(restart.passed()), asyncio.create_task(restart.passed())
    await asked(control, 3)
    quitter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await quitter
    await asked(control, control.asked + 3)
    assert restart.holding and not stayer.done()
    control.where = ALIVE
    assert await stayer is None


@run
async def test_calls_fail_at_once_when_ray_says_the_actor_is_dead_for_good() -> None:
    control = Control(DEAD)
    restart = Restart(control, answers, "host 1", bound_s=60.0, poll_s=POLL)
    restart.began()
    with pytest.raises(UnavailableError) as raised:
        await restart.passed()
    message = str(raised.value)
    assert message.startswith("host 1 unavailable: Ray has it DEAD: it will not be restarted")
    assert control.asked == 1 and raised.value.waited_s < 60.0
    assert str(pickle.loads(pickle.dumps(raised.value))) == message  # it crosses Ray from a host


@run
async def test_calls_fail_once_the_actor_has_been_on_no_node_for_the_bound() -> None:
    where = Where(Placement("RESTARTING", False, {"memray_store": 1.0}))
    restart = Restart(where, answers, "history store", 0.05, offered=lambda: {"memray_store": 1.0}, poll_s=POLL)
    restart.began()
    with pytest.raises(UnavailableError) as raised:
        await restart.passed()
    assert "Ray has had it on no node for at least" in str(raised.value) and "memray_store: 1" in str(raised.value)
    assert raised.value.waited_s >= 0.05  # (a RetryingRef does not retry a call that waited its bound)


@run
async def test_calls_fail_at_once_when_no_live_node_offers_what_the_actor_asks_for() -> None:
    """Its node was lost and no other can take it: it comes back only once one joins."""
    control = Control(Placement("RESTARTING", False, {"memray_store": 1.0}))
    restart = Restart(control, answers, "history store", 60.0, offered=lambda: {"CPU": 2.0}, poll_s=POLL)
    restart.began()
    with pytest.raises(UnavailableError, match="Ray is restarting it .*no live node offers memray_store: 1"):
        await restart.passed()
    assert control.asked == 1


@pytest.mark.parametrize(
    "answers",
    [
        (STARTING,),  # placed and starting past the bound: the call's own watch lets it take its time
        (ALIVE,),  # alive and silent past the bound: the call's own watch cuts it
        (RuntimeError("control plane down"),),  # cannot tell: never a reason to hold a call
        (None,),  # no such actor in the table
    ],
    ids=["starting", "silent", "check-fails", "unknown"],
)
@run
async def test_calls_go_out_when_the_actor_is_starting_past_the_bound_or_its_state_is_unknown(
    answers: tuple[Placement | None | Exception, ...],
) -> None:
    restart = Restart(Where(*answers), silent, "shard 1", bound_s=0.0, poll_s=POLL)
    restart.began()
    assert await restart.passed() is None
