"""The sync/async pair written once: each sync method is :func:`memray.facade.runner.blocking`
of its ``a``-prefixed twin, runs that coroutine on memray's loop, and is what the async one is to
readers (signature, docstring, name) and to ``mypy --strict`` (tests/test_typing.py)."""

from __future__ import annotations

import inspect

import pytest

import memray
from memray.facade.runner import blocking
from tests.test_public_api import HANDLES

#: Pairs still written twice, and why: opening or closing a memray starts or stops Ray and the
#: loop thread from the caller's thread, which a coroutine on memray's own loop must not do.
WRITTEN_TWICE = {"close", "fork"}


def twins() -> list[tuple[type, str]]:
    """Every (handle, sync name) that has an ``a``-prefixed twin (inherited ones included)."""
    return [
        (cls, name)
        for cls in [*HANDLES, memray.KeysHandle]
        for name in dir(cls)
        if not name.startswith("_")
        and name not in WRITTEN_TWICE
        and inspect.isfunction(getattr(cls, name))
        and not inspect.iscoroutinefunction(getattr(cls, name))
        and hasattr(cls, "a" + name) | (name == "wait_indexed")
    ]


def test_every_pair_but_open_and_close_is_written_once() -> None:
    for cls in [*HANDLES, memray.KeysHandle]:
        for name in WRITTEN_TWICE & set(dir(cls)):
            assert not hasattr(getattr(cls, name), "__wrapped__"), f"{cls.__name__}.{name} is derived now: drop it here"
    assert len(twins()) >= 60  # the walk reaches the handles


@pytest.mark.parametrize("cls,name", twins(), ids=[f"{c.__name__}.{n}" for c, n in twins()])
def test_a_derived_sync_method_reads_as_its_async_twin(cls: type, name: str) -> None:
    sync = getattr(cls, name)
    assert hasattr(sync, "__wrapped__"), f"{cls.__name__}.{name} is written by hand: derive it, blocking(a{name})"
    twin = sync.__wrapped__
    assert inspect.iscoroutinefunction(twin)
    assert sync.__name__ == name and sync.__qualname__.endswith(f".{name}")
    assert twin.__name__ in ("a" + name, "await_indexed")  # (wait_indexed's twin is await_indexed)
    assert inspect.signature(sync) == inspect.signature(twin)
    assert sync.__doc__ == twin.__doc__


def test_a_sync_call_runs_alone_not_in_a_caller_batch(mem: memray.Memory, app: str) -> None:
    """A sync call's coroutine runs on memray's own loop: nothing to coalesce with, so no batch
    is made for that loop (the async calls of a caller's loop are batched: tests/test_batched_reads.py)."""
    conv = mem.conversation("u", "c", app)
    conv.add({"role": "user", "content": "otters hold hands"})
    assert conv.search("otters") and conv.context("otters").messages
    assert len(mem.internals.batches._loops) == 0


def test_blocking_runs_the_coroutine_on_the_handles_runner(mem: memray.Memory) -> None:
    class Doubler:
        def __init__(self) -> None:
            self._runner = mem.internals

        async def atwice(self, x: int) -> int:
            """Twice ``x``, on memray's loop."""
            assert self._runner.on_loop()
            return 2 * x

        twice = blocking(atwice)

    assert Doubler().twice(21) == 42
    assert Doubler.twice.__doc__ == "Twice ``x``, on memray's loop."


def test_every_call_of_a_closed_memray_raises_closed_error(tmp_path) -> None:
    mem = memray.open(str(tmp_path), mode="inprocess")
    conv, svc = mem.conversation("u", "c"), mem.memory_service
    mem.close()
    for call in (lambda: conv.add({"role": "user", "content": "x"}), lambda: svc.add_entry("a", "u", "x"), mem.flush):
        with pytest.raises(memray.ClosedError):
            call()
