"""`Client`: the typed face of a core that runs elsewhere (a Ray actor, or in-process behind a ref).

A core that calls another holds its client — :class:`~memray.store.client.StoreClient`,
:class:`~memray.index.client.ShardClient`, :class:`~memray.conversation.client.HostClient` —
never a raw :class:`~memray.rpc.ref.ActorRef`. A client has one ``async`` method per public
method of its core, with the core's signature, and each forwards its arguments to
:meth:`Client._call` under its own name: the clients are the only place memray spells a method
name, and a type checker follows every call from the caller to the core.
``tests/rpc/test_clients.py`` holds each client to its core (the same method names and
signatures, and each method forwarding exactly its own name and arguments), so they cannot drift.

What a call needs beyond its arguments is declared on the client's method:

- :func:`urgent` / :func:`background`: its :class:`Priority` at an actor that serves one call at
  a time (the store actor orders waiting calls by it; see ``memray.runtime.actors``);
- :func:`resend`: keyword arguments added when the call is retried after its actor died
  (:meth:`Client.retrying`);
- :func:`short_read`: in-process, the call may run on the caller's loop when the core is idle
  (:class:`~memray.rpc.local.LocalRef`'s ``inline``; :meth:`Client.short_reads`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any, Self, TypeVar

from memray import tracing
from memray.rpc.ref import ActorRef, RetryingRef
from memray.tracing import state as _tracing

__all__ = ["Client", "Priority", "CallOptions", "urgent", "background", "resend", "short_read"]

F = TypeVar("F", bound=Callable[..., Any])
_OPTIONS = "__memray_call__"


class Priority(IntEnum):
    """How soon a waiting call runs at an actor that serves one call at a time; lower first."""

    URGENT = 0  # what durable lag waits for: message commits
    NORMAL = 1  # reads and other writes
    BACKGROUND = 2  # vectors, scans, exports: they wait while anything else is queued


@dataclass(frozen=True)
class CallOptions:
    priority: Priority = Priority.NORMAL
    resend: Mapping[str, Any] = field(default_factory=dict)  # keyword arguments a retry adds
    short_read: bool = False  # in-process, may run on the caller's loop when the core is idle


def _declare(method: F, **options: Any) -> F:
    current: CallOptions = getattr(method, _OPTIONS, CallOptions())
    setattr(method, _OPTIONS, replace(current, **options))
    return method


def urgent(method: F) -> F:
    """Declare the call :attr:`Priority.URGENT`."""
    return _declare(method, priority=Priority.URGENT)


def background(method: F) -> F:
    """Declare the call :attr:`Priority.BACKGROUND`."""
    return _declare(method, priority=Priority.BACKGROUND)


def resend(**arguments: Any) -> Callable[[F], F]:
    """Declare keyword arguments a retry of the call adds (``@resend(retried=True)``: the core
    then knows the first attempt may have been applied)."""
    return lambda method: _declare(method, resend=dict(arguments))


def short_read(method: F) -> F:
    """Declare the call a short read: in-process it may run on the caller's loop when the core is
    idle and nothing is queued for it, instead of hopping to the core's thread and back."""
    return _declare(method, short_read=True)


class Client:
    """Typed calls to one core through ``ref`` (see the module docstring)."""

    def __init__(self, ref: ActorRef) -> None:
        self.ref = ref

    @property
    def label(self) -> str:
        """What to call the core in errors ("shard 3", "history store")."""
        return self.ref.label

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r})"

    async def _call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        if _tracing.on:  # off: this one read is all tracing costs a call (memray.tracing)
            return await self._traced_call(method, args, kwargs)
        return await self.ref.call(method, *args, **kwargs)

    async def _traced_call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The call inside a client span ``"<actor> <method>"`` when a recording span is current
        (a Ray ref then carries its context to the actor)."""
        if not tracing.recording():
            return await self.ref.call(method, *args, **kwargs)
        attributes = {"memray.actor": self.label, "rpc.method": method}
        with tracing.span(f"{self.label} {method}", attributes, kind="client"):
            return await self.ref.call(method, *args, **kwargs)

    @classmethod
    def calls(cls) -> list[str]:
        """The names of the core's methods this client calls (its public coroutine methods)."""
        return sorted(
            name for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction) if not name.startswith("_")
        )

    @classmethod
    def options(cls, method: str) -> CallOptions:
        """What is declared on ``method`` (:class:`CallOptions` defaults where nothing is)."""
        options: CallOptions = getattr(getattr(cls, method), _OPTIONS, CallOptions())
        return options

    @classmethod
    def short_reads(cls) -> frozenset[str]:
        """The calls declared :func:`short_read`."""
        return frozenset(name for name in cls.calls() if cls.options(name).short_read)

    def retrying(self, timeout_s: float = 30.0) -> Self:
        """This client with every call retried while its actor restarts (for cores whose calls
        are idempotent); a retry adds the arguments its method declares with :func:`resend`."""
        on_retry = {name: dict(self.options(name).resend) for name in self.calls() if self.options(name).resend}
        return type(self)(RetryingRef(self.ref, timeout_s, on_retry=on_retry))
