"""`ActorRef`: how one core reaches another, the same way in both modes.

A core that depends on another (a host on the store, the router on shards) holds the other's
typed client (:mod:`memray.rpc.client`), which sends each call through an ``ActorRef`` by the
method's name. In-process the call runs on the object itself (serialised like an actor); in Ray
mode it is an actor method call. Cores never import ``ray``.

A Ray call to an actor that Ray cannot place on any node (it lost its node and no other offers
the resources it asks for, or the cluster never had them) would wait for ever: Ray queues it until
the actor exists. So would a call to an actor Ray has placed whose process answers nothing: stopped
(``SIGSTOP``), hung, or on a node cut off that Ray has not declared dead yet. :func:`watched`
bounds both waits without cutting long calls: once a call has run for :data:`WATCH_GRACE_S` it
asks, every :data:`WATCH_EVERY_S`, where the actor is and — when it is placed — whether its process
answers a probe (:class:`Liveness`: a call the actor serves on a thread of its own, beside any
busy call), and fails the call with :class:`~memray.errors.UnavailableError` once the actor has had
no process, or its process has answered nothing, for ``MemoryConfig.placement_timeout_s``. A live
actor busy with a long call (a flush, a big commit, a re-embedding step) has a process that
answers its probes, so its calls are never cut.

An actor that died and that Ray restarts is a third wait: :class:`Restart` holds the calls made
meanwhile until Ray has it alive again, instead of sending them into the restart (see there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from memray.errors import UnavailableError

__all__ = [
    "ActorRef",
    "RetryingRef",
    "Placement",
    "Liveness",
    "Restart",
    "watched",
    "WATCH_GRACE_S",
    "WATCH_EVERY_S",
    "RESTART_POLL_S",
]

T = TypeVar("T")
log = logging.getLogger(__name__)

#: How long a call runs before its actor's placement is first checked (a normal call never is).
WATCH_GRACE_S = 2.0
#: How often a call that runs longer checks it again (one control-plane read: 0.6–0.8 ms p50 here).
WATCH_EVERY_S = 1.0
#: How often calls held while their actor restarts ask whether it is alive again (:class:`Restart`).
RESTART_POLL_S = 0.02


class ActorRef(Protocol):
    #: What to call this actor in errors ("shard 3", "history store").
    label: str

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Run ``method`` on the actor and return its result; raise its error.

        Raises :class:`memray.errors.UnavailableError` naming ``label`` if the actor is down.
        """
        ...


class RetryingRef:
    """An :class:`ActorRef` that retries calls while the actor is restarting.

    Only for actors whose calls are idempotent: a host's ``add`` carries message ids assigned by
    the caller, so an ``add`` retried after its actor died (acknowledgement lost or not) merges
    into the same messages instead of duplicating them. ``on_retry`` adds keyword arguments to a
    method's retries (``{"add": {"retried": True}}``: the host then looks up the seqs the first
    attempt may have given, so the retry returns those). ``timeout_s`` bounds the retrying; each
    attempt is bounded by ``ref`` (a Ray call whose actor Ray cannot place: :func:`watched`).
    """

    def __init__(
        self,
        ref: ActorRef,
        timeout_s: float = 30.0,
        backoff_s: float = 0.05,
        on_retry: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.ref = ref
        self.label = ref.label
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._on_retry = on_retry or {}

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + self._timeout_s, self._backoff_s
        while True:
            try:
                return await self.ref.call(method, *args, **kwargs)
            except UnavailableError as exc:
                if exc.waited_s or loop.time() + delay > deadline:  # (a watch that gave up waited its bound)
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                kwargs = {**kwargs, **self._on_retry.get(method, {})}  # e.g. add(..., retried=True)

    def __getattr__(self, name: str) -> Any:  # e.g. ``.handle`` of a Ray ref
        return getattr(self.ref, name)


@dataclass(frozen=True)
class Placement:
    """Where Ray has an actor, as its control plane says."""

    state: str  # Ray's actor state: ALIVE, PENDING_CREATION, RESTARTING, DEAD...
    placed: bool  # a worker process holds it: alive, or running its constructor
    needs: Mapping[str, float] = field(default_factory=dict)  # the resources it asks of a node

    def why(self, waited_s: float) -> str:
        """What an :class:`~memray.errors.UnavailableError` says about an actor left unplaced."""
        return (
            f"Ray has had it on no node for at least {waited_s:.1f} s (state {self.state}; it asks a node "
            f"for {_listed(self.needs) or 'no custom resource'}), so the call may never run, or run once it "
            f"is placed: {_FIX}"
        )

    def stranded(self, offered: Mapping[str, float]) -> str:
        """What to add to an actor's error when no live node offers what it asks for (``offered``:
        the live nodes' resources, summed); empty when it is placed or can be."""
        missing = {k: v for k, v in self.needs.items() if offered.get(k, 0.0) < v}
        if self.placed or not missing:
            return ""
        return f" (Ray has it on no node, state {self.state}, and no live node offers {_listed(missing)}: {_FIX})"


_FIX = (
    "add a node that offers what it asks for (it starts there), or close memray and open it with a "
    "configuration this cluster can place"
)


def _listed(resources: Mapping[str, float]) -> str:
    return ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items()))


