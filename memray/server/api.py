"""The server's ASGI app: the ``/v1`` routes, MCP at ``/mcp``, health, readiness, metrics.

Around every request: the front door of :mod:`memray.server.edge` (Host, credentials, content
type, per-key concurrency, deadline, body limit), and one ASGI layer that records the request's
metrics and — only when tracing is on — opens its server span under the caller's ``traceparent``.
memray's errors become problem details (:mod:`memray.server.problems`); so do auth refusals,
malformed bodies and Starlette's own 404 and 405.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pydantic
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memray import __version__, metrics, tracing
from memray.errors import MemrayError
from memray.facade.memory import Memory
from memray.server.auth import AuthError, KeyCache
from memray.server.edge import guarded
from memray.server.problems import invalid, of_error, problem
from memray.server.prometheus import render
from memray.server.routes import build_router
from memray.server.settings import ServerSettings
from memray.tracing import state as _tracing

__all__ = ["ServerSettings", "build_app", "HTTP_REQUESTS", "HTTP_SECONDS"]

HTTP_REQUESTS = metrics.Counter("memray_http_requests_total", "HTTP requests answered", ("route", "status"))
HTTP_SECONDS = metrics.Histogram(
    "memray_http_request_seconds", "HTTP request latency in the replica", metrics.LATENCY_BOUNDARIES_S, ("route",)
)


def build_app(mem: Memory, keys: KeyCache | None, settings: ServerSettings) -> ASGIApp:
    """The whole app over an open memray ``mem``; ``keys`` None: no auth."""
    from memray.server.mcp import build_mcp  # the MCP SDK: 520 ms (python -X importtime), paid by the app only

    mcp_app, mcp_lifespan = build_mcp(mem, keys, settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if keys is not None:
                await keys.start()
                stack.push_async_callback(keys.stop)
            await stack.enter_async_context(mcp_lifespan())
            yield

    app = FastAPI(
        title="memray",
        version=__version__,
        description="Conversation and long-term memory for AI agents: REST under /v1, MCP at /mcp.",
        lifespan=lifespan,
    )
    app.include_router(build_router(mem, keys, settings.replicas, settings.floor_route))
    _install_errors(app)

    @app.get("/healthz", tags=["server"])
    async def healthz() -> dict[str, str]:
        """Alive (no key needed)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["server"])
    async def readyz() -> JSONResponse:
        """Ready to serve: the memray is open and the keys are loaded (no key needed)."""
        ready = not mem.closed
        return JSONResponse({"status": "ready" if ready else "closed"}, status_code=200 if ready else 503)

    @app.get("/metrics", tags=["server"], response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        """This replica's metrics, Prometheus text format (a key of any app, or none with --no-auth)."""
        return PlainTextResponse(render(metrics.snapshot()), media_type="text/plain; version=0.0.4")

    app.router.routes.append(mcp_app)
    front = guarded(
        app,
        keys,
        allowed_hosts=settings.allowed_hosts,
        max_per_key=settings.max_requests_per_key,
        timeout_s=settings.request_timeout_s,
        max_body_bytes=settings.max_body_bytes,
    )
    return Observed(front)


def _install_errors(app: FastAPI) -> None:
    def answer(status: int, body: dict[str, Any], headers: dict[str, str]) -> JSONResponse:
        return JSONResponse(body, status_code=status, headers=headers, media_type="application/problem+json")

    @app.exception_handler(MemrayError)
    async def memray_error(_: Request, exc: MemrayError) -> JSONResponse:
        return answer(*of_error(exc))

    @app.exception_handler(AuthError)
    async def auth_error(_: Request, exc: AuthError) -> JSONResponse:
        return answer(exc.status, *problem(exc.status, "AuthError", exc.detail))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        body, headers = problem(exc.status_code, "HTTPError", str(exc.detail))
        return answer(exc.status_code, body, {**(exc.headers or {}), **headers})

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        return answer(422, *invalid(exc.errors()))

    @app.exception_handler(pydantic.ValidationError)
    async def bad_model(_: Request, exc: pydantic.ValidationError) -> JSONResponse:
        return answer(422, *invalid(exc.errors()))


class Observed:
    """Each request's metrics, and its span when tracing is on (one flag read when it is off)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        status = [500]

        async def sent(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            if _tracing.on:
                await self._traced(scope, receive, sent)
            else:
                await self.app(scope, receive, sent)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            HTTP_REQUESTS.inc(tags={"route": path, "status": str(status[0])})
            HTTP_SECONDS.observe(time.perf_counter() - t0, tags={"route": path})

    async def _traced(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        name = f"{scope['method']} {scope['path']}"
        with tracing.attached(headers), tracing.span(name, {"http.request.method": scope["method"]}, "server") as s:
            try:
                await self.app(scope, receive, send)
            finally:
                route = scope.get("route")
                if route is not None:
                    s.update_name(f"{scope['method']} {route.path}")
                params = scope.get("path_params") or {}
                for key in ("app", "conversation_id", "project_id"):
                    if key in params:
                        s.set_attribute(f"memray.{key}", params[key])
                s.set_attribute("http.request.body.size", int(headers.get("content-length") or 0))
