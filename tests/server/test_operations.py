"""The operation table (memray/server/operations.py) is the one declaration REST, MCP, the facade's
defaults and the reference in docs/server.md follow: each is checked against it here, without a
server (the routes and tools are built over no memray and not called, but in the last test, which
calls a tool over an in-process memray)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

import memray
from memray.facade.conversation import ContextCall, ConversationHandle, SearchCall
from memray.server import operations as ops
from memray.server import routes as routes_module
from memray.server.mcp import ANNOTATIONS, mcp_server
from memray.server.operation import REQUIRED, Arg, Branch, Operation, Target, Tool
from memray.server.reference import PAGE, rewrite
from memray.server.routes import NOOP_PATH, build_router
from memray.service import DEFAULT_LIMIT as ENTRY_SEARCH_LIMIT


def openapi(floor: bool = False) -> dict[str, Any]:
    app = FastAPI()
    app.include_router(build_router(None, None, 1, floor))  # type: ignore[arg-type]  # routes are built, never called
    schema: dict[str, Any] = app.openapi()
    return schema


def listed_tools() -> dict[str, Any]:
    server = mcp_server(None, None, "default")  # type: ignore[arg-type]
    return {t.name: t for t in asyncio.run(server.list_tools())}


def test_every_route_is_an_operation_with_its_arguments_and_write_flag() -> None:
    schema = openapi()
    found = {(method.upper(), path): op for path, item in schema["paths"].items() for method, op in item.items()}
    assert set(found) == {(o.method, o.route) for o in ops.OPERATIONS}  # the benchmark's floor only when asked:
    assert ("post", NOOP_PATH) in {(m, p) for p, item in openapi(floor=True)["paths"].items() for m in item}
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
        declared: dict[str, list[Arg]] = {}
        for op in tool.operations:  # every argument of an operation reaches the tool, or the tool fills it
            for arg in op.args:
                assert arg.name in properties or arg.name in tool.hidden, (tool.name, arg.name)
                declared.setdefault(arg.name, []).append(arg)
        for name, args in declared.items():  # with the operations' default; None where theirs differ
            if name in properties and not args[0].required and name not in tool.defaults:
                same = len({repr(a.default) for a in args}) == 1
                assert properties[name].get("default") == (args[0].default if same else None), (tool.name, name)


def test_search_and_context_take_every_argument_on_both_sides() -> None:
    """What REST and MCP disagreed on before the table: MCP's search had no ``mode`` and ``scope``,
    its add no ``durable``; now a tool takes what its operation takes."""
    tools = listed_tools()
    search = tools["search_memories"].input_schema["properties"]
    assert {"mode", "scope", "min_score", "limit", "project_id"} <= set(search)
    assert search["limit"]["default"] is None  # left out: the conversation search's 5, the service's 10
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


def test_a_tool_leaves_each_operation_its_own_default(tmp_path: Path) -> None:
    """``search_memories`` without ``limit``: a conversation's search finds 5 (REST's search
    default), the long-term one 10 (REST's ``/entries/search``) — not one default for both."""
    config = memray.MemoryConfig(path=str(tmp_path / "d"), mode="inprocess", hosts=1, shards=1)
    with memray.open(config=config) as mem:
        mem.conversation("u", "c").add([{"role": "user", "content": f"kiwi fact {i}"} for i in range(12)], durable=True)
        for i in range(12):
            mem.memory_service.add_entry("default", "u", {"content": f"kiwi note {i}"})
        server = mcp_server(mem, None, "default")

        async def found(**arguments: Any) -> int:
            result = await server.call_tool("search_memories", {"user_id": "u", "query": "kiwi", **arguments})
            assert not result.is_error, result.content
            return len(result.structured_content["results"])

        assert asyncio.run(found(conversation_id="c")) == SearchCall.__dataclass_fields__["limit"].default == 5
        assert asyncio.run(found()) == ENTRY_SEARCH_LIMIT == 10
        assert asyncio.run(found(limit=3)) == asyncio.run(found(conversation_id="c", limit=3)) == 3
