"""The public API: ``memray.__all__`` against what the facade's signatures use, and the rule
that every call has an ``a``-prefixed asyncio twin with the same parameters.

The expected names are derived from the facade itself (the annotations of ``memray.open`` and of
every public method and property of the handles), so a signature that starts using a new type
fails here until that type is exported, and an export nobody uses or defines shows up too.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import memray
from memray import errors
from memray.conversation.recall import SearchResults
from memray.facade.conversation import ConversationHandle
from memray.models import Message

HANDLES: list[type] = [
    memray.Memory,
    memray.ConversationHandle,
    memray.WorkingMemoryHandle,
    memray.MemoryServiceHandle,
    memray.ProjectView,
]
#: Public methods that make no call: nothing to await, so no twin.
NO_CALL = {"conversation", "tools", "for_project"}


def public_callables(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, member in vars(cls).items():
        if name.startswith("_") and name != "__init__":
            continue
        if isinstance(member, property) and member.fget is not None:
            yield name, member.fget
        elif inspect.isfunction(member):
            yield name, member


def memray_types(hint: Any) -> Iterator[type]:
    """The classes defined in memray that ``hint`` mentions (inside unions, generics, Literals)."""
    if isinstance(hint, type) and hint.__module__.split(".")[0] == "memray":
        yield hint
    if typing.get_origin(hint) is typing.Literal:
        return
    for arg in typing.get_args(hint):
        yield from memray_types(arg)
    if isinstance(hint, types.UnionType):
        for arg in hint.__args__:
            yield from memray_types(arg)


def facade_types() -> set[type]:
    functions: list[Callable[..., Any]] = [memray.open]
    functions += [fn for cls in HANDLES for _, fn in public_callables(cls)]
    found: set[type] = set()
    for fn in functions:
        for hint in typing.get_type_hints(fn, localns=vars(memray)).values():  # TYPE_CHECKING imports
            found.update(memray_types(hint))
    return found


def test_every_type_the_facade_signatures_use_is_exported() -> None:
    used = facade_types()
    assert {Message, ConversationHandle, SearchResults} <= used  # the walk reaches into unions and generics
    missing = sorted(t.__name__ for t in used if getattr(memray, t.__name__, None) is not t)
    assert missing == [], f"used in the facade's signatures but not in memray.__all__: {missing}"
    assert {t.__name__ for t in used} <= set(memray.__all__)


def test_every_error_is_exported() -> None:
    defined = {
        name
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and issubclass(obj, errors.MemrayError) and obj.__module__ == errors.__name__
    }
    assert defined and defined <= set(memray.__all__)


def test_all_is_sorted_and_every_name_exists() -> None:
    assert memray.__all__ == sorted(set(memray.__all__))
    for name in memray.__all__:
        assert getattr(memray, name) is not None, name


def test_every_call_has_an_a_prefixed_twin_with_the_same_parameters() -> None:
    for cls in HANDLES:
        members = dict(public_callables(cls))
        calls = {n: fn for n, fn in members.items() if not n.startswith("_") and not isinstance(vars(cls)[n], property)}
        for name, fn in calls.items():
            if inspect.iscoroutinefunction(fn):
                assert name.startswith("a") and name[1:] in calls, f"{cls.__name__}.{name} has no sync form"
                continue
            if name in NO_CALL:
                continue
            twin = calls.get("a" + name)
            assert twin is not None and inspect.iscoroutinefunction(twin), f"{cls.__name__}.{name} has no a{name}"
            assert inspect.signature(twin) == inspect.signature(fn).replace(
                return_annotation=inspect.signature(twin).return_annotation
            ), f"{cls.__name__}.a{name} differs"
            assert typing.get_type_hints(twin).get("return") == typing.get_type_hints(fn).get("return"), name


def test_plumbing_is_private() -> None:
    for name in ("deployment", "service_core", "host_for", "start", "core"):
        for cls in HANDLES:
            assert not hasattr(cls, name), f"{cls.__name__}.{name} is public"
