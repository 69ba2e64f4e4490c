"""The official MCP client session calling every tool: over Streamable HTTP at ``/mcp`` of the
real Serve app (with keys), and over stdio against ``memray mcp DIR`` in a subprocess."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from memray.server.operations import TOOLS as OPERATION_TOOLS
from tests.support.serve import APP, Served

TOOLS = {t.name for t in OPERATION_TOOLS}  # the table's: a tool the server lists but the table lacks fails


async def exercise(session: ClientSession, user: str) -> dict[str, Any]:
    """Every tool once, on ``user``'s memories; what each answered."""
    await session.initialize()
    listed = {t.name: t for t in (await session.list_tools()).tools}
    assert TOOLS == set(listed)  # a new tool without a test here fails
    assert all(listed[n].description and listed[n].input_schema["required"] for n in TOOLS)

    async def call(name: str, **arguments: Any) -> Any:
        result = await session.call_tool(name, {"user_id": user, **arguments})
        assert not result.is_error, (name, result.content)
        return result.structured_content

    out = {"entry": await call("add_memory", content="I prefer window seats on trains")}
    await call("add_memory", content="Book the 9:15 to Porto", conversation_id="c1")
    out["search"] = await call("search_memories", query="window seats")
    out["conv_search"] = await call("search_memories", query="Porto", conversation_id="c1")
    out["context"] = await call("get_context", conversation_id="c1", query="which train?")
    out["list"] = await call("list_memories")
    out["delete"] = await call("delete_memory", memory_id=out["entry"]["ids"][0])
    out["after_delete"] = await call("search_memories", query="window seats")
    out["clear"] = await call("delete_all_memories", conversation_id="c1")
    out["erase"] = await call("delete_all_memories")
    return out


def check(out: dict[str, Any]) -> None:
    assert [r["text"] for r in out["search"]["results"]] == ["I prefer window seats on trains"]
    assert out["conv_search"]["results"][0]["text"] == "Book the 9:15 to Porto"
    assert "Book the 9:15 to Porto" in str(out["context"]["messages"])
    assert len(out["list"]["memories"]) == 1
    assert out["after_delete"]["results"] == []


def over_http(served: Served, key: str | None, body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60.0) as http:
            async with streamable_http_client(served.url + "/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    return await body(session)

    return asyncio.run(run())


def test_every_tool_over_streamable_http(served: Served) -> None:
    out = over_http(served, served.keys["admin"], lambda s: exercise(s, "mcp-user"))
    check(out)
    assert served.mem.verify_deleted(app=APP, user_id="mcp-user").clean


def test_tools_enforce_the_key_whatever_the_arguments(served: Served) -> None:
    served.mem.memory_service.add_entry(APP, "bob", {"content": "bob's locker is 12"})
    before = [r.entry.text for r in served.mem.memory_service.list_entries(APP, "bob")]  # other tests add theirs

    async def attempts(session: ClientSession) -> list[Any]:
        await session.initialize()
        return [
            await session.call_tool("search_memories", {"user_id": "bob", "query": "locker"}),
            await session.call_tool("add_memory", {"user_id": "bob", "content": "x"}),
            await session.call_tool("delete_all_memories", {"user_id": "bob"}),
        ]

    for key in ("ada", "reader"):  # ada's key on bob; a read-only key on writes
        results = over_http(served, served.keys[key], attempts)
        expected = [True, True, True] if key == "ada" else [False, True, True]
        assert [r.is_error for r in results] == expected
        assert "12" not in str(results[0].content) or key == "reader"
    # the other app's key sees globex's (empty) bob, never acme's
    other = over_http(served, served.keys["other"], attempts)
    assert "12" not in str(other[0].content)
    after = [r.entry.text for r in served.mem.memory_service.list_entries(APP, "bob")]
    assert after == before and "bob's locker is 12" in after


def test_http_mcp_refuses_no_key_and_a_foreign_origin(served: Served) -> None:
    import httpx

    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}
    assert httpx.post(served.url + "/mcp", json=ping, headers=accept).status_code == 401
    evil = {**accept, "Authorization": f"Bearer {served.keys['admin']}", "Origin": "http://evil.example"}
    assert httpx.post(served.url + "/mcp", json=ping, headers=evil).status_code == 403


def test_every_tool_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "memray.cli", "mcp", str(tmp_path / "data")])

    async def run() -> Any:
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                return await exercise(session, "desk")

    check(asyncio.run(run()))


