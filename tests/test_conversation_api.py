"""Conversation memory through the facade, in both modes: records, working memory, summaries,
tool merging, caps, and what survives a killed writer."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

import memray
from memray.conversation.working_memory_spec import WorkingMemorySpec
from memray.errors import ConflictError, NotFoundError, ValidationError
from tests.service.conftest import mode_and_stores

# "inprocess-stores3": three history partitions; the suite's answers must not change with them
MODES = ["inprocess", "inprocess-stores3", pytest.param("ray", marks=pytest.mark.ray)]


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    mode, stores = mode_and_stores(request.param)
    config = memray.MemoryConfig(
        path=str(tmp_path_factory.mktemp(f"api-{request.param}")),
        mode=mode,
        stores=stores,
        hosts=2,
        shards=1,
        debounce_ms=10,
        max_message_chars=2_000,
        summarizer=memray.SummarizerConfig(trigger_tokens=60, keep_messages=2),
    )
    m = memray.open(config=config)
    yield m
    m.close(terminate=True)


def new_user() -> str:
    return "user-" + uuid.uuid4().hex[:8]


def test_conversation_records_title_list_update_and_delete(mem):
    user = new_user()
    a = mem.conversation(user, "a", app="api")
    b = mem.conversation(user, "b", app="api")
    a.add({"role": "user", "content": "Plan my trip to Kyoto in April"}, durable=True)
    b.create(title="Groceries", metadata={"tags": ["home"], "pinned": True})
    assert a.info().title == "Plan my trip to Kyoto in April"  # the first user message
    listed = mem.list_conversations(user, app="api", order="created_asc")
    assert [c.conversation_id for c in listed] == ["a", "b"]
    assert [
        c.conversation_id for c in mem.list_conversations(user, app="api", order="created_asc", limit=1, offset=1)
    ] == ["b"]
    updated = b.update(metadata={"pinned": False, "colour": "green"})
    assert updated.metadata == {"tags": ["home"], "pinned": False, "colour": "green"}  # merged, not clobbered
    assert updated.title == "Groceries"
    with pytest.raises(NotFoundError):
        mem.conversation(user, "missing", app="api").update(title="x")
    counts = a.delete()
    assert counts["messages"] == 1
    assert a.info() is None and a.messages() == []
    assert [c.conversation_id for c in mem.list_conversations(user, app="api")] == ["b"]


def test_tool_result_merges_into_its_call_and_persists(mem):
    conv = mem.conversation(new_user(), "tools", app="api")
    conv.add({"role": "user", "content": "weather in Oslo?"})
    conv.add(
        {
            "id": "a1",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool", "tool_call_id": "call-1", "tool_name": "weather", "input": {"city": "Oslo"}},
            ],
        }
    )
    seqs = conv.add(
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool",
                    "tool_call_id": "call-1",
                    "tool_name": "weather",
                    "state": "output",
                    "output": "-3C, snow",
                }
            ],
        }
    )
    assert seqs == [2]  # merged into the call's message
    conv.flush()
    msgs = conv.messages()
    assert [m.role for m in msgs] == ["user", "assistant"]
    tool = msgs[1].parts[1]
    assert tool.state == "output" and tool.output == "-3C, snow"


def test_oversized_content_is_rejected_and_nothing_written(mem):
    conv = mem.conversation(new_user(), "big", app="api")
    with pytest.raises(ValidationError, match="cap"):
        conv.add([{"role": "user", "content": "fine"}, {"role": "user", "content": "x" * 5_000}])
    assert conv.messages() == []


def test_working_memory_appends_by_default_and_scopes(mem):
    user = new_user()
    spec = WorkingMemorySpec(scope="user", format="json")
    one = mem.conversation(user, "one", app="api", working_memory=spec)
    two = mem.conversation(user, "two", app="api", working_memory=spec)
    one.working_memory.update({"name": "Ada", "likes": ["tea"]})
    two.working_memory.update({"likes": ["tea", "chess"], "city": None})
    value = one.working_memory.get()
    assert value.content == {"name": "Ada", "likes": ["tea", "chess"], "city": None}  # user scope: shared
    assert value.version == 2
    with pytest.raises(ConflictError):
        one.working_memory.update({"x": 1}, expected_version=1)
    local = mem.conversation(user, "one", app="api")  # conversation scope (default): separate
    local.working_memory.update("met Ada at the conference")
    assert mem.conversation(user, "two", app="api").working_memory.get().content is None
    assert "<current_context>" in local.working_memory.instructions()
    assert [t["function"]["name"] for t in local.working_memory.tools()] == [
        "get_working_memory",
        "update_working_memory",
        "clear_working_memory",
    ]


class Profile(BaseModel):
    name: str
    age: int | None = None


def test_working_memory_schema_violation_after_merge_keeps_the_old_value(mem):
    conv = mem.conversation(
        new_user(), "wm", app="api", working_memory=WorkingMemorySpec(format="json", schema=Profile)
    )
    conv.working_memory.update({"name": "Ada", "age": 36})
    with pytest.raises(ValidationError):
        conv.working_memory.update({"age": "thirty"})
    with pytest.raises(ValidationError, match="content"):
        conv.working_memory.update("{not json")
    assert conv.working_memory.get().content == {"name": "Ada", "age": 36}


def test_context_carries_working_memory_and_summary_and_summaries_keep_updating(mem):
    conv = mem.conversation(new_user(), "long", app="api")
    conv.working_memory.update("prefers metric units")
    throughs = []
    for round_ in range(3):
        conv.add(
            [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"round {round_} line {i}: the harbour ferry leaves at {i} past nine",
                }
                for i in range(8)
            ]
        )
        conv.flush()
        assert mem.wait_indexed(30)
        deadline = __import__("time").monotonic() + 20
        while __import__("time").monotonic() < deadline:
            state = mem.internals.run(mem.internals.deployment.stores.get_summary(conv.key))
            if state is not None and (not throughs or state.summarized_through_seq > throughs[-1]):
                break
            __import__("time").sleep(0.05)
        assert state is not None
        throughs.append(state.summarized_through_seq)
    assert throughs == sorted(set(throughs)) and len(throughs) == 3  # it kept advancing
    ctx = conv.context("when does the ferry leave?", limit=3)
    assert ctx.summary and conv.summary() == ctx.summary
    assert ctx.working_memory and "prefers metric units" in ctx.working_memory
    assert ctx.messages[0].role == "system" and "<agent_summary>" in ctx.messages[0].text


def test_durable_add_survives_a_killed_writer(tmp_path):
    path = str(tmp_path / "kill")
    writer = textwrap.dedent(
        f"""
        import os, signal, memray
        mem = memray.open({path!r}, mode="inprocess", hosts=1, shards=1, debounce_ms=60_000)
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add([{{"role": "user", "content": f"acknowledged {{i}}"}} for i in range(5)], durable=True)
        conv.add({{"role": "user", "content": "never flushed"}})  # scheduled, not durable: may be lost
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", writer], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    with memray.open(path, mode="inprocess", hosts=1, shards=1) as mem:
        conv = mem.conversation("u", "c")
        texts = [m.text for m in conv.messages()]
        # the buffered message is lost, and said so: counted, recorded, raised by the next flush
        assert mem.stats()[0]["lost_on_restart"] == 1
        assert [(d.seq, d.kind) for d in mem.dead_letters()] == [(6, "lost")]
        with pytest.raises(memray.DeadLetterError, match="seq 6 lost"):
            conv.flush()
        conv.flush()  # reported once
        assert conv.add({"role": "user", "content": "next"}) == [7]  # seq 6 is never given again
    assert texts == [f"acknowledged {i}" for i in range(5)]
