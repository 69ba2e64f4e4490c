"""`Internals` and `Runner`: the one place that knows how a facade call runs, and
:func:`blocking`, which makes a handle's sync method out of its async one.

A :class:`Runner` owns memray's event-loop thread and the open
:class:`~memray.facade.session.Session`: it opens and stops them, for the
:class:`~memray.facade.memory.Memory` that holds it. Everything else it offers is its base,
:class:`Internals`, which is what every handle (a conversation, its working memory, the long-term
service, the keys) is built from, and what ``Memory.internals`` gives jobs and extensions:
:attr:`Internals.session` is the one closed-ness check (once closed, every call raises the same
:class:`~memray.errors.ClosedError`), :meth:`Internals.arun` runs a core coroutine on memray's
loop, and :attr:`Internals.batches` sends the concurrent single calls of a caller's loop as one
batch (:mod:`memray.facade.coalesce`). A handle never holds the ``Memory``, so the handles'
modules and the ``Memory``'s do not import one another.

Sync and async, written once
----------------------------
Each call is written once, as the ``a``-prefixed coroutine method; its sync twin is
``name = blocking(aname)``: the same coroutine run to completion on memray's loop thread from the
calling thread. :func:`blocking` is typed with ``ParamSpec``, so ``mypy --strict``, IDEs and
``help()`` see the sync method with the async one's exact signature and docstring.

Why this and not httpx's ``Client``/``AsyncClient`` split: memray's I/O already runs on its own
loop thread in both forms (a sync call only waits for it), so there is nothing to write twice
beneath the signature, and users already call ``conv.add`` and ``await conv.aadd`` on one
object. A second class per handle would double the classes and break every caller of the
``a``-prefixed names; a wrapper keeps the public API as it is and writes each signature once.

A coroutine run by the sync form is already on memray's loop, so :meth:`Internals.arun` awaits
the core call directly there, and :attr:`Internals.batches` does not coalesce (there is no caller loop
whose turn to share).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from memray import tracing
from memray.config import MemoryConfig
from memray.conversation.client import HostClient
from memray.conversation.recall import Recall
from memray.embedding.base import Embedder
from memray.embedding.query import QueryEncoder
from memray.errors import ClosedError
from memray.facade.coalesce import CallerBatches
from memray.facade.session import Session
from memray.ids import ConversationKey
from memray.index.router import ShardRouter
from memray.rpc.local import LoopThread
from memray.runtime.deploy import Deployment
from memray.service.longterm import MemoryService
from memray.tracing import state as _tracing

__all__ = ["Internals", "Runner", "blocking"]

T = TypeVar("T")
P = ParamSpec("P")


class Internals:
    """An open memray's running parts, for jobs, extensions, benchmarks and tests that drive the
    cores under it: ``mem.internals`` (docs/internals.md). The handles are built from it too.

    Its members are memray's own parts, not a stable API: they change when the cores change
    (the changelog says when). Calls on them are coroutines of the cores; :meth:`run` (from any
    thread but memray's loop) and :meth:`arun` (from a coroutine) run them on memray's loop. Once
    the memray is closed, every member raises :class:`~memray.errors.ClosedError`.
    """

    def __init__(self) -> None:
        self._loop = LoopThread()
        self._session: Session | None = None
        #: Concurrent single async calls of a caller's loop, sent as one batch.
        self.batches = CallerBatches(self)

    @property
    def closed(self) -> bool:
        """Whether the memray is closed (every member then raises :class:`ClosedError`)."""
        return self._session is None

    @property
    def session(self) -> Session:
        """The open session; the one closed-ness check (:class:`ClosedError` once closed)."""
        if self._session is None:
            raise ClosedError()
        return self._session

    def check_open(self) -> None:
        """Raise :class:`ClosedError` once closed (a handle of a closed memray is refused when
        it is made, not at its first call)."""
        _ = self.session

    # -- the session's parts ---------------------------------------------------------------
    @property
    def deployment(self) -> Deployment:
        """The clients of the store partitions, the shards and the hosts (Ray actors, or cores
        in this process)."""
        return self.session.deployment

    @property
    def recall(self) -> Recall:
        """The read path: context and search over the hosts, the shards and the store."""
        return self.session.recall

    @property
    def router(self) -> ShardRouter:
        """The shards, routed by user."""
        return self.session.router

    @property
    def encoder(self) -> QueryEncoder:
        """The query encoder (the active embedder and its calibration)."""
        return self.session.encoder

    @property
    def embedder(self) -> Embedder | None:
        """The active embedder (None: lexical search only)."""
        return self.session.embedder

    @property
    def service(self) -> MemoryService:
        """The long-term service's async core (``mem.memory_service`` is its sync/async handle)."""
        return self.session.service

    def host_for(self, key: ConversationKey) -> HostClient:
        """The host of ``key`` (its client, retried while Ray restarts it)."""
        return self.session.host_for(key)

    # -- running calls --------------------------------------------------------------------
    def on_loop(self) -> bool:
        """Whether the caller is a coroutine on memray's own loop (a sync call's)."""
        try:
            return asyncio.get_running_loop() is self._loop.loop
        except (RuntimeError, ClosedError):
            return False

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on memray's loop and wait for it (from any thread but the loop's)."""
        if self._session is None:
            coro.close()  # never started: no "coroutine was never awaited" warning
            raise ClosedError()
        if _tracing.on:  # the loop thread does not share this thread's context: carry the trace
            coro = tracing.carried(coro)
        return self._loop.run(coro)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on memray's loop: from a caller's loop, or directly when already there."""
        if self._session is None:
            coro.close()
            raise ClosedError()
        if self.on_loop():
            return await coro
        if _tracing.on:
            coro = tracing.carried(coro)
        return await self._loop.arun(coro)