class Liveness:
    """When an actor's process last answered a probe (``probe()``: a call it serves on a thread
    of its own, so a busy actor answers too). Shared by every watched call to the actor: one
    probe in flight at a time, however many calls wait on it."""

    def __init__(self, probe: Callable[[], Awaitable[object]]) -> None:
        self._probe = probe
        self._asking: asyncio.Task[None] | None = None
        self._unanswered_since: float | None = None  # loop time of the first probe not answered since

    def ask(self) -> None:
        """Send a probe, unless one is on its way."""
        loop = asyncio.get_running_loop()
        if self._asking is None or self._asking.done() or self._asking.get_loop() is not loop:
            if self._unanswered_since is None:
                self._unanswered_since = loop.time()
            self._asking = loop.create_task(self._ask())

    def unanswered_s(self, now: float, since: float) -> float:
        """How long the process has left probes unanswered (counted from ``since`` at the
        earliest; 0 once it answered the last one). Measured from a probe's sending, not from
        the last answer, so a caller whose own loop stalled (a loaded machine) does not take its
        own delay for the actor's silence."""
        if self._unanswered_since is None:
            return 0.0
        return now - max(self._unanswered_since, since)

    async def _ask(self) -> None:
        try:
            await self._probe()
        except Exception as exc:  # dead, restarting: no answer (the call itself will say so)
            log.debug("probe unanswered: %r", exc)
            return
        self._unanswered_since = None


