"""The in-process runtime: cores as plain objects, with actor-like call semantics.

:class:`LocalRef` runs a synchronous object's methods one at a time on a private thread (as a
Ray actor would, off the caller's event loop), and awaits an asynchronous object's coroutine
methods directly on the running loop. :class:`LoopThread` is the background event loop that the
synchronous facade submits its coroutines to, in both modes.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from collections.abc import Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from memray.errors import ClosedError

__all__ = ["LocalRef", "LoopThread"]

T = TypeVar("T")


class LocalRef:
    """An :class:`~memray.rpc.ref.ActorRef` to an object in this process.

    The methods named in ``inline`` (short reads: a shard's searches) run on the caller's loop
    when nothing is queued for the object and it is idle, instead of hopping to its thread and
    back (py-spy on in-process conversation search: the hop to the shard's thread and back, and
    the one to embed the query, were most of the time outside the loop's own wake-up). Calls stay
    one at a time (a lock) and in order (never past a queued call). The price: while such a
    read runs, the loop waits (it mostly waited on the GIL anyway)."""

    def __init__(self, obj: Any, label: str, inline: frozenset[str] = frozenset()) -> None:
        self.obj = obj
        self.label = label
        self._executor: ThreadPoolExecutor | None = None
        self._inline = inline
        self._lock = threading.Lock()
        self._queued = 0

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.obj, method)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        if method in self._inline and not self._queued and self._lock.acquire(blocking=False):
            try:
                return fn(*args, **kwargs)
            finally:
                self._lock.release()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"memray-{self.label}")
        loop = asyncio.get_running_loop()

        def run() -> Any:
            with self._lock:
                return fn(*args, **kwargs)

        self._queued += 1
        try:
            return await loop.run_in_executor(self._executor, run)
        finally:
            self._queued -= 1

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
        """Run ``coro`` on the loop and wait for it (never call from the loop's own thread); past
        ``timeout_s`` it is cancelled and TimeoutError raised."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop; await the coroutine instead")
        future = self.submit(coro)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the loop from another event loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self) -> None:
        """Cancel what still runs on the loop (each task may clean up, for at most a few
        seconds), then stop the loop and its thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_tasks(5.0), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        self._loop = None
        self._thread = None


async def _cancel_tasks(timeout_s: float) -> None:
    """Cancel every other task of the running loop and wait (at most ``timeout_s``) for them to end."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=timeout_s)
