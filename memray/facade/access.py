"""`SessionAccess`: a :class:`~memray.facade.memory.Memory`'s private view of its open session,
for the jobs, the benchmarks and the tests that drive the cores under a memray (``mem._run(...)``,
``mem._deployment.stores``...). Every member is the :class:`~memray.facade.runner.Runner`'s,
which is what the handles use; nothing here holds state of its own.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from memray.conversation.client import HostClient
from memray.conversation.recall import Recall
from memray.embedding.base import Embedder
from memray.embedding.query import QueryEncoder
from memray.facade.runner import Runner
from memray.facade.session import Session
from memray.ids import ConversationKey
from memray.index.router import ShardRouter
from memray.runtime.deploy import Deployment
from memray.service.longterm import MemoryService

__all__ = ["SessionAccess"]

T = TypeVar("T")


class SessionAccess:
    def __init__(self) -> None:
        self._runner = Runner()

    @property
    def closed(self) -> bool:
        return self._runner.closed

    def _check_open(self) -> Session:
        return self._runner.session

    @property
    def _deployment(self) -> Deployment:
        return self._runner.session.deployment

    @property
    def _recall(self) -> Recall:
        return self._runner.session.recall

    @property
    def _router(self) -> ShardRouter:
        return self._runner.session.router

    @property
    def _encoder(self) -> QueryEncoder:
        return self._runner.session.encoder

    @property
    def _embedder(self) -> Embedder | None:
        return self._runner.session.embedder

    @property
    def _service_core(self) -> MemoryService:
        """The long-term service's async core (``memory_service`` is the sync/async handle)."""
        return self._runner.session.service

    def _host_for(self, key: ConversationKey) -> HostClient:
        """The host of ``key`` (its retrying client)."""
        return self._runner.session.host_for(key)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    async def _arun(self, coro: Coroutine[Any, Any, T]) -> T:
        return await self._runner.arun(coro)
