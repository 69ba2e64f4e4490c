"""``RayRef`` asks Ray's control plane where its actor is (on the test session's local Ray, which
like memray's own runs without a dashboard): a call to an actor Ray cannot place fails within the
bound instead of waiting for ever, and a long call on a live actor is not cut. The multi-node
version, with memray's own actors: ``tests/runtime/unplaced.py``."""

from __future__ import annotations

import asyncio
import time

import pytest

from benchmarks._harness import AsyncSink, SinkClient
from memray.errors import UnavailableError
from memray.rpc.client import Client
from memray.rpc.ref import WATCH_GRACE_S, Placement
from memray.runtime.actors import RayRef


class Gate:
    """An actor whose ``hold`` runs until ``release``: a long call on a live actor."""

    def __init__(self) -> None:
        self.opened: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        self.opened = self.opened or asyncio.Event()
        return self.opened

    async def hold(self) -> str:
        await self._event().wait()
        return "released"

    async def release(self) -> None:
        self._event().set()


class GateClient(Client):
    """Typed calls to a :class:`Gate`."""

    async def hold(self) -> str:
        return await self._call("hold")  # type: ignore[no-any-return]

    async def release(self) -> None:
        await self._call("release")


def test_a_live_actor_is_placed_and_one_no_node_can_take_is_not(ray_session: None) -> None:
    import ray

    sink = ray.remote(AsyncSink)
    live = RayRef(sink.options(num_cpus=0).remote(), "sink")
    absent = sink.options(num_cpus=0, resources={"memray_absent": 1})  # a resource no node offers
    stuck = RayRef(absent.remote(), "stuck sink", placement_timeout_s=0.5)
    try:
        assert asyncio.run(SinkClient(live).ping()) is True
        assert asyncio.run(live.placement()) == Placement("ALIVE", True, {})
        assert asyncio.run(stuck.placement()) == Placement("PENDING_CREATION", False, {"memray_absent": 1.0})
        t0 = time.monotonic()
        with pytest.raises(UnavailableError, match="stuck sink unavailable: .*PENDING_CREATION.*memray_absent: 1"):
            asyncio.run(asyncio.wait_for(SinkClient(stuck).ping(), 60))  # it used to wait for ever
        assert time.monotonic() - t0 >= WATCH_GRACE_S + 0.5
    finally:
        for ref in (live, stuck):
            ray.kill(ref.handle)


def test_a_long_call_on_a_live_actor_is_not_cut_by_the_bound(ray_session: None) -> None:
    import ray

    ref = RayRef(ray.remote(Gate).options(num_cpus=0).remote(), "gate", placement_timeout_s=0.01)
    # live first: on a loaded machine Ray may take seconds to give the actor a worker process, and
    # an actor not placed for longer than the bound is cut (that is the other test); this one is
    # about a call on an actor that is running
    ray.get(ref.handle.__ray_call__.remote(lambda _self: None), timeout=120)
    seen: list[Placement | None] = []
    real = ref.placement

    async def counted() -> Placement | None:
        seen.append(await real())
        return seen[-1]

    ref.placement = counted  # type: ignore[method-assign]

    async def scenario() -> str:
        gate = GateClient(ref)
        held = asyncio.create_task(gate.hold())
        # wait on state: checked twice, far past the bound, the last time once the actor runs (on a
        # loaded machine its process may still be starting at the first checks)
        while not (len(seen) >= 2 and seen[-1] is not None and seen[-1].state == "ALIVE") and not held.done():
            await asyncio.sleep(0.05)
        assert not held.done(), f"the long call ended early: {held}"
        await gate.release()
        return await held

    try:
        assert asyncio.run(asyncio.wait_for(scenario(), 60)) == "released"
        # placed all along: alive, or (on a loaded machine) still starting when first checked
        assert all(where is not None and where.placed for where in seen), seen
        assert seen[-1] == Placement("ALIVE", True, {})
    finally:
        ray.kill(ref.handle)


def test_a_placement_read_given_up_leaves_ray_nothing_to_complain_about(ray_session: None) -> None:
    """A call's watch is cancelled when its answer comes, maybe while it reads where its actor is.
    Ray completes that read's future from its own thread and asserts the future is still pending
    (``_raylet.assign_and_decrement_fut``): cancelling it made Ray print ``Exception ignored in:
    'ray._raylet.assign_and_decrement_fut'`` / ``AssertionError`` (an unraisable exception)."""
    import sys

    import ray

    live = RayRef(ray.remote(AsyncSink).options(num_cpus=0).remote(), "sink")
    unraisable: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(f"{u.exc_type.__name__} in {u.object!r}")

    async def give_up_reads() -> None:
        for _ in range(20):
            read = asyncio.get_running_loop().create_task(live.placement())
            await asyncio.sleep(0)  # the read is sent
            read.cancel()
        for _ in range(20):  # the replies to the reads given up came back before these
            await live.placement()

    try:
        asyncio.run(give_up_reads())
    finally:
        sys.unraisablehook = hook
        ray.kill(live.handle)
    assert not unraisable, unraisable


class SlowRestart:
    """An actor whose restart takes a second (a store opening its file), so a call made just
    after its process died meets it restarting."""

    def __init__(self) -> None:
        import ray

        if ray.get_runtime_context().was_current_actor_reconstructed:
            time.sleep(1.0)

    def pid(self) -> int:
        import os

        return os.getpid()


def test_a_call_made_while_a_killed_actor_restarts_waits_and_answers(ray_session: None) -> None:
    """The first call to find the process gone fails (Ray says so at once: memray's local Ray
    does not wait to learn why); the calls made after it, while Ray restarts the actor, wait
    and answer from the new process, instead of failing (Ray does not queue them) and being
    retried into the restart."""
    import os
    import signal

    import ray

    actor = ray.remote(SlowRestart).options(num_cpus=0, max_restarts=-1, max_task_retries=0)
    ref = RayRef(actor.remote(), "slow restarter")

    async def scenario() -> tuple[int, list[int]]:
        old = await ref.call("pid")
        os.kill(old, signal.SIGKILL)
        with pytest.raises(UnavailableError, match="slow restarter unavailable"):
            while True:  # the kill lands at once, but the dead process may take a call or two
                await ref.call("pid")
        return old, list(await asyncio.gather(*(ref.call("pid") for _ in range(3))))

    try:
        old, new = asyncio.run(asyncio.wait_for(scenario(), 60))
        assert len(set(new)) == 1 and old not in new, (old, new)
        assert asyncio.run(ref.placement()) == Placement("ALIVE", True, {})
    finally:
        ray.kill(ref.handle)