def test_refusals_say_why_as_rest_does(served: Served) -> None:
    """A read-only key, another user, an invalid field: an isError result carrying the status,
    the memray error and REST's detail — not "Error executing tool" alone."""

    async def attempts(session: ClientSession) -> list[Any]:
        await session.initialize()
        return [
            await session.call_tool("add_memory", {"user_id": "ada", "content": "x"}),
            await session.call_tool("search_memories", {"user_id": "bob", "query": "x"}),
            await session.call_tool("search_memories", {"user_id": "ada", "query": "x", "limit": 5000}),
            await session.call_tool("add_memory", {"user_id": "ada", "content": "x", "role": "robot"}),
        ]

    read_only = over_http(served, served.keys["reader"], attempts)[0]
    assert read_only.is_error and "403 AuthError: this key is read-only" in read_only.content[0].text
    bound, too_many, bad_role = over_http(served, served.keys["ada"], attempts)[1:]
    assert bound.is_error and "403 AuthError: this key is bound to user 'ada'" in bound.content[0].text
    assert too_many.is_error and "limit" in too_many.content[0].text and "1000" in too_many.content[0].text
    assert bad_role.is_error and "role" in bad_role.content[0].text


def test_tools_say_what_they_do_to_memories(served: Served) -> None:
    async def listed(session: ClientSession) -> dict[str, Any]:
        await session.initialize()
        return {t.name: t for t in (await session.list_tools()).tools}

    tools = over_http(served, served.keys["reader"], listed)
    for name in ("search_memories", "get_context", "list_memories"):
        assert tools[name].annotations.read_only_hint is True
    for name in ("delete_memory", "delete_all_memories"):
        assert tools[name].annotations.destructive_hint is True and not tools[name].annotations.read_only_hint
    assert tools["add_memory"].annotations.destructive_hint is False
    add = tools["add_memory"].input_schema["properties"]
    assert add["role"]["enum"] == ["system", "user", "assistant", "tool"]
    assert add["content"]["maxLength"] > 0 and "durable" in add
    search = tools["search_memories"].input_schema["properties"]
    limit = search["limit"]["anyOf"][0]
    assert limit["maximum"] == 1000 and search["limit"]["default"] is None and "mode" in search  # each operation's
    assert search["scope"]["enum"] == ["conversation", "user"]
    # one default per argument: the facade's, on REST and MCP alike
    import inspect

    import httpx

    from memray.facade.conversation import ConversationHandle

    rest = httpx.get(served.url + "/openapi.json").json()["components"]["schemas"]
    context = tools["get_context"].input_schema["properties"]
    facade = inspect.signature(ConversationHandle.acontext).parameters
    for name in ("limit", "semantic_limit"):
        assert context[name]["default"] == rest["ContextIn"]["properties"][name]["default"] == facade[name].default
    searched = inspect.signature(ConversationHandle.asearch).parameters["limit"].default
    assert rest["SearchIn"]["properties"]["limit"]["default"] == searched


def test_every_tool_refuses_who_may_not(served: Served) -> None:
    """Generated from the tool list (a new tool is covered without touching this test): each tool,
    with its required arguments, refuses a key bound to another user; each tool that is not
    read-only refuses a read-only key; and bob's data stays as it was."""
    served.mem.memory_service.add_entry(APP, "bob", {"content": "bob's bike lock is 3141"})
    before = [r.entry.text for r in served.mem.memory_service.list_entries(APP, "bob")]

    async def attempts(session: ClientSession, key: str) -> list[tuple[str, Any]]:
        await session.initialize()
        out = []
        for tool in (await session.list_tools()).tools:
            if key == "reader" and tool.annotations.read_only_hint:
                continue
            arguments = {name: "x" for name in tool.input_schema["required"]} | {"user_id": "bob"}
            out.append((tool.name, await session.call_tool(tool.name, arguments)))
        return out

    for key in ("ada", "reader"):
        results = over_http(served, served.keys[key], lambda s, key=key: attempts(s, key))
        writers = {t.name for t in OPERATION_TOOLS if t.effect != "read"}
        assert {name for name, _ in results} == (TOOLS if key == "ada" else writers)  # every tool probed
        for name, result in results:
            assert result.is_error and "403 AuthError" in result.content[0].text, (key, name, result.content)
            assert "3141" not in str(result.content)
    assert [r.entry.text for r in served.mem.memory_service.list_entries(APP, "bob")] == before
