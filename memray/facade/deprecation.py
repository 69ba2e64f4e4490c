"""`deprecated`: what the facade still answers to under an old name, with a
:class:`DeprecationWarning` that names the replacement.

The warning is attributed to the first caller outside :mod:`memray.facade` (the user's line, so
Python's default filter shows it in a script), whether the old name was called in its sync form
(derived by :func:`~memray.facade.runner.blocking`, which calls the async one in the caller's
thread to make its coroutine) or awaited in its ``a``-prefixed form.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeAlias, TypeVar

__all__ = ["deprecated", "deprecated_argument", "warn_deprecated"]

P = ParamSpec("P")
T = TypeVar("T")

Method: TypeAlias = Callable[P, Coroutine[Any, Any, T]]
#: What a deprecated method checks of its arguments (positional, self first; keyword) before it runs.
Check: TypeAlias = Callable[[tuple[Any, ...], dict[str, Any]], None]

_FACADE = os.path.dirname(os.path.abspath(__file__))


def warn_deprecated(old: str, replacement: str) -> None:
    """Warn that ``old`` is deprecated in favour of ``replacement``, at the caller's line."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _FACADE:
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    warnings.warn(f"{old} is deprecated: use {replacement}", DeprecationWarning, stacklevel=level)


def deprecated(replacement: str) -> Callable[[Method[P, T]], Method[P, T]]:
    """Mark an ``a``-prefixed handle method as deprecated: calling it (or its sync twin) warns
    first, naming ``replacement``; what it does is unchanged."""

    def mark(method: Method[P, T]) -> Method[P, T]:
        old = f"{method.__name__.removeprefix('a')} / {method.__name__}"
        return _warning(method, lambda args, kwargs: warn_deprecated(old, replacement))

    return mark


def deprecated_argument(name: str, replacement: str) -> Callable[[Method[P, T]], Method[P, T]]:
    """Mark the argument ``name`` of an ``a``-prefixed handle method as deprecated: a call that
    passes it (not None) warns first, naming ``replacement``; what it does is unchanged."""

    def mark(method: Method[P, T]) -> Method[P, T]:
        position = list(inspect.signature(method).parameters).index(name)
        old = f"{method.__name__.removeprefix('a')}({name}=...)"

        def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if kwargs.get(name, args[position] if len(args) > position else None) is not None:
                warn_deprecated(old, replacement)

        return _warning(method, check)

    return mark


def _warning(method: Method[P, T], check: Check) -> Method[P, T]:
    """``method`` running ``check`` on its arguments first. :func:`~memray.facade.runner.blocking`
    finds ``check`` on it and runs it in the caller's thread (then the method without it), so
    the sync form warns where the user called it too."""

    @functools.wraps(method)
    async def warned(*args: P.args, **kwargs: P.kwargs) -> T:
        check(args, kwargs)
        return await method(*args, **kwargs)

    warned.__deprecation_check__ = check  # type: ignore[attr-defined]
    return warned
