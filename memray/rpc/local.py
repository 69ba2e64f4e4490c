"""The in-process runtime: cores as plain objects, with actor-like call semantics.

:class:`LocalRef` runs a synchronous object's methods one at a time on a private thread (as a
Ray actor would, off the caller's event loop), and awaits an asynchronous object's coroutine
methods directly on the running loop. :class:`LoopThread` is the background event loop that the
synchronous facade submits its coroutines to, in both modes.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from memray.errors import ClosedError

__all__ = ["LocalRef", "LoopThread"]

T = TypeVar("T")


class LocalRef:
    """An :class:`~memray.rpc.ref.ActorRef` to an object in this process."""

    def __init__(self, obj: Any, label: str) -> None:
        self.obj = obj
        self.label = label
        self._executor: ThreadPoolExecutor | None = None

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.obj, method)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"memray-{self.label}")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __reduce__(self) -> Any:
        raise TypeError("a LocalRef cannot leave its process; use mode='ray' to share memory")


class LoopThread:
    """A daemon thread running one asyncio loop; sync code submits coroutines to it."""

    def __init__(self, name: str = "memray-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> LoopThread:
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        ready.wait()
        return self

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise ClosedError()
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it (never call from the loop's own thread)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop; await the coroutine instead")
        return self.submit(coro).result(timeout_s)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the loop from another event loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = None
        self._thread = None
