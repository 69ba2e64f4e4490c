"""`SessionAccess`: how a facade object reaches its open :class:`~memray.facade.session.Session`
and runs a call on memray's event-loop thread (sync or async), with the one closed-ness check
every call passes: once closed, every call raises the same :class:`~memray.errors.ClosedError`.
The parts are private: for the handles, the jobs and the tests.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from memray import tracing
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

__all__ = ["SessionAccess"]

T = TypeVar("T")


class SessionAccess:
    def __init__(self) -> None:
        self._loop = LoopThread()
        self._session: Session | None = None
        #: Concurrent single async calls of a caller's loop, sent as one batch (memray.facade.coalesce).
        self._calls = CallerBatches(self)

    @property
    def closed(self) -> bool:
        return self._session is None

    def _check_open(self) -> Session:
        """The one closed-ness check: every call (sync or async, facade or service) passes here
        and raises :class:`ClosedError` with the same words once :meth:`close` has run."""
        if self._session is None:
            raise ClosedError()
        return self._session

    @property
    def _deployment(self) -> Deployment:
        return self._check_open().deployment

    @property
    def _recall(self) -> Recall:
        return self._check_open().recall

    @property
    def _router(self) -> ShardRouter:
        return self._check_open().router

    @property
    def _encoder(self) -> QueryEncoder:
        return self._check_open().encoder

    @property
    def _embedder(self) -> Embedder | None:
        return self._check_open().embedder

    @property
    def _service_core(self) -> MemoryService:
        """The long-term service's async core (``memory_service`` is the sync/async handle)."""
        return self._check_open().service

    def _host_for(self, key: ConversationKey) -> HostClient:
        """The host of ``key``; calls to it are retried while Ray restarts it (they are idempotent;
        a retried add asks the host for the seqs its first attempt got)."""
        return self._check_open().host_for(key)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._session is None:
            coro.close()  # never started: no "coroutine was never awaited" warning
            raise ClosedError()
        if _tracing.on:  # the loop thread does not share this thread's context: carry the trace
            coro = tracing.carried(coro)
        return self._loop.run(coro)

    async def _arun(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._session is None:
            coro.close()
            raise ClosedError()
        if _tracing.on:
            coro = tracing.carried(coro)
        return await self._loop.arun(coro)
