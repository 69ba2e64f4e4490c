"""The server's front door: what every request passes before a route or MCP sees it.

Outermost first (:func:`guarded` composes them):

1. :class:`Gate` — the ``Host`` header on the allow-list (on ``/mcp`` always, on every route
   with ``--no-auth``: a DNS-rebinding page cannot reach a local server) → else 421; at most one
   credential (two different keys in one request → 400); a valid key on every route but the
   public ones, checked *before* the body is read → else 401; a JSON content type on every
   ``POST``/``PUT``/``PATCH`` (no route is form-postable) → else 415; a replica whose copy of the
   keys is stale (the key ring has not answered for ``stale_s``) accepts no key → 503; and at most
   ``max_requests_per_key`` requests of one key in flight → else 429 with ``Retry-After``, so
   one tenant cannot take every slot of a replica.
2. :class:`Deadline` — the request (its body read included) answers within ``timeout_s``, else 504.
3. :class:`BodyLimit` — the body is read here, up to ``max_bytes`` (by ``Content-Length`` or as a
   chunked body streams in), else 413 before anything parses it.

Every refusal is a problem detail (:func:`memray.server.problems.problem`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memray.server.auth import KeyCache
from memray.server.problems import problem

__all__ = ["Gate", "Deadline", "BodyLimit", "Refusal", "guarded", "refuse", "PUBLIC_PATHS", "credentials"]

#: Paths answered without a key: liveness, readiness, and the API's description.
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
_WRITES = frozenset({"POST", "PUT", "PATCH"})


async def refuse(
    send: Send,
    status: int,
    error: str,
    detail: str,
    headers: dict[str, str] | None = None,
    members: dict[str, Any] | None = None,
) -> None:
    """Answer ``status`` as a problem detail, with extra ``members`` (nothing of the request is read)."""
    body, extra = problem(status, error, detail)
    body.update(members or {})
    response = JSONResponse(
        body, status_code=status, headers={**extra, **(headers or {})}, media_type="application/problem+json"
    )
    await response({"type": "http"}, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _header(scope: Scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope["headers"] if k.lower() == name]


def _first(scope: Scope, name: bytes) -> str | None:
    return next(iter(_header(scope, name)), None)


def credentials(scope: Scope) -> set[str]:
    """Every distinct key the request carries (``Authorization: Bearer KEY``, ``X-API-Key: KEY``)."""
    found = {v.strip() for v in _header(scope, b"x-api-key") if v.strip()}
    for value in _header(scope, b"authorization"):
        scheme, _, token = value.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            found.add(token.strip())
    return found


def host_allowed(host: str | None, allowed: Iterable[str]) -> bool:
    """``host`` (a ``Host`` header, maybe with a port) is one of ``allowed``."""
    if not host:
        return False
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name.lower() in {a.lower() for a in allowed}


class Refusal(NamedTuple):
    """A request refused at the door: its status, the error it names, and why."""

    status: int
    error: str
    detail: str


@dataclass
class Gate:
    """Host, credentials, content type and per-key concurrency (see the module docstring)."""

    app: ASGIApp
    keys: KeyCache | None
    allowed_hosts: tuple[str, ...]
    max_per_key: int

    def __post_init__(self) -> None:
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        checked = self._refusal(scope) or self._principal(scope)
        if isinstance(checked, Refusal):
            return await refuse(send, *checked)
        if checked is None:  # a public path, or auth is off: one tenant, nothing to bound
            return await self.app(scope, receive, send)
        self.in_flight[checked] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[checked] -= 1
            if not self.in_flight[checked]:
                del self.in_flight[checked]

    def _refusal(self, scope: Scope) -> Refusal | None:
        """What is wrong with the request whoever sends it: its Host, its credentials, its type."""
        path: str = scope["path"]
        host = _first(scope, b"host")
        if (path == "/mcp" or self.keys is None) and not host_allowed(host, self.allowed_hosts):
            return Refusal(421, "HostNotAllowed", f"Host {host!r} is not served here (memray serve --allow-host)")
        if path in PUBLIC_PATHS:
            return None
        if len(credentials(scope)) > 1:
            return Refusal(400, "AuthError", "two different keys in one request: send one")
        if scope["method"] in _WRITES and not _is_json(scope):
            return Refusal(415, "UnsupportedMediaType", "send the body as JSON: content-type: application/json")
        return None

    def _principal(self, scope: Scope) -> str | Refusal | None:
        """The id of the request's key once it may go on (None: no key needed), or a refusal."""
        if self.keys is None or scope["path"] in PUBLIC_PATHS:
            return None
        if not self.keys.fresh:
            detail = (
                f"this replica has not heard from the key ring for over {self.keys.stale_s:g} s, so it "
                "accepts no key (a revoke might not have reached it); retry shortly"
            )
            return Refusal(503, "KeyRingUnreachable", detail)
        keys = credentials(scope)
        who = self.keys.principal(next(iter(keys))) if keys else None
        if who is None or who.key_id is None:
            detail = "unknown or revoked key" if keys else "no key: send Authorization: Bearer KEY or X-API-Key: KEY"
            return Refusal(401, "AuthError", detail)
        if self.in_flight[who.key_id] >= self.max_per_key:
            detail = (
                f"this key has {self.max_per_key} requests in flight (memray serve --max-requests-per-key): "
                "wait for one to answer"
            )
            return Refusal(429, "TooManyRequests", detail)
        return who.key_id


def _is_json(scope: Scope) -> bool:
    kind = (_first(scope, b"content-type") or "").split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


@dataclass
class Deadline:
    """504 when the request has not answered within ``timeout_s`` (its body read included)."""

    app: ASGIApp
    timeout_s: float

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            async with asyncio.timeout(self.timeout_s):
                await self.app(scope, receive, watched)
        except TimeoutError:
            if not started:
                await refuse(
                    send,
                    504,
                    "DeadlineExceeded",
                    f"no answer within {self.timeout_s:g} s (memray serve --request-timeout-s); a write "
                    "may or may not have been applied: read before retrying it",
                )


@dataclass
class BodyLimit:
    """Reads the whole body, up to ``max_bytes``, before the app runs; 413 past it."""

    app: ASGIApp
    max_bytes: int

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = _first(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await self._too_large(send, length, int(length) if length.isdigit() else None)
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                return await self._too_large(send, f"more than {self.max_bytes}", seen)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: the disconnect, when it comes
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send, size: str, value: int | None) -> None:
        """413 naming the cap and the size (a chunked body: what had arrived when it went past)."""
        detail = f"the request body is {size} bytes; the cap is {self.max_bytes} (memray serve --max-body-bytes)"
        await refuse(send, 413, "BodyTooLarge", detail, members={"cap": self.max_bytes, "value": value})


def guarded(
    app: ASGIApp,
    keys: KeyCache | None,
    *,
    allowed_hosts: tuple[str, ...],
    max_per_key: int,
    timeout_s: float,
    max_body_bytes: int,
) -> ASGIApp:
    """``app`` behind the gate, the deadline and the body limit (in that order)."""
    return Gate(Deadline(BodyLimit(app, max_body_bytes), timeout_s), keys, allowed_hosts, max_per_key)
