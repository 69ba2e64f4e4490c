"""The rules for call arguments, shared by the facade and the long-term service.

One function per kind of argument, so that a rule reads the same wherever it applies:
``conv.search(limit=0)`` and ``svc.search(SearchRequest(limit=0))`` fail alike. Each returns the
value to use, or raises :class:`~memray.errors.ValidationError` naming the argument, the value
and what to pass instead. Python's ``bool`` is an ``int``; it is refused wherever a number is
meant (``limit=True`` is a mistake, not ``1``).

=================  ===============================================================================
``limit``          ``None`` (the call's default) or an int >= 1. Everywhere: search, search_app,
                   context, messages (None: all), list_conversations, the service's search and
                   list_recent (None: 10).
counts             ``semantic_limit``, ``offset``: an int >= 0 (0 turns recall off / starts at the top)
``min_score``      ``None`` or a finite number in [0, 1] (scores are in [0, 1]; docs/scoring.md)
``mode``           ``None`` (the configured default) or ``vector`` | ``lexical`` | ``hybrid``
``scope``          ``conversation`` | ``user``
``merge``          ``append`` | ``prepend`` | ``interleave``
seq cursors        ``before_seq`` / ``after_seq``: ``None`` or an int >= 0
``roles``          ``None`` or a list of ``system`` | ``user`` | ``assistant`` | ``tool``
``query``          a string (any text: there is no query syntax)
=================  ===============================================================================
"""

from __future__ import annotations

from typing import cast, get_args, overload

from memray.errors import ValidationError
from memray.models import ConversationOrder, Merge, RetrievalMode, Role, Scope
from memray.validation import check_text

__all__ = [
    "SEARCH_LIMIT",
    "CONTEXT_LIMIT",
    "CONTEXT_SEMANTIC_LIMIT",
    "CONVERSATIONS_LIMIT",
    "check_limit",
    "check_count",
    "check_min_score",
    "check_mode",
    "check_scope",
    "check_merge",
    "check_seq",
    "check_query",
    "check_choice",
    "check_roles",
    "check_order",
]

#: What an argument is when a caller leaves it out, written once: the facade's signatures and
#: request records (``memray.SearchCall``, ``memray.ContextCall``) and the server's operation table
#: (:mod:`memray.server.operations`: the REST bodies and the MCP tools) all read these.
#: ``limit`` of a search (a conversation's, or an app-wide one).
SEARCH_LIMIT = 5
#: ``limit`` (recent messages) and ``semantic_limit`` (recalled ones) of a context.
CONTEXT_LIMIT = 10
CONTEXT_SEMANTIC_LIMIT = 5
#: ``limit`` of a page of a user's conversations.
CONVERSATIONS_LIMIT = 50

MODES: tuple[str, ...] = get_args(RetrievalMode)
ROLES: tuple[str, ...] = get_args(Role)
SCOPES = ("conversation", "user")
MERGES = ("append", "prepend", "interleave")
ORDERS: tuple[str, ...] = get_args(ConversationOrder)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@overload
def check_limit(value: object, default: int, field: str = "limit", none_means: str = "") -> int: ...
@overload
def check_limit(value: object, default: None, field: str = "limit", none_means: str = "") -> int | None: ...
def check_limit(value: object, default: int | None, field: str = "limit", none_means: str = "") -> int | None:
    """``None`` → ``default``; otherwise an int >= 1."""
    if value is None:
        return default
    if not _is_int(value) or cast(int, value) < 1:
        meaning = none_means or ("all of them" if default is None else str(default))
        raise ValidationError(field, value, "must be a positive integer or None", f"None means {meaning}")
    return cast(int, value)


def check_count(value: object, field: str) -> int:
    """An int >= 0 (``semantic_limit=0``: no recall; ``offset=0``: from the first)."""
    if not _is_int(value) or cast(int, value) < 0:
        raise ValidationError(field, value, "must be an integer >= 0")
    return cast(int, value)


def check_min_score(value: object) -> float | None:
    """``None`` or a finite number in [0, 1]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        # NaN fails the range test too; inf is out of range
        raise ValidationError(
            "min_score",
            value,
            "must be a number in [0, 1] or None",
            "scores are in [0, 1] (docs/scoring.md); None keeps every hit",
        )
    return float(value)


def check_mode(value: object) -> RetrievalMode | None:
    """``None`` (the configured default) or one of ``vector``, ``lexical``, ``hybrid``."""
    if value is None:
        return None
    return cast(RetrievalMode, check_choice(value, "mode", MODES))


def check_scope(value: object) -> Scope:
    return cast(Scope, check_choice(value, "scope", SCOPES))


def check_merge(value: object) -> Merge:
    return cast(Merge, check_choice(value, "merge", MERGES))


def check_order(value: object) -> ConversationOrder:
    return cast(ConversationOrder, check_choice(value, "order", ORDERS))


def check_choice(value: object, field: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(field, value, "unknown " + field, "use " + _either(allowed))
    return value


def check_seq(value: object, field: str) -> int | None:
    """A seq cursor: ``None`` or an int >= 0 (seqs start at 1)."""
    if value is None:
        return None
    if not _is_int(value) or cast(int, value) < 0:
        raise ValidationError(
            field,
            value,
            "must be a non-negative integer seq or None",
            "seqs are the ints that add() returned and Message.seq holds",
        )
    return cast(int, value)


def check_roles(value: object) -> list[str] | None:
    """``None`` (every role) or a list of role names."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ValidationError("roles", value, "must be a list of roles or None", "e.g. roles=['user', 'assistant']")
    return [check_choice(r, "roles", ROLES) for r in value]


def check_query(value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError("query", value, f"must be a string, got {type(value).__name__}")
    check_text("query", value)  # a lone surrogate: the caller's bug, not a degraded search
    return value


def _either(allowed: tuple[str, ...]) -> str:
    return ", ".join(allowed[:-1]) + " or " + allowed[-1]
