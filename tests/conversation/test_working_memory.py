from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from memray.conversation.working_memory import WorkingMemory
from memray.conversation.working_memory_spec import WorkingMemorySpec, deep_merge
from memray.errors import ConflictError, ValidationError
from memray.store.client import StoreClient
from memray.store.partitions import StorePartitions
from tests.conversation.conftest import CountingStore


def wm(client: StoreClient, conversation_id: str = "c1", **spec: Any) -> WorkingMemory:
    return WorkingMemory(client, "app", "u1", conversation_id, WorkingMemorySpec(**spec))


# -- deep merge ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("old", "new", "merged"),
    [
        ({"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
        ({"a": {"x": 1, "y": {"z": 1}}}, {"a": {"y": {"w": 2}}}, {"a": {"x": 1, "y": {"z": 1, "w": 2}}}),
        ({"tags": ["a", "b"]}, {"tags": ["b", "c", "c"]}, {"tags": ["a", "b", "c"]}),
        (
            {"people": [{"name": "Ann", "age": 3}]},
            {"people": [{"age": 3, "name": "Ann"}, {"name": "Bo"}]},  # same object, other key order
            {"people": [{"name": "Ann", "age": 3}, {"name": "Bo"}]},
        ),
        ({"n": [[1, 2]]}, {"n": [[1, 2], [2, 1]]}, {"n": [[1, 2], [2, 1]]}),
        ({"a": 1}, {"a": "one"}, {"a": "one"}),  # scalar replaces
        ({"a": {"x": 1}}, {"a": None}, {"a": None}),  # null replaces, even an object
        ({"a": None}, {"a": {"x": 1}}, {"a": {"x": 1}}),
        ({"a": [1]}, {"a": {"k": 1}}, {"a": {"k": 1}}),  # type change replaces
        ({"a": 1, "b": 2}, {}, {"a": 1, "b": 2}),
    ],
)
def test_deep_merge_table(old: Any, new: Any, merged: Any) -> None:
    snapshot = json.dumps(old)
    assert deep_merge(old, new) == merged
    assert json.dumps(old) == snapshot  # inputs untouched


# -- json format -----------------------------------------------------------------------------
def test_append_merges_and_versions(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, format="json")
        assert (await mem.get()).model_dump() == {"content": None, "version": 0}
        v1 = await mem.update({"name": "Ann", "likes": ["tea"]})
        v2 = await mem.update('{"likes": ["tea", "jazz"], "city": {"name": "Oslo"}}')  # JSON string
        assert (v1.version, v2.version) == (1, 2)
        assert await mem.get() == v2
        assert v2.content == {"name": "Ann", "likes": ["tea", "jazz"], "city": {"name": "Oslo"}}

    asyncio.run(go())


def test_replace_drops_what_is_left_out(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, format="json")
        await mem.update({"a": 1, "b": 2})
        value = await mem.update({"c": 3}, mode="replace")
        assert value.content == {"c": 3}
        assert (await mem.get()).content == {"c": 3}

    asyncio.run(go())


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", 42, ["a"]])
def test_invalid_json_is_a_validation_error_naming_content(
    store_client: StorePartitions, store: CountingStore, bad: Any
) -> None:
    async def go() -> None:
        mem = wm(store_client, format="json")
        await mem.update({"a": 1})
        with pytest.raises(ValidationError) as info:
            await mem.update(bad)
        assert info.value.field == "content"
        assert (await mem.get()).content == {"a": 1}
        assert store.puts == 1

    asyncio.run(go())


def test_bad_mode_is_rejected(store_client: StorePartitions) -> None:
    with pytest.raises(ValidationError) as info:
        asyncio.run(wm(store_client, format="json").update({"a": 1}, mode="merge"))  # type: ignore[arg-type]
    assert info.value.field == "mode"


class Profile(BaseModel):
    name: str | None = None
    age: int | None = None
    tags: list[str] = []


PROFILE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": ["string", "null"]},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize("schema", [Profile, PROFILE_SCHEMA], ids=["pydantic", "jsonschema"])
def test_schema_violation_after_merge_keeps_old_value(
    store_client: StorePartitions, store: CountingStore, schema: Any
) -> None:
    async def go() -> None:
        mem = wm(store_client, schema=schema)
        assert mem.spec.format == "json"
        await mem.update({"name": "Ann", "tags": ["a", "b"]})
        # Each update is valid on its own; only the merged result breaks the schema.
        if schema is Profile:
            bad: dict[str, Any] = {"age": "old"}
        else:
            bad = {"tags": ["c"]}  # 3 tags after the merge > maxItems 2
        with pytest.raises(ValidationError) as info:
            await mem.update(bad)
        assert info.value.field == "content"
        assert "after the merge" in str(info.value)
        value = await mem.get()
        assert value.content == {"name": "Ann", "tags": ["a", "b"]}
        assert value.version == 1 and store.puts == 1
        # A valid partial update still works afterwards.
        assert (await mem.update({"age": 30})).content == {"name": "Ann", "tags": ["a", "b"], "age": 30}

    asyncio.run(go())


def test_pydantic_instance_is_accepted_as_partial_content(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, schema=Profile)
        await mem.update(Profile(name="Ann"))
        value = await mem.update(Profile(age=4))
        assert value.content == {"name": "Ann", "age": 4}  # unset fields are not written

    asyncio.run(go())


def test_invalid_json_schema_is_rejected_up_front() -> None:
    with pytest.raises(ValidationError) as info:
        WorkingMemorySpec(schema={"type": "objekt"})
    assert info.value.field == "schema"


# -- markdown and text -----------------------------------------------------------------------
def test_markdown_appends_with_a_blank_line(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, template="# Profile\n- name:\n")
        assert mem.spec.format == "markdown"
        await mem.update("# Profile\n- name: Ann\n")
        value = await mem.update("- likes: tea")
        assert value.content == "# Profile\n- name: Ann\n\n- likes: tea"
        assert (await mem.update("# Fresh", mode="replace")).content == "# Fresh"

    asyncio.run(go())


def test_text_rejects_non_string(store_client: StorePartitions) -> None:
    with pytest.raises(ValidationError) as info:
        asyncio.run(wm(store_client).update({"a": 1}))
    assert info.value.field == "content"


def test_size_cap(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, max_chars=10)
        await mem.update("12345")
        with pytest.raises(ValidationError):
            await mem.update("678901")  # 5 + 2 + 6 > 10 after the merge
        assert (await mem.get()).content == "12345"

    asyncio.run(go())


def test_clear(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, format="json")
        await mem.update({"a": 1})
        cleared = await mem.clear()
        assert cleared.content is None and cleared.version == 2
        assert (await mem.get()).content is None
        assert (await mem.update({"b": 1})).content == {"b": 1}

    asyncio.run(go())


# -- concurrency -----------------------------------------------------------------------------
def test_stale_expected_version_conflicts_and_writes_nothing(
    store_client: StorePartitions, store: CountingStore
) -> None:
    async def go() -> None:
        mem = wm(store_client, format="json")
        first = await mem.update({"a": 1})
        await mem.update({"b": 2}, expected_version=first.version)
        with pytest.raises(ConflictError) as info:
            await mem.update({"c": 3}, expected_version=first.version)
        assert (info.value.expected, info.value.actual) == (1, 2)
        assert (await mem.get()).content == {"a": 1, "b": 2}
        with pytest.raises(ConflictError):
            await mem.clear(expected_version=0)

    asyncio.run(go())


def test_concurrent_appends_are_all_kept(store_client: StorePartitions, store: CountingStore) -> None:
    async def go() -> None:
        mems = [wm(store_client, format="json") for _ in range(10)]  # ten writers, one note
        await asyncio.gather(*(m.update({"items": [i], f"k{i}": i}) for i, m in enumerate(mems)))
        value = await mems[0].get()
        assert isinstance(value.content, dict)
        assert sorted(value.content["items"]) == list(range(10))
        assert all(value.content[f"k{i}"] == i for i in range(10))
        assert value.version == 10

    asyncio.run(go())


def test_concurrent_markdown_appends_are_all_kept(store_client: StorePartitions) -> None:
    async def go() -> None:
        mems = [wm(store_client, format="markdown") for _ in range(10)]
        await asyncio.gather(*(m.update(f"- note {i}") for i, m in enumerate(mems)))
        text = (await mems[0].get()).content
        assert isinstance(text, str)
        assert sorted(text.split("\n\n")) == sorted(f"- note {i}" for i in range(10))

    asyncio.run(go())


# -- scope -----------------------------------------------------------------------------------
def test_user_scope_is_shared_and_conversation_scope_is_not(store_client: StorePartitions) -> None:
    async def go() -> None:
        await wm(store_client, "c1", scope="user").update("prefers tea")
        await wm(store_client, "c1").update("task: book a flight")
        assert (await wm(store_client, "c2", scope="user").get()).content == "prefers tea"
        assert (await wm(store_client, "c2").get()).content is None
        assert (await wm(store_client, "c1").get()).content == "task: book a flight"
        other_user = WorkingMemory(store_client, "app", "u2", "c1", WorkingMemorySpec(scope="user"))
        assert (await other_user.get()).content is None

    asyncio.run(go())


# -- prompt and tools ------------------------------------------------------------------------
def test_instructions_show_scope_rules_schema_and_current_content(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, schema=PROFILE_SCHEMA, scope="user")
        empty = await mem.instructions()
        assert "<current_context>\n(empty" in empty
        await mem.update({"name": "Ann"})
        text = await mem.instructions()
        assert "Scope: user" in text
        assert '"append" (the default, safe)' in text and '"replace" (destructive)' in text
        assert '"maxItems": 2' in text  # the schema
        inner = text.split("<current_context>\n", 1)[1].split("\n</current_context>", 1)[0]
        assert json.loads(inner) == {"name": "Ann"}
        md = await wm(store_client, "c9", template="# Plan\n- goal:").instructions()
        assert "# Plan\n- goal:" in md and "Scope: conversation" in md

    asyncio.run(go())


class Nested(BaseModel):
    city: str
    zip: str


class Person(BaseModel):
    name: str
    address: Nested
    tags: list[str] = []


@pytest.mark.parametrize(
    "spec",
    [{}, {"template": "# T"}, {"format": "json"}, {"schema": PROFILE_SCHEMA}, {"schema": Person}],
    ids=["text", "markdown", "json", "jsonschema", "pydantic-nested"],
)
def test_tools_have_openai_function_shape(store_client: StorePartitions, spec: dict[str, Any]) -> None:
    tools = wm(store_client, **spec).tools()
    assert [t["function"]["name"] for t in tools] == [
        "get_working_memory",
        "update_working_memory",
        "clear_working_memory",
    ]
    for tool in tools:
        assert tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        params = tool["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert params["type"] == "object"
        json.dumps(tool)  # plain JSON
    update = tools[1]["function"]["parameters"]
    assert update["required"] == ["content"]
    assert update["properties"]["mode"] == {
        "type": "string",
        "enum": ["append", "replace"],
        "default": "append",
        "description": update["properties"]["mode"]["description"],
    }
    partial = {"content": {"name": "Ann"}} if spec.get("schema") is Person else {"content": {"age": 3}}
    if spec.get("format") == "json" or "schema" in spec:
        jsonschema.validate(partial, update)  # partial updates are allowed by the tool schema
        if spec.get("schema") is Person:
            jsonschema.validate({"content": {"address": {"city": "Oslo"}}}, update)  # nested $ref resolves
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate({"content": {"address": {"city": 5}}}, update)
    else:
        jsonschema.validate({"content": "hello", "mode": "replace"}, update)


def test_call_tool_round_trip(store_client: StorePartitions) -> None:
    async def go() -> None:
        mem = wm(store_client, schema=Profile)
        assert await mem.call_tool("get_working_memory", "{}") == "(working memory is empty)"
        out = await mem.call_tool("update_working_memory", json.dumps({"content": {"name": "Ann"}}))
        assert out.startswith("Working memory updated (append); version 1")
        # A model may send the object as a JSON string, and mode defaults to append.
        await mem.call_tool("update_working_memory", {"content": '{"tags": ["x"]}'})
        assert json.loads(await mem.call_tool("get_working_memory", "")) == {"name": "Ann", "tags": ["x"]}
        assert (await mem.get()).version == 2
        assert "cleared" in await mem.call_tool("clear_working_memory", "{}")
        assert (await mem.get()).content is None

    asyncio.run(go())


@pytest.mark.parametrize(
    ("name", "args", "expect"),
    [
        ("update_working_memory", "{not json", "arguments"),
        ("update_working_memory", "[]", "arguments"),
        ("update_working_memory", "{}", "'content'"),
        ("update_working_memory", '{"content": {"age": "x"}}', "age"),
        ("update_working_memory", '{"content": {"age": 1}, "mode": "upsert"}', "mode"),
        ("forget_everything", "{}", "unknown tool"),
    ],
)
def test_call_tool_errors_are_strings_for_the_model(
    store_client: StorePartitions, name: str, args: str, expect: str
) -> None:
    async def go() -> str:
        mem = wm(store_client, schema=Profile)
        await mem.update({"name": "Ann"})
        out = await mem.call_tool(name, args)
        assert (await mem.get()).content == {"name": "Ann"}  # nothing written
        return out

    out = asyncio.run(go())
    assert out.startswith("Error:") and expect in out
