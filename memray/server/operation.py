"""The shape of the server's operation table (:mod:`memray.server.operations`): what one
operation declares, and what REST and MCP derive from the declaration.

An :class:`Operation` is one thing the server does — add messages, search, erase a user. It
declares, once: its arguments (:class:`Arg`: type, default, bounds, description), what it
reaches (a conversation, a user, or a whole app for the batch forms), whether it reads, writes
or deletes, its REST method and path, and the facade call it makes (``run``). From that:

- the REST route (:func:`memray.server.routes.build_router`): the path, the key check with the
  route's app and user and the write flag, the query parameters or the JSON body — a pydantic
  model made here (:attr:`Operation.model`) whose schema states every bound — and
  ``x-memray-write`` in the OpenAPI schema;
- the MCP tools (:class:`Tool`, :mod:`memray.server.mcp`): a tool routes to one operation or
  another by which id it is given (``conversation_id``: a conversation's messages; else the
  user's long-term memories), takes the union of their arguments with the same types, defaults
  and bounds, and its annotations (``readOnlyHint``, ``destructiveHint``) follow from what its
  operations do;
- the REST and MCP reference in ``docs/server.md`` (:mod:`memray.server.reference`).

Adding an operation is one declaration in the table.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from memray.facade.conversation import ConversationHandle
from memray.facade.memory import Memory
from memray.facade.service import MemoryServiceHandle
from memray.server.limits import MAX_ID_CHARS

__all__ = [
    "REQUIRED",
    "Arg",
    "Effect",
    "Reach",
    "Target",
    "Operation",
    "Branch",
    "Tool",
    "ArgsModel",
    "PREFIX",
]

#: The default of an argument a caller must give.
REQUIRED: Any = ...

#: What an operation does to the memories: a read-only key may call only ``read`` ones; MCP
#: marks ``delete`` ones ``destructiveHint`` (a client can ask before calling them).
Effect = Literal["read", "write", "delete"]
#: What an operation acts on, named by its path: one conversation of one user, one user (their
#: conversations and long-term entries), or one app (a batch: each item names its user).
Reach = Literal["conversation", "user", "app"]

#: The REST path of each reach (under ``/v1``); an operation's ``path`` follows it.
PREFIX: dict[Reach, str] = {
    "app": "/apps/{app}",
    "user": "/apps/{app}/users/{user_id}",
    "conversation": "/apps/{app}/users/{user_id}/conversations/{conversation_id}",
}

_BOUNDS = ("ge", "le", "min_length", "max_length")


@dataclass(frozen=True)
class Arg:
    """One argument of an operation: ``type`` (what pydantic checks: an id type or an enum
    carries its own rules), ``default`` (:data:`REQUIRED`: none), ``doc`` and the bounds the
    schemas state (``ge``/``le`` on a number, ``min_length``/``max_length`` on a text or list)."""

    name: str
    type: Any
    default: Any = REQUIRED
    doc: str | None = None
    ge: float | None = None
    le: float | None = None
    min_length: int | None = None
    max_length: int | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def bounds(self) -> dict[str, Any]:
        """The bounds it declares, as pydantic's and FastAPI's keyword arguments."""
        found = {k: getattr(self, k) for k in _BOUNDS}
        return {k: v for k, v in found.items() if v is not None}

    def field(self) -> Any:
        """Its pydantic field (the default, the description, the bounds)."""
        return Field(self.default, description=self.doc, **self.bounds)

    def annotated(self) -> Any:
        """Its type, with its description and bounds (for a function's signature: its default apart)."""
        return Annotated[self.type, Field(description=self.doc, **self.bounds)]


class ArgsModel(BaseModel):
    """The arguments of an operation, checked: a field the operation does not declare is refused."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Target:
    """Where an operation acts, once the key was checked: the app, the user (None for an app's
    batch: each item names its own) and the conversation (for a conversation's operation)."""

    mem: Memory
    app: str
    user_id: str | None = None
    conversation_id: str | None = None
    replicas: int = 1

    def conversation(self) -> ConversationHandle:
        assert self.user_id is not None and self.conversation_id is not None, "not a conversation's operation"
        return self.mem.conversation(self.user_id, self.conversation_id, self.app)

    @property
    def user(self) -> str:
        assert self.user_id is not None, "not a user's operation"
        return self.user_id

    @property
    def service(self) -> MemoryServiceHandle:
        return self.mem.memory_service


#: The facade call of an operation: where it acts, its checked arguments (an :attr:`Operation.model`).
Run = Callable[[Target, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Operation:
    """One operation of the server (see the module docstring).

    ``path`` follows the reach's prefix (:data:`PREFIX`); an argument named in it (``{project_id}``)
    is a path parameter. ``body``: the name of the JSON body's model (its arguments travel in
    it); None: they travel in the query string. ``users``: for an app's batch, the users its
    items act on (each one is checked against the key). ``response``: the answer's model (its
    OpenAPI schema), None for a plain object."""

    name: str
    doc: str
    reach: Reach
    effect: Effect
    method: Literal["GET", "POST", "PUT", "DELETE"]
    path: str
    run: Run
    args: tuple[Arg, ...] = ()
    body: str | None = None
    response: Any = None
    users: Callable[[Any], list[str]] | None = None
    tag: str = "conversations"

    @property
    def write(self) -> bool:
        """A read-only key may not call it."""
        return self.effect != "read"

    @property
    def route(self) -> str:
        """Its REST path, under ``/v1``."""
        return "/v1" + PREFIX[self.reach] + self.path

    @property
    def path_args(self) -> tuple[Arg, ...]:
        """Its arguments named in its path (beyond the reach's own ids)."""
        named = set(re.findall(r"{(\w+)}", self.path))
        return tuple(a for a in self.args if a.name in named)

    @property
    def query_args(self) -> tuple[Arg, ...]:
        """Its arguments in the query string (none when it takes a body)."""
        return () if self.body is not None else tuple(a for a in self.args if a not in self.path_args)

    @cached_property
    def model(self) -> type[ArgsModel]:
        """Its arguments as one pydantic model: the JSON body's (named ``body``) or, for an
        operation without a body, the record its query and path parameters are checked into."""
        name = self.body or "".join(part.title() for part in self.name.split("_")) + "Args"
        fields: dict[str, Any] = {a.name: (a.type, a.field()) for a in self.args}
        return create_model(name, __base__=ArgsModel, __doc__=self.doc, **fields)

    def __post_init__(self) -> None:
        assert self.body is None or not self.path_args, f"{self.name}: a body, or path arguments, not both"
        assert (self.users is not None) == (self.reach == "app"), f"{self.name}: an app's batch names its users"


def _same(arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments


def _dumped(result: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(mode="json")
    return dumped


@dataclass(frozen=True)
class Branch:
    """One operation a tool may call: when ``when`` (one of the tool's arguments) is given, or
    always (``when`` None: the last branch). ``shape`` turns the tool's arguments into the
    operation's (for arguments the tool takes in its own form: one ``content`` for a list of
    messages); ``answer`` turns the operation's answer into the tool's (short, for a model to read)."""

    operation: Operation
    when: str | None = None
    shape: Callable[[dict[str, Any]], dict[str, Any]] = _same
    answer: Callable[[Any], dict[str, Any]] = _dumped


#: The ids a tool takes to say what it acts on (the app is the key's).
USER_ID = Arg("user_id", str, doc="the user whose memories these are (required)", min_length=1, max_length=MAX_ID_CHARS)
CONVERSATION_ID_DOC = "a conversation of that user: the tool then acts on its messages; omit it for long-term memories"


@dataclass(frozen=True)
class Tool:
    """An MCP tool over one or more operations (see the module docstring). Its arguments:
    ``user_id``; ``conversation_id`` when an operation acts on a conversation (required when
    every one does); then each operation's arguments, the first declaration of a name winning,
    less ``hidden`` (filled by a branch's ``shape`` from the tool's ``extra`` arguments), with
    ``defaults`` where the tool's default differs (said in the reference). An argument not
    every operation requires is optional (None: not given); one whose operations default it
    differently defaults to None, which leaves each operation its own default."""

    name: str
    doc: str
    branches: tuple[Branch, ...]
    extra: tuple[Arg, ...] = ()
    hidden: frozenset[str] = frozenset()
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def operations(self) -> tuple[Operation, ...]:
        return tuple(b.operation for b in self.branches)

    @property
    def effect(self) -> Effect:
        """``read`` when every operation reads, ``delete`` when one deletes, else ``write``."""
        effects = {op.effect for op in self.operations}
        return "read" if effects == {"read"} else "delete" if "delete" in effects else "write"

    @property
    def args(self) -> tuple[Arg, ...]:
        ops = self.operations
        found: dict[str, Arg] = {"user_id": USER_ID}
        if any(op.reach == "conversation" for op in ops):
            every = all(op.reach == "conversation" for op in ops)
            found["conversation_id"] = Arg(
                "conversation_id",
                str if every else str | None,
                REQUIRED if every else None,
                "the conversation" if every else CONVERSATION_ID_DOC,
                min_length=1,
                max_length=MAX_ID_CHARS,
            )
        for arg in self.extra:
            found[arg.name] = arg
        for op in ops:
            for arg in op.args:
                if arg.name not in found and arg.name not in self.hidden:
                    found[arg.name] = self._merged([a for o in ops for a in o.args if a.name == arg.name])
        return tuple(
            replace(a, default=self.defaults[a.name]) if a.name in self.defaults else a for a in found.values()
        )

    def _merged(self, declared: list[Arg]) -> Arg:
        """One argument as the tool takes it, from its declarations in the tool's operations: as
        the first declares it, but optional (None) where not every operation requires it, and
        None — each operation's own default — where their defaults differ."""
        arg = declared[0]
        required = arg.required and len(declared) == len(self.branches) and all(a.required for a in declared)
        if arg.required and not required:
            return replace(arg, type=arg.type | None, default=None)
        if len({repr(a.default) for a in declared}) > 1:
            doc = f"{arg.doc} (left out: each operation's own default)"
            return replace(arg, type=arg.type | None, default=None, doc=doc)
        return arg

    def branch_for(self, arguments: Mapping[str, Any]) -> Branch:
        """The branch a call takes: the first whose ``when`` argument is given."""
        return next(b for b in self.branches if b.when is None or arguments.get(b.when) is not None)

    def __post_init__(self) -> None:
        assert self.branches and self.branches[-1].when is None, f"{self.name}: the last branch takes every call"
