"""The errors memray raises.

Every error memray raises derives from :class:`MemrayError`::

    MemrayError
    ├── ValidationError        bad input: names the field, the value and what to do; nothing written
    │   └── InvalidIdError     an id that is empty, too long or holds control characters
    ├── NotFoundError          the conversation, entry or scope does not exist
    ├── ConflictError          optimistic concurrency: a stale writer (working memory versions)
    ├── EmbeddingError         the embedder failed (after its retries)
    │   └── ModelMismatchError a vector of the wrong model or dimension for an index: re-embed
    ├── StoreError             the history store failed or is unavailable
    │   └── DeadLetterError    acknowledged messages that cannot be stored: recorded, not retried
    ├── SummaryError           the summariser failed; history untouched, retried on a later turn
    ├── UnavailableError       an actor (host, shard, store) is down; names which
    ├── Backpressure           a host holds its bound of acknowledged, not yet durable messages
    ├── MissingExtraError      an optional package is not installed: says which extra to install
    └── ClosedError            the memory was closed

Every error pickles with its message and fields intact, because errors cross Ray process
boundaries (`tests/test_errors.py` proves it for each class).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "MemrayError",
    "ValidationError",
    "InvalidIdError",
    "NotFoundError",
    "ConflictError",
    "EmbeddingError",
    "ModelMismatchError",
    "StoreError",
    "DeadLetterError",
    "SummaryError",
    "UnavailableError",
    "Backpressure",
    "MissingExtraError",
    "ClosedError",
    "MISSING",
]


class MemrayError(Exception):
    """Base class of every error memray raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions with keyword-only fields do not pickle by default; rebuild from the message
        # and the instance dict so the error survives a trip through Ray.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[MemrayError], args: tuple[Any, ...], state: dict[str, Any]) -> MemrayError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class _Missing:
    """The value of a required field that was not given (shown as ``<missing>``)."""

    def __repr__(self) -> str:
        return "<missing>"

    def __reduce__(self) -> str:
        return "MISSING"  # pickles as a reference to the one instance


#: ``ValidationError.value`` when the field was not given at all.
MISSING: Any = _Missing()


#: The most characters of a bad value an error message shows (a path, a long text).
SHOWN_CHARS = 240


class ValidationError(MemrayError, ValueError):
    """Bad input. ``field`` and ``value`` say what was wrong (``value`` is :data:`MISSING` when
    it was not given), ``problem`` what is wrong with it, ``hint`` what to do; nothing was written."""

    def __init__(self, field: str, value: Any, problem: str, hint: str = "") -> None:
        shown = repr(value)
        if len(shown) > SHOWN_CHARS:  # a long value shows its two ends: a path keeps its file name
            shown = shown[: SHOWN_CHARS - 80] + "..." + shown[-77:]
        message = f"invalid {field}={shown}: {problem}"
        if hint:
            message += f"; {hint}"
        super().__init__(message)
        self.field = field
        self.value = value
        self.problem = problem
        self.hint = hint


class InvalidIdError(ValidationError):
    """An id that is empty, longer than 256 characters, or holds control characters."""


class NotFoundError(MemrayError, LookupError):
    """The thing asked for does not exist."""


class ConflictError(MemrayError):
    """A write based on a stale version; re-read and retry."""

    def __init__(self, message: str, expected: int | None = None, actual: int | None = None) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class EmbeddingError(MemrayError):
    """The embedder failed after its retries. The text stays durable and is embedded later."""


class ModelMismatchError(EmbeddingError, ValueError):
    """A vector of the wrong model or dimension for an index. Re-embed with the index's model."""


class StoreError(MemrayError):
    """The history store failed."""


class DeadLetterError(StoreError):
    """Messages that were acknowledged but could not be stored (``kind="rejected"``: the store
    refused the data; ``kind="lost"``: not yet durable when the host holding them was killed).
    They are recorded in the store's dead letters with their seq, which is never reused; the
    conversation goes on. ``letters`` holds ``(app, user_id, conversation_id, id, seq, kind, error)``."""

    def __init__(self, letters: list[tuple[str, str, str, str, int, str, str]]) -> None:
        shown = "; ".join(f"{c!r}/{i!r} seq {s} {k}: {e}" for _a, _u, c, i, s, k, e in letters[:3])
        more = f" (and {len(letters) - 3} more)" if len(letters) > 3 else ""
        super().__init__(
            f"{len(letters)} acknowledged message(s) could not be stored and were recorded as dead letters: "
            f"{shown}{more}; the conversation goes on without them (see Memory.dead_letters())"
        )
        self.letters = letters

    @classmethod
    def raise_gathered(cls, results: Sequence[object]) -> None:
        """Re-raise what ``asyncio.gather(..., return_exceptions=True)`` returned for calls that
        may each report dead letters: every call's letters as one DeadLetterError, else the first
        other error; nothing if all went well."""
        letters = [x for r in results if isinstance(r, DeadLetterError) for x in r.letters]
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, DeadLetterError):
                raise r
        if letters:
            raise cls(letters)


class SummaryError(MemrayError):
    """The summariser (e.g. an LLM endpoint) failed. No history is lost; the summary is updated
    on a later turn."""


class UnavailableError(MemrayError):
    """An actor is down. ``component`` names it (e.g. ``"shard 3"``). ``waited_s``: how long
    memray waited on it before giving up (0.0: Ray said at once that it is down, e.g. while it
    restarts; more: it stayed on no node, or silent, past ``placement_timeout_s``)."""

    def __init__(self, component: str, detail: str = "", waited_s: float = 0.0) -> None:
        message = f"{component} unavailable"
        if detail:
            message += f": {detail}"
        super().__init__(message)
        self.component = component
        self.waited_s = waited_s


class Backpressure(MemrayError):
    """A host already holds ``MemoryConfig.max_unpersisted`` acknowledged messages that are not
    durable yet (``pending``), so it takes no more for now: raised at once by an ``add`` with
    ``block=False``, and by a blocking one that waited ``waited_s`` (``write_timeout_s``) without
    room. What that host was sent was not written; send it again later. ``refused`` (from
    ``add_many``, whose items go to several hosts) lists the indexes of the batch items not
    written; the others were acknowledged."""

    def __init__(self, host: int, pending: int, bound: int, waited_s: float = 0.0, refused: Sequence[int] = ()) -> None:
        waited = f" after waiting {waited_s:.1f} s" if waited_s else ""
        what = f"{len(refused)} batch items were not written (the rest were)" if refused else "nothing was written"
        super().__init__(
            f"host {host} holds {pending} acknowledged messages not yet durable (max_unpersisted={bound}){waited}; "
            f"{what}: retry later, pass block=True to wait for room, or raise max_unpersisted"
        )
        self.host = host
        self.pending = pending
        self.bound = bound
        self.waited_s = waited_s
        self.refused = list(refused)


class MissingExtraError(MemrayError, ImportError):
    """An optional dependency is missing."""

    def __init__(self, package: str, extra: str, hint: str | None = None) -> None:
        install = hint or f"pip install 'memray-agents[{extra}]'"
        super().__init__(f"{package} is not installed; install the extra: {install}")
        self.package = package
        self.extra = extra


class ClosedError(MemrayError):
    """The memory was closed (or never opened); open it again."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message or CLOSED)


#: What every call on a closed :class:`memray.Memory` says.
CLOSED = "this memray is closed (close() was called, or it never opened); open it again with memray.open(...)"
