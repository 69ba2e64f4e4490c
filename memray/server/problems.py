"""memray's errors as HTTP answers: RFC 9457 problem details naming the memray error and the field.

==========================  =====  ==================================================
``ValidationError``         422    ``field`` names the field; nothing was written
``NotFoundError``           404
``ConflictError``           409    a stale ``expected_version``: re-read, retry
``Backpressure``            429    ``Retry-After``: nothing was written, or (a batch) not the items of ``refused``
``DeadLetterError``         500    ``dead_letters``: every acknowledged message lost (not a retry signal)
``UnavailableError``        503    ``Retry-After``: an actor is down (it is restarted)
``StoreError``              503    the store failed or is unreachable
``EmbeddingError``          503
``ClosedError``             503    the server is stopping
any other ``MemrayError``   500
==========================  =====  ==================================================
"""

from __future__ import annotations

from typing import Any

from memray.errors import (
    Backpressure,
    ClosedError,
    ConflictError,
    DeadLetterError,
    EmbeddingError,
    MemrayError,
    NotFoundError,
    StoreError,
    UnavailableError,
    ValidationError,
)

__all__ = ["problem", "status_of", "of_error", "invalid", "RETRY_AFTER_S"]

#: What ``Retry-After`` says on 429 and 503 (seconds): about one persist cycle, or an actor restart.
RETRY_AFTER_S = {429: 1, 503: 2}

_STATUS: list[tuple[type[MemrayError], int]] = [
    (ValidationError, 422),
    (NotFoundError, 404),
    (ConflictError, 409),
    (Backpressure, 429),
    (UnavailableError, 503),
    (DeadLetterError, 500),  # (a StoreError, but no retry brings the messages back: not 503)
    (StoreError, 503),
    (EmbeddingError, 503),
    (ClosedError, 503),
]

_TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 413: "Content Too Large", 415: "Unsupported Media Type", 421: "Misdirected Request",
           422: "Unprocessable Content", 429: "Too Many Requests", 500: "Internal Server Error",
           503: "Service Unavailable", 504: "Gateway Timeout"}  # fmt: skip


def status_of(exc: MemrayError) -> int:
    return next((status for cls, status in _STATUS if isinstance(exc, cls)), 500)


def problem(status: int, error: str, detail: str, field: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of a problem answer."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "error": error,
        "field": field,
    }
    headers = {"Retry-After": str(RETRY_AFTER_S[status])} if status in RETRY_AFTER_S else {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="memray"'
    return body, headers


def of_error(exc: MemrayError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers for a memray error."""
    status = status_of(exc)
    field = exc.field if isinstance(exc, ValidationError) else None
    body, headers = problem(status, type(exc).__name__, str(exc), field)
    if isinstance(exc, Backpressure) and exc.refused:
        body["refused"] = exc.refused  # a batch: these items were not written, the others were
    if isinstance(exc, DeadLetterError):  # each one, not the first three of the detail
        body["dead_letters"] = [
            {"conversation_id": c, "id": i, "seq": s, "kind": k, "error": e} for _a, _u, c, i, s, k, e in exc.letters
        ]
    return status, body, headers


#: The pydantic error context keys that name a cap: on a length, or on a number.
_LENGTH_CAPS = ("max_length", "min_length")
_NUMBER_CAPS = ("le", "lt", "ge", "gt")


def invalid(errors: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """A 422 naming the first field at fault (``body.messages.0.role``), what is wrong and, for a
    value past a bound, the cap and the value (a length, for a text or a list)."""
    first: dict[str, Any] = list(errors)[0] if errors else {"loc": (), "msg": "invalid request"}
    where = ".".join(str(p) for p in first.get("loc", ()))
    detail = f"invalid {where}: {first.get('msg')}" if where else str(first.get("msg"))
    bound = _bound(first)
    if bound is None:
        return problem(422, "ValidationError", detail, where or None)
    cap, value, length = bound
    said = f"{value} long" if length else f"{value}"
    detail = f"invalid {where}: {first.get('msg')} (the cap is {cap}, this is {said}; docs/server.md lists every cap)"
    body, headers = problem(422, "ValidationError", detail, where or None)
    body.update(cap=cap, value=value)
    return body, headers


def _bound(error: dict[str, Any]) -> tuple[Any, Any, bool] | None:
    """(cap, value, whether the value is a length) of an error on a bound; None for another error."""
    context: dict[str, Any] = error.get("ctx") or {}
    given = error.get("input")
    for key in _LENGTH_CAPS:
        if key in context and isinstance(given, (str, list, dict)):
            return context[key], len(given), True
    for key in _NUMBER_CAPS:
        if key in context:
            try:
                value = given if isinstance(given, (int, float)) else float(str(given))
            except (TypeError, ValueError):
                return None
            return context[key], int(value) if float(value).is_integer() else value, False
    return None