class Restart:
    """Holds the calls to an actor that died until it is alive again.

    Ray does not queue a call made while it restarts an actor (memray's actors have
    ``max_task_retries=0``): it fails the call — with its default settings only on a 1 s timer,
    so a call sent into the restart failed up to 2 s later, often long after the new process was
    up. A caller that retries (a host's persist chain polls a restarting store every 0.25 s at
    most) reached the new process late by that much (``benchmarks/restart_micro.py``). So once
    a call has found the actor dead (:meth:`began`), the calls made after it wait here, and go
    out as soon as the actor is back: Ray's control plane has it ``ALIVE`` (one read every
    ``poll_s``, 0.6–0.8 ms each) and its process answers ``probe()`` (the table may still say
    ``ALIVE`` of the process that just died).

    One poll at a time, however many calls wait; a caller that gives up stops waiting and
    leaves the others waiting (the future they share is this object's, never one Ray
    completes). The calls go out, too, when where the actor is cannot be told (never a reason
    to hold a call) and once they have waited ``bound_s`` while the actor is placed on a node
    (starting, or alive and silent: each call's :func:`watched` then bounds or allows its wait
    as for any call). They fail with :class:`~memray.errors.UnavailableError` when Ray says the
    actor is ``DEAD`` (it will not come back), when it has it on no node and no live node offers
    what it asks for (``offered()``: what the live nodes offer; it comes back only once one
    does, see :meth:`Placement.stranded`), or has had it on no node for ``bound_s``."""

    def __init__(
        self,
        placement: Callable[[], Awaitable[Placement | None]],
        probe: Callable[[], Awaitable[object]],
        label: str,
        bound_s: float,
        offered: Callable[[], Mapping[str, float]] = dict,
        poll_s: float = RESTART_POLL_S,
    ) -> None:
        self._placement = placement
        self._probe = probe
        self._offered = offered
        self._label = label
        self._bound_s = bound_s
        self._poll_s = poll_s
        self._back: asyncio.Future[str | None] | None = None  # its result: None (go) or why not
        self._polling: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference

    @property
    def holding(self) -> bool:
        """Calls wait here now (the actor died and is not known to be back)."""
        return self._back is not None and not self._back.done()

    def began(self) -> None:
        """A call found the actor dead: hold the calls made from now on until it is back."""
        loop = asyncio.get_running_loop()
        if self._back is None or self._back.done() or self._back.get_loop() is not loop:
            self._back = back = loop.create_future()
            self._polling = loop.create_task(self._until_back(back))

    async def passed(self) -> None:
        """Return at once unless the actor is restarting; else once it is back (see the class)."""
        back = self._back
        if back is None or back.done() or back.get_loop() is not asyncio.get_running_loop():
            return  # not restarting, or known back (a verdict is for the calls that waited on it)
        loop = back.get_loop()
        started = loop.time()
        why = await asyncio.shield(back)  # a caller cancelled here leaves the others waiting
        if why is not None:
            raise UnavailableError(self._label, why, waited_s=loop.time() - started)

    async def _until_back(self, back: asyncio.Future[str | None]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._bound_s
        why: str | None = None
        try:
            while True:
                where = await _placement(self._placement, self._label)
                left_s = deadline - loop.time()
                if where is None or (where.state == "ALIVE" and await self._answers(left_s)):
                    break
                if where.state == "DEAD":
                    why = f"Ray has it DEAD: it will not be restarted. {_REOPEN}"
                    break
                if stranded := await self._stranded(where):
                    why = f"Ray is restarting it{stranded}"
                    break
                if loop.time() >= deadline:
                    why = None if where.placed else where.why(self._bound_s)
                    break
                await asyncio.sleep(self._poll_s)
        finally:
            if not back.done():
                back.set_result(why)

    async def _stranded(self, where: Placement) -> str:
        if where.placed:
            return ""
        try:  # (in a thread: Ray's cluster_resources() blocks, and this polls every few ms)
            return where.stranded(await asyncio.to_thread(self._offered))
        except Exception as exc:  # cannot tell: keep waiting
            log.debug("could not tell what %s's nodes offer: %r", self._label, exc)
            return ""

    async def _answers(self, within_s: float) -> bool:
        """Whether the actor's process answers a probe within ``within_s`` (False: the process
        that died, or a silent one: then the bound releases the calls, see the class). A probe
        not answered in time is left to end on its own, never cancelled."""
        probe = asyncio.ensure_future(self._probe())
        probe.add_done_callback(_retrieved)
        await asyncio.wait({probe}, timeout=max(within_s, self._poll_s))
        return probe.done() and not probe.cancelled() and probe.exception() is None


_REOPEN = "Close memray and open it again (it starts the actor afresh)"


def _retrieved(probe: asyncio.Future[Any]) -> None:
    if not probe.cancelled() and (exc := probe.exception()) is not None:  # read: not "never retrieved"
        log.debug("probe unanswered: %r", exc)


async def watched(
    reply: asyncio.Future[T],
    placement: Callable[[], Awaitable[Placement | None]],
    label: str,
    bound_s: float,
    grace_s: float = WATCH_GRACE_S,
    every_s: float = WATCH_EVERY_S,
    liveness: Liveness | None = None,
) -> T:
    """``reply``'s result, unless its actor has had no process — or, with ``liveness``, its
    process has answered nothing — for ``bound_s`` while it waited.

    ``placement()`` says where the actor is (None when it cannot tell: never a reason to cut a
    call). A call answered within ``grace_s`` costs one timer, armed and cancelled; a longer one
    asks then, and every ``every_s`` (and probes the actor while it is placed). A call whose
    actor is placed and answers its probes waits as long as it takes. Raises
    :class:`~memray.errors.UnavailableError` naming ``label``, the actor's state and what to do
    (``waited_s``: how long); ``reply`` is cancelled then."""
    loop = asyncio.get_running_loop()
    gave_up: list[Exception] = []
    watch: list[asyncio.Task[None]] = []
    started = loop.time()
    timer = loop.call_later(
        grace_s,
        lambda: watch.append(
            loop.create_task(_watch(reply, placement, label, bound_s, every_s, gave_up, liveness, started))
        ),
    )
    try:
        return await reply
    except asyncio.CancelledError:
        if gave_up:  # cancelled by the watch, not by our caller
            raise gave_up[0] from None
        raise
    finally:
        timer.cancel()
        for task in watch:
            task.cancel()


async def _watch(
    reply: asyncio.Future[Any],
    placement: Callable[[], Awaitable[Placement | None]],
    label: str,
    bound_s: float,
    every_s: float,
    gave_up: list[Exception],
    liveness: Liveness | None,
    started: float,
) -> None:
    """Cancel ``reply`` (saying why in ``gave_up``) once its actor has been unplaced for
    ``bound_s``, or alive (its ``__init__`` done) with a process that answered no probe for
    ``bound_s`` (the clock starts when this watch first sees it alive: an actor that spent the
    bound starting up is not silent)."""
    loop = asyncio.get_running_loop()
    unplaced_since: float | None = None
    alive_since: float | None = None
    while not reply.done():
        where = await _placement(placement, label)
        now = loop.time()
        if where is not None and not where.placed:
            alive_since = None
            unplaced_since = now if unplaced_since is None else unplaced_since
            if now - unplaced_since >= bound_s:
                gave_up.append(UnavailableError(label, where.why(now - unplaced_since), waited_s=now - started))
                reply.cancel()
                return
        elif liveness is not None and where is not None and where.state == "ALIVE":
            unplaced_since = None
            alive_since = now if alive_since is None else alive_since
            silent_s = liveness.unanswered_s(now, alive_since)
            liveness.ask()
            if silent_s >= bound_s:
                gave_up.append(UnavailableError(label, _silent(silent_s), waited_s=now - started))
                reply.cancel()
                return
        else:  # placed and starting, or cannot tell: never a reason to cut
            unplaced_since = alive_since = None
        await asyncio.sleep(every_s)


def _silent(silent_s: float) -> str:
    return (
        f"Ray has it alive, but its process has answered nothing for {silent_s:.1f} s (stopped or hung, or its "
        "node cut off), so the call may never run, or run once it answers. A busy actor answers beside its "
        "calls: if it does not come back, kill its process and Ray restarts it"
    )


async def _placement(placement: Callable[[], Awaitable[Placement | None]], label: str) -> Placement | None:
    try:
        return await placement()
    except Exception as exc:  # the control plane did not answer: keep waiting on the call
        log.debug("could not tell where %s is: %r", label, exc)
        return None