class Runner(Internals):
    """Opens and stops the session and memray's loop thread, for the ``Memory`` that holds it;
    everything else is :class:`Internals`'."""

    def open(self, config: MemoryConfig) -> Session:
        """Start the loop thread and, on it, the session ``config`` describes."""
        self._loop.start()
        try:
            self._session = self._loop.run(Session.start(config))
        except BaseException:
            self._loop.stop()
            raise
        return self._session

    def stop(self, terminate: bool, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """Stop the session (:meth:`Session.stop`; its hosts' reports), then the loop. Closed
        afterwards whatever happened (past ``timeout_s``: TimeoutError)."""
        session = self.session
        try:
            return self._loop.run(session.stop(terminate), timeout_s)
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Closed now, without stopping the session (its actors are already gone)."""
        self._session = None
        self._loop.stop()


class Runs(Protocol):
    """A handle: what :func:`blocking` needs of it."""

    @property
    def _runner(self) -> Internals: ...


H = TypeVar("H", bound=Runs)


def blocking(method: Callable[Concatenate[H, P], Coroutine[Any, Any, T]]) -> Callable[Concatenate[H, P], T]:
    """The sync twin of the async handle method ``method`` (see the module docstring):
    ``add = blocking(aadd)`` takes ``aadd``'s arguments and returns what it returns."""

    check = getattr(method, "__deprecation_check__", None)  # (memray.facade.deprecation)
    call: Callable[Concatenate[H, P], Coroutine[Any, Any, T]] = method
    if check is not None:
        call = method.__wrapped__  # type: ignore[attr-defined]  # (the method without its check)

    @functools.wraps(method)
    def run(self: H, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if check is not None:  # here, in the caller's thread: the warning names the caller's line
            check((self, *args), kwargs)
        return self._runner.run(call(self, *args, **kwargs))

    run.__name__ = method.__name__.removeprefix("a")  # (await_indexed's twin is wait_indexed)
    run.__qualname__ = f"{method.__qualname__.rpartition('.')[0]}.{run.__name__}".lstrip(".")
    return run
