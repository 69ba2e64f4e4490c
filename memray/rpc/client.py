"""`Client`: the typed face of a core that runs elsewhere (a Ray actor, or in-process behind a ref).

A core that calls another holds its client — :class:`~memray.store.client.StoreClient`,
:class:`~memray.index.client.ShardClient`, :class:`~memray.conversation.client.HostClient` —
never a raw :class:`~memray.rpc.ref.ActorRef`.

**Each contract is written once: on the core.** A core is a plain class with synchronous (or, for
the async hosts, ``async``) methods; its public methods *are* its contract, and what a call needs
beyond its arguments is declared on the method itself with the decorators below. A client lists
the core's calls, one line each, with no signature of its own::

    class StoreClient(Client, core=HistoryStore):
        get_messages = remote(HistoryStore.get_messages)

:func:`remote` types the attribute from the core's method (``ParamSpec``): ``await
client.get_messages(key, MessageFilter(limit=5))`` takes exactly the core method's parameters
(names, defaults, keyword-only markers) and gives back its return type, awaited. So a sync core
method and its async client method are one declaration, and ``mypy --strict`` still follows every
call from the caller to the core (go-to-definition lands on the ``remote`` line, one step from the
implementation). Why not a generic ``Client[HistoryStore]`` that answers every name through
``__getattr__``: no type checker can map a class's sync methods to async ones, so every call
would be ``Any``; a ``Protocol`` of async signatures would be the second copy this module exists
to remove. The one-line listing is the price of honest types, and ``Client.__init_subclass__``
holds it to the core when the module is imported: a core method without its line, a line naming
another class's method, or one bound to a different name fails the import, not a test.

Declarations, on the core's method:

- :func:`urgent` / :func:`background`: its :class:`Priority` at an actor that serves one call at
  a time (the store actor orders waiting calls by it; see ``memray.runtime.actors``);
- :func:`resend`: keyword arguments added when the call is retried after its actor died
  (:meth:`Client.retrying`);
- :func:`short_read`: in-process, the call may run on the caller's loop when the core is idle
  (:class:`~memray.rpc.local.LocalRef`'s ``inline``; :meth:`Client.short_reads`).

The history store adds a fourth, how a partitioned store routes the call
(:mod:`memray.store.routing`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, Self, TypeVar, cast, overload

from memray import tracing
from memray.rpc.ref import ActorRef, RetryingRef
from memray.tracing import state as _tracing

__all__ = [
    "Calls",
    "Client",
    "Remote",
    "remote",
    "public_methods",
    "Priority",
    "CallOptions",
    "urgent",
    "background",
    "resend",
    "short_read",
]

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
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


def declared(method: Callable[..., Any]) -> CallOptions:
    """What is declared on a core's ``method`` (:class:`CallOptions` defaults where nothing is)."""
    options: CallOptions = getattr(method, _OPTIONS, CallOptions())
    return options


def _declare(method: F, **options: Any) -> F:
    setattr(method, _OPTIONS, replace(declared(method), **options))
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


def public_methods(core: type) -> dict[str, Callable[..., Any]]:
    """A core's contract: its public methods (inherited ones too), by name."""
    return {
        name: member
        for name in dir(core)
        if not name.startswith("_") and callable(member := getattr(core, name)) and not isinstance(member, type)
    }


class Remote(Generic[P, R]):
    """One call of a core, seen from a :class:`Calls` view: typed as the core's method, awaited.

    Reading the attribute on a view gives ``view._call(name, ...)`` bound to the core method's
    name; ``P`` and ``R`` (the core method's parameters and result) type it. The bound call is
    kept in the view's ``__dict__`` on the first read, so a subclass that overrides the method
    and calls ``super()`` is bypassed from then on: call ``self._call(name, ...)`` instead."""

    def __init__(self, method: Callable[Concatenate[Any, P], Any]) -> None:
        self.method = method
        self.name: str = method.__name__

    @overload
    def __get__(self, view: None, owner: type) -> Self: ...
    @overload
    def __get__(self, view: Calls, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, view: Calls | None, owner: type) -> Self | Callable[P, Coroutine[Any, Any, R]]:
        if view is None:
            return self
        bound = functools.partial(view._call, self.name)
        view.__dict__[self.name] = bound  # kept: the next read finds it before this descriptor
        return cast("Callable[P, Coroutine[Any, Any, R]]", bound)

    def __repr__(self) -> str:
        return f"remote({self.method.__qualname__})"


@overload
def remote(method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]) -> Remote[P, R]: ...
@overload
def remote(method: Callable[Concatenate[Any, P], R]) -> Remote[P, R]: ...
def remote(method: Callable[Concatenate[Any, P], Any]) -> Remote[P, Any]:
    """The call of the core's ``method`` on a client (see the module docstring): awaited, it
    answers what the method returns — or, for an ``async`` core method (the hosts, the key ring),
    what its coroutine returns."""
    return Remote(method)


class Calls:
    """A typed view of a core's calls: its :func:`remote` attributes, each sent by name through
    :meth:`_call` (a :class:`Client` sends to one core; a router such as
    :class:`~memray.store.partitions.StorePartitions` picks the cores)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        renamed = sorted(f"{name} = {r!r}" for name, r in cls.remotes().items() if name != r.name)
        if renamed:
            raise TypeError(f"{cls.__name__}: a call keeps its core method's name, not {', '.join(renamed)}")

    async def _call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def remotes(cls) -> dict[str, Remote[..., Any]]:
        """The view's calls by name (its own and its bases')."""
        found: dict[str, Remote[..., Any]] = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Remote)})
        return found

    @classmethod
    def calls(cls) -> list[str]:
        """The names of the core's methods this view calls."""
        return sorted(cls.remotes())

    @classmethod
    def options(cls, method: str) -> CallOptions:
        """What the core declares on ``method`` (:class:`CallOptions` defaults where nothing is)."""
        return declared(cls.remotes()[method].method)

    @classmethod
    def short_reads(cls) -> frozenset[str]:
        """The calls declared :func:`short_read`."""
        return frozenset(name for name in cls.calls() if cls.options(name).short_read)


class Client(Calls):
    """Typed calls to one core through ``ref`` (see the module docstring).

    A subclass names its core (``class StoreClient(Client, core=HistoryStore)``) and must then
    hold a :func:`remote` of every public method of the core, and nothing else."""

    core: ClassVar[type]

    def __init_subclass__(cls, core: type | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if core is None:
            return
        cls.core = core
        contract, remotes = public_methods(core), cls.remotes()
        missing, extra = sorted(set(contract) - set(remotes)), sorted(set(remotes) - set(contract))
        strangers = sorted(n for n, r in remotes.items() if n in contract and r.method is not contract[n])
        if missing or extra or strangers:
            raise TypeError(
                f"{cls.__name__} must hold remote({core.__name__}.<name>) for each public method of "
                f"{core.__name__}: missing {missing}, not {core.__name__}'s {extra}, another class's {strangers}"
            )

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

    def retrying(self, timeout_s: float = 30.0) -> Self:
        """This client with every call retried while its actor restarts (for cores whose calls
        are idempotent); a retry adds the arguments its method declares with :func:`resend`."""
        on_retry = {name: dict(self.options(name).resend) for name in self.calls() if self.options(name).resend}
        return type(self)(RetryingRef(self.ref, timeout_s, on_retry=on_retry))
