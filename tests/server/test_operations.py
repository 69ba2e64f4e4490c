"""The operation table (memray/server/operations.py) is the one declaration REST, MCP, the facade's
defaults and the reference in docs/server.md follow: each is checked against it here, without a
server (the routes and tools are built over no memray; nothing is called)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from typing import Any

import pytest
from fastapi import FastAPI

from memray.facade.conversation import ContextCall, ConversationHandle, SearchCall
from memray.server import operations as ops
from memray.server import routes as routes_module
from memray.server.mcp import ANNOTATIONS, mcp_server
from memray.server.operation import REQUIRED, Arg, Branch, Operation, Target, Tool
from memray.server.reference import PAGE, rewrite
from memray.server.routes import NOOP_PATH, build_router


def openapi() -> dict[str, Any]:
    app = FastAPI()
    app.include_router(build_router(None, None, 1))  # type: ignore[arg-type]  # routes are built, never called
    schema: dict[str, Any] = app.openapi()
    return schema


def listed_tools() -> dict[str, Any]:
    server = mcp_server(None, None, "default")  # type: ignore[arg-type]
    return {t.name: t for t in asyncio.run(server.list_tools())}


def test_every_route_is_an_operation_with_its_arguments_and_write_flag() -> None:
    schema = openapi()
    found = {(method.upper(), path): op for path, item in schema["paths"].items() for method, op in item.items()}
    assert set(found) == {(o.method, o.route) for o in ops.OPERATIONS} | {("POST", NOOP_PATH)}
    components = schema["components"]["schemas"]
    for o in ops.OPERATIONS:
        route = found[(o.method, o.route)]
        assert bool(route.get("x-memray-write")) == o.write, o.name
        if o.body is not None:
            ref = route["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            stated = components[ref.rsplit("/", 1)[1]]["properties"]
        else:
            stated = {p["name"]: p["schema"] for p in route.get("parameters", [])}
        for arg in o.args:
            said = stated[arg.name]
            if not arg.required:
                assert said.get("default") == arg.default, (o.name, arg.name)
            bounds = {"ge": "minimum", "le": "maximum", "min_length": ("minLength", "minItems"),
                      "max_length": ("maxLength", "maxItems")}  # fmt: skip
            text = str(said)
            for name, value in arg.bounds.items():
                keys = bounds[name] if isinstance(bounds[name], tuple) else (bounds[name],)
                assert any(f"'{k}': {value}" in text for k in keys), (o.name, arg.name, name, said)


def test_every_tool_takes_its_operations_arguments_with_their_defaults_and_bounds() -> None:
    tools = listed_tools()
    assert set(tools) == {t.name for t in ops.TOOLS}
    for tool in ops.TOOLS:
        listed = tools[tool.name]
        assert listed.annotations == ANNOTATIONS[tool.effect]
        properties = listed.input_schema["properties"]
        assert set(properties) == {a.name for a in tool.args}
        assert set(listed.input_schema["required"]) == {a.name for a in tool.args if a.required}
        first: dict[str, Arg] = {}
        for op in tool.operations:  # every argument of an operation reaches the tool, or the tool fills it
            for arg in op.args:
                assert arg.name in properties or arg.name in tool.hidden, (tool.name, arg.name)
                first.setdefault(arg.name, arg)
        for name, arg in first.items():  # with the default of the operation that declares it first
            if name in properties and not arg.required and name not in tool.defaults:
                assert properties[name].get("default") == arg.default, (tool.name, name)


def test_search_and_context_take_every_argument_on_both_sides() -> None:
    """What REST and MCP disagreed on before the table: MCP's search had no ``mode`` and ``scope``,
    its add no ``durable``; now a tool takes what its operation takes."""
    tools = listed_tools()
    search = tools["search_memories"].input_schema["properties"]
    assert {"mode", "scope", "min_score", "limit", "project_id"} <= set(search)
    assert search["limit"]["default"] == SearchCall.__dataclass_fields__["limit"].default
    context = tools["get_context"].input_schema["properties"]
    assert {a.name for a in ops.CONTEXT.args} <= set(context)
    assert "durable" in tools["add_memory"].input_schema["properties"]


@pytest.mark.parametrize(
    "record,call,op",
    [(SearchCall, ConversationHandle.asearch, ops.SEARCH), (ContextCall, ConversationHandle.acontext, ops.CONTEXT)],
)
def test_one_default_per_argument_the_facades(record: type, call: Any, op: Operation) -> None:
    """The table reads the facade's request records; the handle's signature says the same."""
    fields = {f.name: f.default for f in dataclasses.fields(record)}
    signature = inspect.signature(call).parameters
    for arg in op.args:
        if arg.required:
            assert fields[arg.name] is dataclasses.MISSING and signature[arg.name].default is inspect.Parameter.empty
        else:
            assert arg.default == fields[arg.name] == signature[arg.name].default, arg.name


def test_the_reference_in_the_docs_is_the_tables() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert "<!-- reference: rest -->" in text and "<!-- reference: mcp -->" in text
    assert rewrite(text) == text, "docs/server.md disagrees with the table: python -m memray.server.reference"


def test_an_operation_is_one_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new operation, declared once, is a route (with its body, bounds and write flag) and,
    through a tool over it, an MCP tool with its arguments and annotation."""

    async def touch(t: Target, a: Any) -> dict[str, Any]:
        return {"touched": a.note}

    touch_op = Operation(
        "touch", "Touch the conversation.", "conversation", "delete", "POST", "/touch", touch,
        args=(Arg("note", str, REQUIRED, "why", max_length=7),), body="TouchIn",
    )  # fmt: skip
    monkeypatch.setattr(routes_module, "OPERATIONS", (*ops.OPERATIONS, touch_op))
    from memray.server import mcp as mcp_module

    monkeypatch.setattr(mcp_module, "TOOLS", (*ops.TOOLS, Tool("touch_memories", "Touch.", (Branch(touch_op),))))
    route = openapi()["paths"][touch_op.route]["post"]
    assert route["x-memray-write"] is True and route["requestBody"]["content"]["application/json"]["schema"]
    tool = listed_tools()["touch_memories"]
    assert tool.annotations.destructive_hint is True
    assert tool.input_schema["properties"]["note"]["maxLength"] == 7
    assert set(tool.input_schema["required"]) == {"user_id", "conversation_id", "note"}
