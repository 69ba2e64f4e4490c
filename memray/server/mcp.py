"""memray as MCP tools (the official ``mcp`` SDK's ``MCPServer``), over Streamable HTTP at ``/mcp``
and over stdio (``memray mcp``).

The tools call the facade the REST routes call. Each checks the request's key as a REST route
does (:func:`~memray.server.auth.authorize`): the app is the key's (or the server's ``mcp_app``
when auth is off), ``user_id`` must be the key's user when it is bound to one, and a read-only
key cannot call a tool that writes or deletes. Over HTTP the endpoint is stateless (every POST
stands alone, so any replica answers it) and answers JSON; it refuses a request without a valid
key (401, :mod:`memray.server.edge`), one whose ``Origin`` is not allowed (403) and anything but a
``POST`` (405) before the SDK sees it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import Field
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memray.errors import MemrayError
from memray.facade.memory import Memory
from memray.facade.service import scope_of
from memray.models import RetrievalMode, Role, SearchRequest
from memray.models import Scope as SearchScope
from memray.server.auth import AuthError, KeyCache, authorize, presented_key
from memray.server.edge import refuse
from memray.server.limits import (
    CONTEXT_LIMIT,
    CONTEXT_SEMANTIC_LIMIT,
    DEFAULT_LIMIT,
    MAX_ID_CHARS,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
)
from memray.server.problems import of_error
from memray.server.settings import ServerSettings

__all__ = ["build_mcp", "mcp_server"]

Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
UserId = Annotated[Id, Field(description="the user whose memories these are (required)")]
ConversationId = Annotated[
    Id | None,
    Field(
        description="a conversation of that user: the tool then acts on its messages; omit it for long-term memories"
    ),
]
ProjectId = Annotated[Id | None, Field(description="a project of the user's long-term memories (optional)")]
Mode = Annotated[RetrievalMode | None, Field(description="vector, lexical or hybrid (default: the memray's)")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description=f"at most this many results (1-{MAX_LIMIT})")]
Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for, in plain words")]

INSTRUCTIONS = (
    "memray keeps what users said across conversations. Call search_memories before answering "
    "anything that may depend on the past; call add_memory to keep a durable fact or preference; "
    "get_context assembles a conversation's recent and recalled messages for a prompt."
)

#: What each tool does to the user's memories, for a client to warn before a destructive one.
READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)

log = logging.getLogger(__name__)

_Tool = TypeVar("_Tool", bound=Callable[..., Awaitable[dict[str, Any]]])


def refusals_said(tool: _Tool) -> _Tool:
    """A refusal or a memray error of ``tool`` answers as REST would say it — an ``isError`` result
    whose text is the problem's status, error and detail — and is logged as a refusal (one
    line), not as a crash with a traceback."""

    @functools.wraps(tool)
    async def answered(*args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return await tool(*args, **kwargs)
        except AuthError as exc:
            status, error, detail = exc.status, "AuthError", exc.detail
        except MemrayError as exc:
            status, body, _ = of_error(exc)
            error, detail = body["error"], body["detail"]
            if status >= 500:
                log.warning("MCP %s failed: %s: %s", tool.__name__, error, detail)
                raise ToolError(f"{status} {error}: {detail}") from None
        log.info("MCP %s refused: %s %s: %s", tool.__name__, status, error, detail)
        raise ToolError(f"{status} {error}: {detail}") from None

    return answered  # type: ignore[return-value]  # the same signature: the SDK reads it through __wrapped__


def mcp_server(mem: Memory, keys: KeyCache | None, default_app: str) -> MCPServer:
    """The tools over ``mem``. ``keys`` None: no key checks (stdio, or ``--no-auth``)."""
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

    @server.tool(annotations=ADDS)
    @refusals_said
    async def add_memory(
        user_id: UserId,
        content: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS, description="the text to remember")],
        ctx: Context,
        conversation_id: ConversationId = None,
        role: Annotated[Role, Field(description="with conversation_id: who said it")] = "user",
        project_id: ProjectId = None,
        durable: Annotated[
            bool, Field(description="with conversation_id: answer only once the store committed it")
        ] = False,
    ) -> dict[str, Any]:
        """Remember something. With conversation_id, append it to that conversation as a message
        (returns its seq); without, store it as a long-term memory of the user (returns its id).
        A full write buffer refuses the add (429: retry shortly) rather than waiting."""
        app = app_for(ctx, user_id, write=True)
        if conversation_id is not None:
            conversation = mem.conversation(user_id, conversation_id, app)
            seqs = await conversation.aadd({"role": role, "content": content}, durable=durable, block=False)
            return {"seqs": seqs, "durable": durable, "in_context": True}
        ids = await scope_of(mem.memory_service, project_id).aadd_entries(app, user_id, [{"content": content}])
        return {"ids": ids, "durable": True, "searchable": True}

    @server.tool(annotations=READS)
    @refusals_said
    async def search_memories(
        user_id: UserId,
        query: Query,
        ctx: Context,
        conversation_id: ConversationId = None,
        limit: Limit = DEFAULT_LIMIT,
        min_score: Annotated[float | None, Field(ge=0, le=1, description="only results scoring this or more")] = None,
        project_id: ProjectId = None,
        mode: Mode = None,
        scope: Annotated[
            SearchScope, Field(description="with conversation_id: that conversation, or all the user's (user)")
        ] = "conversation",
    ) -> dict[str, Any]:
        """Find the memories relevant to query, best first, each with a score in [0, 1]. With
        conversation_id, search that conversation's messages (scope=user: every conversation of
        the user); else the user's long-term memories (global ones, plus project_id's when
        given). Nothing relevant: an empty list."""
        app = app_for(ctx, user_id, write=False)
        if conversation_id is not None:
            conversation = mem.conversation(user_id, conversation_id, app)
            hits = await conversation.asearch(query, limit, min_score, mode, scope)
            found = [
                {"id": h.message.id, "seq": h.message.seq, "text": h.message.text, "score": h.score,
                 "conversation_id": h.conversation_id}
                for h in hits
            ]  # fmt: skip
            return {"results": found, "degraded": hits.degraded}
        request = SearchRequest(
            query=query,
            user_id=user_id,
            app_name=app,
            limit=limit,
            min_score=min_score,
            project_id=project_id,
            mode=mode,
        )
        response = await mem.memory_service.asearch(request)
        memories = [{"id": r.entry.id, "text": r.entry.text, "score": r.score} for r in response.memories]
        return {"results": memories, "degraded": response.degraded}

    @server.tool(annotations=READS)
    @refusals_said
    async def get_context(
        user_id: UserId,
        conversation_id: Annotated[Id, Field(description="the conversation to build a prompt for")],
        ctx: Context,
        query: Annotated[
            str | None,
            Field(max_length=MAX_QUERY_CHARS, description="the next question, to recall older messages about it"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="recent messages to include")] = CONTEXT_LIMIT,
        semantic_limit: Annotated[
            int, Field(ge=0, le=MAX_LIMIT, description="older relevant messages to recall")
        ] = CONTEXT_SEMANTIC_LIMIT,
    ) -> dict[str, Any]:
        """What the next prompt of a conversation needs: its recent messages, older ones relevant
        to query, its summary and its working memory."""
        app = app_for(ctx, user_id, write=False)
        context = await mem.conversation(user_id, conversation_id, app).acontext(query, limit, semantic_limit)
        return context.model_dump(mode="json")

    @server.tool(annotations=READS)
    @refusals_said
    async def list_memories(
        user_id: UserId,
        ctx: Context,
        conversation_id: ConversationId = None,
        project_id: ProjectId = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, description="at most this many, the newest")] = 20,
    ) -> dict[str, Any]:
        """List memories, newest last for a conversation's messages, newest first for long-term
        memories (global ones, or project_id's alone)."""
        app = app_for(ctx, user_id, write=False)
        if conversation_id is not None:
            messages = await mem.conversation(user_id, conversation_id, app).amessages(limit)
            return {"memories": [{"id": x.id, "seq": x.seq, "role": x.role, "text": x.text} for x in messages]}
        entries = await scope_of(mem.memory_service, project_id).alist_entries(app, user_id, limit=limit)
        return {"memories": [{"id": r.entry.id, "text": r.entry.text, "project_id": r.project_id} for r in entries]}

    @server.tool(annotations=DELETES)
    @refusals_said
    async def delete_memory(
        user_id: UserId,
        memory_id: Annotated[Id, Field(description="the id search_memories or list_memories gave")],
        ctx: Context,
        conversation_id: ConversationId = None,
    ) -> dict[str, Any]:
        """Delete one memory: a message of conversation_id, or a long-term memory of the user."""
        app = app_for(ctx, user_id, write=True)
        if conversation_id is not None:
            return {"deleted": await mem.conversation(user_id, conversation_id, app).adelete_messages([memory_id])}
        return {"deleted": await mem.memory_service.adelete_entries(app, user_id, ids=[memory_id])}

    @server.tool(annotations=DELETES)
    @refusals_said
    async def delete_all_memories(
        user_id: UserId, ctx: Context, conversation_id: ConversationId = None, project_id: ProjectId = None
    ) -> dict[str, Any]:
        """Delete many memories at once. With conversation_id: every message of that conversation;
        with project_id: every long-term memory of that project; with neither: EVERYTHING memray
        holds about the user, and the API keys bound to them (an erasure, with a receipt of what
        was removed). Cannot be undone."""
        app = app_for(ctx, user_id, write=True)
        if conversation_id is not None:
            return {"deleted": await mem.conversation(user_id, conversation_id, app).aclear()}
        if project_id is not None:
            return {
                "deleted": await mem.memory_service.for_project(project_id).adelete_entries(
                    app, user_id, everything=True
                )
            }
        receipt = await mem.adelete_user(app=app, user_id=user_id)
        return {"deleted": receipt.counts}

    return server


def build_mcp(
    mem: Memory, keys: KeyCache | None, settings: ServerSettings
) -> tuple[Route, Callable[[], AbstractAsyncContextManager[None]]]:
    """The ``/mcp`` route (Streamable HTTP, stateless, JSON answers) and the context its session
    manager runs in (entered by the app's lifespan)."""
    server = mcp_server(mem, keys, settings.mcp_app)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # Origin: checked below
    server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.max_body_bytes,
        transport_security=security,
    )
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

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
