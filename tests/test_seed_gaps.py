"""What the seeds describe that memray lacked (issue 14, item 4), through the facade in both
modes: clear() and deletion proofs, durable_seq, conversation lists by title with a total,
context() without what the summary covers, titles from the chat summariser, the project view."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import memray
from memray import MemoryEntry, SearchRequest
from memray.errors import ValidationError

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    path = str(tmp_path_factory.mktemp(f"gaps-{request.param}"))
    config = memray.MemoryConfig(
        path=path,
        mode=request.param,
        hosts=1,
        shards=1,
        debounce_ms=10,
        summarizer=memray.SummarizerConfig(trigger_tokens=60, keep_messages=2),
    )
    m = memray.open(config=config)
    yield m
    m.close(terminate=True)


def fresh(mem: memray.Memory, user: str | None = None) -> memray.ConversationHandle:
    return mem.conversation(user_id=user or uuid.uuid4().hex, conversation_id=uuid.uuid4().hex, app="gaps")


def test_clear_removes_every_message_everywhere_and_keeps_the_conversation(mem, tmp_path):
    conv = fresh(mem)
    conv.add([{"id": f"m{i}", "role": "user", "content": f"the vault code is {4470 + i}"} for i in range(4)])
    conv.working_memory.update("Ada guards the vault")
    mem.wait_indexed()
    mem.export(str(tmp_path / "export"))
    assert not conv.verify_deleted().clean

    counts = conv.clear()

    assert counts["messages"] == 4 and counts["vectors"] == 4 and counts["export_rows"] == 4
    proof = conv.verify_deleted()
    assert proof.clean, proof.remaining
    assert set(proof.remaining) >= {
        "messages",
        "embeddings",
        "vectors",
        "host_messages",
        "host_queued",
        "export_rows",
        "snapshot_items",
    }
    assert conv.messages() == [] and conv.search("vault code") == []
    assert conv.working_memory.get().text == "Ada guards the vault"
    info = conv.info()
    assert info is not None and info.last_seq == 4
    assert conv.add({"role": "user", "content": "a new start"}) == [5]
    assert not conv.verify_deleted().clean  # the new message is there
    assert conv.verify_deleted(["m0", "m3"]).clean


def test_delete_messages_is_proven_by_verify_deleted(mem):
    conv = fresh(mem)
    conv.add(
        [
            {"id": "keep", "role": "user", "content": "keep this"},
            {"id": "gone", "role": "user", "content": "forget this"},
        ]
    )
    mem.wait_indexed()
    assert not conv.verify_deleted(["gone"]).clean
    conv.delete_messages(["gone"])
    assert conv.verify_deleted(["gone"]).clean
    assert not conv.verify_deleted(["keep"]).clean


def test_durable_seq_follows_commits(mem):
    conv = fresh(mem)
    assert conv.durable_seq() == 0
    conv.add([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], durable=True)
    assert conv.durable_seq() == 2
    conv.add({"role": "user", "content": "three"})
    conv.flush()
    assert conv.durable_seq() == 3 and mem._run(conv.adurable_seq()) == 3


def test_list_conversations_orders_by_title_and_counts_them_all(mem):
    user = uuid.uuid4().hex
    for cid, title in (("c1", "banana"), ("c2", None), ("c3", "apple"), ("c4", "cherry")):
        mem.conversation(user_id=user, conversation_id=cid, app="gaps").create(title=title)
    page = mem.list_conversations(user, app="gaps", order="title_asc", limit=2)
    assert [c.title for c in page] == ["apple", "banana"] and page.total == 4
    assert [c.conversation_id for c in mem.list_conversations(user, app="gaps", order="title_desc")] == [
        "c4",
        "c1",
        "c3",
        "c2",
    ]
    assert mem.list_conversations(user, app="gaps", offset=3).total == 4
    assert mem._run(mem.alist_conversations(user, app="gaps", order="created_asc")).total == 4
    with pytest.raises(ValidationError, match="title_asc"):
        mem.list_conversations(user, app="gaps", order="by_mood")


def test_context_leaves_out_what_the_summary_covers_but_keeps_the_newest(mem):
    conv = fresh(mem)
    conv.add(
        [
            {
                "id": f"m{i}",
                "role": "user" if i % 2 else "assistant",
                "content": f"turn {i}: " + "many words about the harvest festival " * 3,
            }
            for i in range(1, 9)
        ],
        durable=True,
    )
    deadline = time.monotonic() + 60
    while conv.summary() is None and time.monotonic() < deadline:  # the summary is folded in the background
        time.sleep(0.05)
    state = mem._run(mem._deployment.stores.get_summary(conv.key))
    assert state is not None and state.summarized_through_seq == 6  # all but keep_messages=2 folded
    ctx = conv.context(limit=8)
    assert ctx.summary is not None and ctx.messages[0].id == "memray-agent-summary"
    assert [m.seq for m in ctx.messages[1:]] == [7, 8]  # seqs 1-6 are in the summary
    recalled = conv.context("turn 3 harvest", limit=8, semantic_limit=1)
    assert [m.seq for m in recalled.messages[1:3]] == [7, 8] and len(recalled.recalled_ids) == 1
    assert conv.context(limit=1).messages[1:] == ctx.messages[2:]  # fewer than keep_messages asked: the newest


def test_project_view_binds_the_service_to_one_project(mem):
    svc = mem.memory_service
    user = uuid.uuid4().hex
    web = svc.for_project("web")
    web.add_entries(
        "gaps",
        user,
        [MemoryEntry(id="w1", content="the web app uses dark theme tokens")],
        session_id="s1",
        replace_session=True,
    )
    web.add_entry("gaps", user, MemoryEntry(id="w2", content="the web app deploys on fridays"))
    svc.add_entry("gaps", user, MemoryEntry(id="g1", content="I prefer a dark theme"))
    svc.for_project("cli").add_entry("gaps", user, MemoryEntry(id="c1", content="the cli has a dark theme flag"))

    found = web.search(SearchRequest(query="dark theme", user_id=user, app_name="gaps"))
    assert {m.entry.id for m in found.memories} == {"w1", "g1"}  # global plus this project, never another
    assert {m.project_id for m in found.memories} == {"web", None}
    assert {m.entry.id for m in web.search({"query": "dark theme", "user_id": user, "app_name": "gaps"}).memories} == {
        "w1",
        "g1",
    }
    with pytest.raises(ValidationError, match="conflicts"):
        web.search(SearchRequest(query="x", user_id=user, app_name="gaps", project_id="cli"))
    assert web.delete_entries("gaps", user, "dark theme") == {"entries": 1, "vectors": 1}
    assert [m.entry.id for m in svc.list_entries("gaps", user)] == ["g1"]
    assert [m.entry.id for m in svc.for_project("web").list_entries("gaps", user)] == ["w2"]
    assert mem._run(web.aadd_entry("gaps", user, "async works too")) != ""


def _titles(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    return "Harvest Festival Plans" if "title" in system else "- summary"


@pytest.mark.parametrize("mode", MODES)
def test_titles_come_from_the_chat_summariser_and_never_overwrite_a_callers(mode, request, tmp_path, openai_server):
    if mode == "ray":
        request.getfixturevalue("ray_session")
    openai_server.reply = _titles
    summarizer = memray.SummarizerConfig(kind="openai", model="fake-chat", base_url=openai_server.url, titles=True)
    mem = memray.open(str(tmp_path / "d"), mode=mode, hosts=1, shards=1, debounce_ms=10, summarizer=summarizer)
    try:
        conv = mem.conversation(user_id="u", conversation_id="auto")
        conv.add(
            [
                {"role": "user", "content": "we need stalls for the harvest festival"},
                {"role": "assistant", "content": "I will plan the stalls"},
            ],
            durable=True,
        )
        deadline = time.monotonic() + 60
        while (
            (info := conv.info()) is not None and info.title != "Harvest Festival Plans" and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert info is not None and info.title == "Harvest Festival Plans"
        mine = mem.conversation(user_id="u", conversation_id="mine")
        mine.create(title="My own title")
        mine.add({"role": "user", "content": "we need stalls for the harvest festival"}, durable=True)
        conv.add({"role": "user", "content": "and lanterns"}, durable=True)  # another commit of the opening
        mem.flush()
        assert mine.info().title == "My own title"  # type: ignore[union-attr]
        automatic = "we need stalls for the harvest festival"
        assert not mem._run(mem._deployment.stores.retitle(mine.key, automatic, "Generated"))
        assert conv.info().title == "Harvest Festival Plans"  # type: ignore[union-attr]
    finally:
        mem.close(terminate=True)
