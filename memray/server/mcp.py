"""memray as MCP tools (the official ``mcp`` SDK's ``MCPServer``), over Streamable HTTP at ``/mcp``
and over stdio (``memray mcp``).

The tools are made from the operation table (:data:`memray.server.operations.TOOLS`): a tool's
input schema is its operations' arguments, with the types, defaults and bounds REST states, and its
annotations follow from what they do (``readOnlyHint``; ``destructiveHint`` for a delete). A tool
calls the operation a REST route calls, so it calls the same facade. Each checks the request's key as a REST route
does (:func:`~memray.server.auth.authorize`): the app is the key's (or the server's ``mcp_app``
when auth is off), ``user_id`` must be the key's user when it is bound to one, and a read-only
key cannot call a tool that writes or deletes. Over HTTP the endpoint is stateless (every POST
stands alone, so any replica answers it) and answers JSON; it refuses a request without a valid
key (401, :mod:`memray.server.edge`), one whose ``Origin`` is not allowed (403) and anything but a
``POST`` (405) before the SDK sees it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pydantic
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memray.errors import MemrayError
from memray.facade.memory import Memory
from memray.server.auth import AuthError, KeyCache, authorize, presented_key
from memray.server.edge import refuse
from memray.server.operation import Arg, Effect, Target, Tool
from memray.server.operations import TOOLS
from memray.server.problems import invalid, of_error
from memray.server.settings import ServerSettings

__all__ = ["build_mcp", "mcp_server"]

INSTRUCTIONS = (
    "memray keeps what users said across conversations. Call search_memories before answering "
    "anything that may depend on the past; call add_memory to keep a durable fact or preference; "
    "get_context assembles a conversation's recent and recalled messages for a prompt."
)

#: What a tool does to the user's memories, for a client to warn before a destructive one:
#: derived from what its operations do (:attr:`memray.server.operation.Tool.effect`).
ANNOTATIONS: dict[Effect, ToolAnnotations] = {
    "read": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "write": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    ),
    "delete": ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
}

log = logging.getLogger(__name__)


def said(name: str, exc: Exception) -> ToolError:
    """A refusal or a memray error of tool ``name`` as REST would say it — an ``isError`` result
    whose text is the problem's status, error and detail — logged as a refusal (one line), not as
    a crash with a traceback (a server-side failure: a warning)."""
    if isinstance(exc, AuthError):
        status, error, detail = exc.status, "AuthError", exc.detail
    elif isinstance(exc, pydantic.ValidationError):
        body, _ = invalid(exc.errors())
        status, error, detail = 422, body["error"], body["detail"]
    else:
        assert isinstance(exc, MemrayError)
        status, body, _ = of_error(exc)
        error, detail = body["error"], body["detail"]
    if status >= 500:
        log.warning("MCP %s failed: %s: %s", name, error, detail)
    else:
        log.info("MCP %s refused: %s %s: %s", name, status, error, detail)
    return ToolError(f"{status} {error}: {detail}")


def mcp_server(mem: Memory, keys: KeyCache | None, default_app: str, replicas: int = 1) -> MCPServer:
    """The tools of the table (:data:`memray.server.operations.TOOLS`) over ``mem``. ``keys``
    None: no key checks (stdio, or ``--no-auth``)."""
    server = MCPServer("memray", instructions=INSTRUCTIONS)

    def app_for(ctx: Context, user_id: str, write: bool) -> str:
        """The app the call acts on, once the key may reach ``user_id`` there (else AuthError)."""
        if keys is None:
            return default_app
        headers = ctx.headers or {}
        who = keys.principal(presented_key(headers) or "")
        app = who.app if who is not None and who.app is not None else default_app
        authorize(keys, headers, app, [user_id], write)
        return app

    async def call(tool: Tool, ctx: Context, arguments: dict[str, Any]) -> dict[str, Any]:
        branch = tool.branch_for(arguments)
        op = branch.operation
        app = app_for(ctx, arguments["user_id"], op.write)
        target = Target(mem, app, arguments["user_id"], arguments.get("conversation_id"), replicas)
        given = branch.shape(arguments)
        # the operation's arguments the call gave (None where the operation defaults otherwise: not given)
        values = {
            a.name: given[a.name]
            for a in op.args
            if a.name in given and (given[a.name] is not None or a.default is None)
        }
        return branch.answer(await op.run(target, op.model.model_validate(values)))

    for tool in TOOLS:
        server.add_tool(
            tool_function(tool, call), name=tool.name, description=tool.doc, annotations=ANNOTATIONS[tool.effect]
        )
    return server


Call = Callable[[Tool, Context, dict[str, Any]], Awaitable[dict[str, Any]]]


def _default(arg: Arg) -> Any:
    return inspect.Parameter.empty if arg.required else arg.default


def tool_function(tool: Tool, call: Call) -> Callable[..., Awaitable[dict[str, Any]]]:
    """The function the SDK registers for ``tool``: its signature (what the SDK makes the input
    schema from) is the tool's arguments with their types, defaults and bounds; it calls ``call``
    and answers a refusal as :func:`said` says it."""
    kw = inspect.Parameter.KEYWORD_ONLY
    annotations: dict[str, Any] = {a.name: a.annotated() for a in tool.args}
    params = [inspect.Parameter(a.name, kw, annotation=annotations[a.name], default=_default(a)) for a in tool.args]
    params.append(inspect.Parameter("ctx", kw, annotation=Context))

    async def run(ctx: Context, **arguments: Any) -> dict[str, Any]:
        try:
            return await call(tool, ctx, arguments)
        except (AuthError, MemrayError, pydantic.ValidationError) as exc:
            raise said(tool.name, exc) from None

    run.__signature__ = inspect.Signature(params, return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    run.__annotations__ = {**annotations, "ctx": Context, "return": dict[str, Any]}
    run.__name__ = run.__qualname__ = tool.name
    run.__doc__ = tool.doc
    return run


def build_mcp(
    mem: Memory, keys: KeyCache | None, settings: ServerSettings
) -> tuple[Route, Callable[[], AbstractAsyncContextManager[None]]]:
    """The ``/mcp`` route (Streamable HTTP, stateless, JSON answers) and the context its session
    manager runs in (entered by the app's lifespan)."""
    server = mcp_server(mem, keys, settings.mcp_app, settings.replicas)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # Origin: checked below
    server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.max_body_bytes,
        transport_security=security,
    )

    guarded = Guard(StreamableHTTPASGIApp(server.session_manager), settings.allowed_origins)
    return Route("/mcp", endpoint=guarded), server.session_manager.run  # every method: the Guard answers


class Guard:
    """Before the MCP app: 405 for anything but ``POST`` (a stateless server has no stream to
    offer on ``GET`` and no session to end on ``DELETE``; the spec allows the 405, and no idle
    stream then holds a replica's slot), and 403 for an ``Origin`` not allowed (a browser page on
    another site: the DNS-rebinding attack the MCP spec warns about). The key and the ``Host``
    were checked in front of every route (:class:`memray.server.edge.Gate`)."""

    def __init__(self, app: ASGIApp, origins: tuple[str, ...]) -> None:
        self.app = app
        self.origins = origins

    def _origin_allowed(self, origin: str) -> bool:
        return any(origin == o or origin.startswith(o + ":") for o in self.origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            detail = f"{scope['method']} /mcp: this server is stateless and answers POST only (no SSE stream)"
            return await refuse(send, 405, "MethodNotAllowed", detail, {"Allow": "POST"})
        origin = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"origin"), None)
        if origin and not self._origin_allowed(origin):
            detail = f"Origin {origin!r} is not allowed (memray serve --allow-origin)"
            return await refuse(send, 403, "AuthError", detail)
        await self.app(scope, receive, send)
