"""The REST API under ``/v1``, made from the operation table (:mod:`memray.server.operations`):
one route per operation, which calls the facade a library user calls after
:func:`~memray.server.auth.authorize` let it in.

Paths name what a call acts on — ``/v1/apps/{app}/users/{user_id}/...`` — and the key must
reach it (its app; its user if it is bound to one; writes only if it may write). The check runs
as a dependency, before the body is validated. A batch carries a user per item: each one is
checked. Every route that writes or deletes carries ``x-memray-write`` in the OpenAPI schema (the
security tests take the list from the schema).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request

from memray.facade.memory import Memory
from memray.server.auth import KeyCache, authorize
from memray.server.operation import Arg, Operation, Target
from memray.server.operations import OPERATIONS

__all__ = ["build_router", "NOOP_PATH"]

#: The one route that is not an operation: the floor the load benchmark measures against.
NOOP_PATH = "/v1/apps/{app}/noop"


def build_router(mem: Memory, keys: KeyCache | None, replicas: int, floor: bool = False) -> APIRouter:
    """The ``/v1`` routes over ``mem``, one per operation; ``keys`` None: no auth (``--no-auth``);
    ``floor``: also :data:`NOOP_PATH` (``ServerSettings.floor_route``, for the load benchmark)."""
    router = APIRouter()
    for op in OPERATIONS:
        router.add_api_route(
            op.route,
            _endpoint(op, mem, keys, replicas),
            methods=[op.method],
            name=op.name,
            description=op.doc,
            response_model=op.response,
            tags=[op.tag],
            openapi_extra={"x-memray-write": True} if op.write else None,
        )

    if floor:

        @router.post(NOOP_PATH, tags=["server"])
        async def noop(request: Request, app: str, body: dict[str, Any]) -> dict[str, Any]:
            """Checks the key and parses the body like every route, then does nothing: the floor
            of ``benchmarks/serve_load.py`` (the same Serve app, the same payloads)."""
            authorize(keys, request.headers, app, None, write=False)
            return {}

    return router


def _reached(op: Operation, mem: Memory, keys: KeyCache | None, replicas: int) -> Callable[..., Awaitable[Target]]:
    """The dependency that checks the key against the path's app and user (a batch's users are
    checked once its body is parsed) and says where the operation acts."""
    if op.reach == "app":

        async def app_only(app: str) -> Target:
            return Target(mem, app, replicas=replicas)

        return app_only
    if op.reach == "user":

        async def user(request: Request, app: str, user_id: str) -> Target:  # async: no thread hop
            authorize(keys, request.headers, app, [user_id], op.write)
            return Target(mem, app, user_id, replicas=replicas)

        return user

    async def conversation(request: Request, app: str, user_id: str, conversation_id: str) -> Target:
        authorize(keys, request.headers, app, [user_id], op.write)
        return Target(mem, app, user_id, conversation_id, replicas)

    return conversation


def _query(arg: Arg) -> Any:
    return Annotated[arg.type, Query(description=arg.doc, **arg.bounds)]


def _path(arg: Arg) -> Any:
    return Annotated[arg.type, Path(description=arg.doc, **arg.bounds)]


def _endpoint(op: Operation, mem: Memory, keys: KeyCache | None, replicas: int) -> Callable[..., Awaitable[Any]]:
    """The route's function: its signature (what FastAPI reads) is made from the operation's
    arguments — the path's, the query's, or one JSON body of the operation's model."""
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter("request", kw, annotation=Request),
        inspect.Parameter("target", kw, annotation=Annotated[Target, Depends(_reached(op, mem, keys, replicas))]),
        *(inspect.Parameter(a.name, kw, annotation=_path(a)) for a in op.path_args),
        *(
            inspect.Parameter(
                a.name, kw, annotation=_query(a), default=inspect.Parameter.empty if a.required else a.default
            )
            for a in op.query_args
        ),
    ]
    if op.body is not None:
        params.append(inspect.Parameter("body", kw, annotation=op.model))

    async def endpoint(request: Request, target: Target, body: Any = None, **values: Any) -> Any:
        args = body if body is not None else op.model.model_validate(values)
        if op.users is not None:
            authorize(keys, request.headers, target.app, op.users(args), op.write)
        return await op.run(target, args)

    endpoint.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    endpoint.__name__ = endpoint.__qualname__ = op.name
    endpoint.__doc__ = op.doc
    return endpoint
