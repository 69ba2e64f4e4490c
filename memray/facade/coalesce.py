"""`CallerBatches`: concurrent single calls of one event loop, sent to memray as one batch.

Agents written as independent coroutines each await their own ``conv.acontext()``,
``conv.asearch()`` or ``conv.aadd()``. Each such call is queued on the caller's own event loop;
the calls made in the same turn of that loop (and while the previous batch of the same kind is
in flight) go to memray's loop thread together, in one hop, as one
:meth:`~memray.conversation.recall.Recall.context_many`,
:meth:`~memray.conversation.recall.Recall.search_many` or
:meth:`~memray.facade.session.Session.add_each` — which make one call per host and per shard
for the whole batch. Each caller gets its own answer, or the error its call alone would raise.

The price is one turn of the caller's loop before the batch leaves (0.03-0.08 ms at one client,
``benchmarks/read_path_micro.py``'s ``coalescing_added_ms``), and, for a call made while a batch
is in flight, the rest of that batch's time. Adds are merged only with ``durable=False`` and
``block=True`` (the defaults): a durable add or one that must not wait answers for its own
conversation's commit and admission, so it goes alone.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from memray.conversation.reads import ContextRead, SearchRead
from memray.conversation.recall import SearchResults
from memray.facade.session import Session
from memray.ids import ConversationKey
from memray.models import Context, Message
from memray.rpc.batch import Answer, Coalescer, unwrap

__all__ = ["CallerBatches", "MAX_BATCH"]

T = TypeVar("T")

#: The most calls of one kind a batch carries (a tick of 100,000 agents leaves as two).
MAX_BATCH = 65536

Add = tuple[ConversationKey, list[Message]]


class Runner(Protocol):
    """What the batches need of :class:`memray.facade.runner.Runner` (which makes them)."""

    @property
    def session(self) -> Session: ...
    def on_loop(self) -> bool: ...
    async def arun(self, coro: Coroutine[Any, Any, T]) -> T: ...


class _LoopBatches:
    """The batches of one caller event loop."""

    def __init__(self, runner: Runner) -> None:
        self.contexts: Coalescer[ContextRead, Answer[Context]] = Coalescer(
            lambda reads: runner.arun(runner.session.recall.context_many(reads)), MAX_BATCH
        )
        self.searches: Coalescer[SearchRead, Answer[SearchResults]] = Coalescer(
            lambda reads: runner.arun(runner.session.recall.search_many(reads)), MAX_BATCH
        )
        self.adds: Coalescer[Add, Answer[list[int]]] = Coalescer(
            lambda items: runner.arun(runner.session.add_each(items)), MAX_BATCH, lambda item: len(item[1]) or 1
        )


class CallerBatches:
    """Coalesces each caller event loop's concurrent single calls (see the module docstring).
    A call made on memray's own loop (a sync call's coroutine) has no caller loop to share a
    turn of: it runs alone, at once."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBatches] = weakref.WeakKeyDictionary()

    def _here(self) -> _LoopBatches:
        loop = asyncio.get_running_loop()
        batches = self._loops.get(loop)
        if batches is None:
            with self._lock:  # callers on other threads' loops may ask at the same time
                batches = self._loops.setdefault(loop, _LoopBatches(self._runner))
        return batches

    async def context(self, read: ContextRead) -> Context:
        if self._runner.on_loop():
            return await self._runner.session.recall.context(read)
        return unwrap(await self._here().contexts.get(read))

    async def search(self, read: SearchRead) -> SearchResults:
        if self._runner.on_loop():
            return await self._runner.session.recall.search(read)
        return unwrap(await self._here().searches.get(read))

    async def add(self, key: ConversationKey, messages: list[Message]) -> list[int]:
        if self._runner.on_loop():
            return await self._runner.session.add(key, messages, durable=False, block=True)
        return unwrap(await self._here().adds.get((key, messages)))
