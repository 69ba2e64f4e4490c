"""Simulation time, importance, agent ids, time windows and memory-stream scoring, through the
facade in both modes."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

import memray
from memray import MemoryEntry, Scoring, SearchRequest
from memray.errors import InvalidIdError, ValidationError
from memray.store.rows import row_to_message

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
H = 3600.0
DAY0 = datetime(2025, 3, 1, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    path = str(tmp_path_factory.mktemp(f"sim-{request.param}"))
    m = memray.open(path, mode=request.param, hosts=1, shards=1, debounce_ms=10)
    yield m
    m.close(terminate=True)


def fresh(mem: memray.Memory) -> memray.ConversationHandle:
    return mem.conversation(user_id="agent", conversation_id=uuid.uuid4().hex, app="town")


def town_stream(conv: memray.ConversationHandle) -> None:
    conv.add(
        [
            {
                "id": "fire",
                "role": "user",
                "content": "the cafe kitchen caught fire",
                "sim_time": 1 * H,
                "importance": 0.9,
            },
            {"id": "menu", "role": "user", "content": "the cafe has a new menu", "sim_time": 10 * H, "importance": 0.3},
            {
                "id": "coffee",
                "role": "user",
                "content": "I bought coffee at the cafe",
                "sim_time": 47 * H,
                "importance": 0.1,
            },
            {
                "id": "dog",
                "role": "user",
                "content": "walked the dog in the park",
                "sim_time": 48 * H,
                "importance": 1.0,
            },
            {"id": "nosim", "role": "user", "content": "the cafe sign is blue"},
        ]
    )


def ids(hits: list[memray.Hit]) -> list[str]:
    return [h.message.id for h in hits]


def test_sim_time_importance_and_agents_round_trip_from_buffer_and_store(mem):
    conv = fresh(mem)
    conv.add(
        [
            {
                "id": "a",
                "role": "user",
                "content": "x",
                "sim_time": DAY0 + timedelta(hours=8),
                "importance": 0.5,
                "agent_id": "isabella",
                "sub_agent_id": "planner",
            },
            {"id": "b", "role": "assistant", "content": "y", "sim_time": 12.5},
        ]
    )
    buffered = conv.messages()
    conv.flush()
    stored = [row_to_message(r) for r in mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))]
    for msgs in (buffered, stored):
        by_id = {m.id: m for m in msgs}
        assert by_id["a"].sim_time == (DAY0 + timedelta(hours=8)).timestamp()
        assert (
            by_id["a"].importance == 0.5 and by_id["a"].agent_id == "isabella" and by_id["a"].sub_agent_id == "planner"
        )
        assert by_id["b"].sim_time == 12.5 and by_id["b"].importance is None and by_id["b"].agent_id is None


def test_messages_filter_by_sim_time_creation_time_and_agent(mem):
    conv = fresh(mem)
    conv.add(
        [
            {
                "id": f"m{i}",
                "role": "user",
                "content": f"tick {i}",
                "sim_time": i * H,
                "agent_id": "a" if i % 2 else "b",
                "created_at": 1000.0 + i,
            }
            for i in range(6)
        ]
        + [{"id": "none", "role": "user", "content": "no clock"}]
    )
    for _ in range(2):  # first from the buffer, then from the store
        assert [m.id for m in conv.messages(after=2 * H, before=4 * H)] == ["m2", "m3"]
        assert [m.id for m in conv.messages(after=EPOCH + timedelta(hours=4))] == ["m4", "m5"]
        assert [m.id for m in conv.messages(after=1 * H, limit=2)] == ["m4", "m5"]
        assert [m.id for m in conv.messages(created_after=1001.0, created_before=1003.0)] == ["m1", "m2"]
        assert [m.id for m in conv.messages(agent_id="a")] == ["m1", "m3", "m5"]
        assert [m.id for m in conv.messages(agent_id="b", after=1 * H)] == ["m2", "m4"]
        conv.flush()


def test_bad_simulation_values_are_refused_naming_the_field(mem):
    conv = fresh(mem)
    bad = [
        ({"sim_time": datetime(2025, 1, 1)}, "message.sim_time"),
        ({"sim_time": math.inf}, "message.sim_time"),
        ({"sim_time": "noon"}, "message.sim_time"),
        ({"importance": 7}, "message.importance"),
        ({"importance": True}, "message.importance"),
        ({"agent_id": ""}, "message.agent_id"),
    ]
    for extra, field in bad:
        with pytest.raises(ValidationError) as err:
            conv.add({"role": "user", "content": "x", **extra})
        assert err.value.field == field
    with pytest.raises(InvalidIdError):
        conv.messages(agent_id="bad\nagent")
    with pytest.raises(ValidationError, match="later than before"):
        conv.messages(after=5.0, before=1.0)
    with pytest.raises(ValidationError, match="scoring.now"):
        Scoring.stream(now=None)
    with pytest.raises(ValidationError, match="decay_per_hour"):
        Scoring.stream(now=1.0, decay_per_hour=1.5)
    with pytest.raises(ValidationError, match="scoring"):
        conv.search("x", scoring="by vibes")  # type: ignore[arg-type]
    assert conv.messages() == []  # nothing was written


@pytest.mark.parametrize("indexed", [False, True], ids=["tail", "indexed"])
def test_stream_scoring_ranks_relevant_items_by_recency_importance_and_relevance(mem, indexed):
    conv = fresh(mem)
    town_stream(conv)
    if indexed:
        mem.wait_indexed()
    relevance = conv.search("cafe", limit=5)
    assert set(ids(relevance)) == {"fire", "menu", "coffee", "nosim"}  # the dog is not relevant
    now = 48 * H
    recent = conv.search(
        "cafe", limit=5, scoring=Scoring.stream(now=now, recency=1.0, importance=0.0, relevance=0.0, decay_per_hour=0.9)
    )
    assert ids(recent) == ["coffee", "menu", "fire", "nosim"]  # newest first; no sim_time: recency 0
    important = conv.search(
        "cafe", limit=5, scoring=Scoring.stream(now=now, recency=0.0, importance=1.0, relevance=0.0)
    )
    assert ids(important)[:3] == ["fire", "menu", "coffee"]
    for hit in conv.search("cafe", limit=5, scoring=Scoring.stream(now=now, decay_per_hour=0.99)):
        m = hit.message
        rel = next(h.score for h in relevance if h.message.id == m.id)
        recency = 0.99 ** ((now - m.sim_time) / H) if m.sim_time is not None else 0.0
        expected = (recency + (m.importance or 0.0) + rel) / 3
        assert hit.score == pytest.approx(expected, abs=1e-6), m.id
    assert "dog" not in ids(conv.search("cafe", limit=5, scoring=Scoring.stream(now=now, importance=5.0)))


def test_no_floor_stream_scoring_ranks_the_whole_stream(mem):
    conv = fresh(mem)
    town_stream(conv)
    mem.wait_indexed()
    got = conv.search(
        "nothing matches this",
        limit=3,
        min_score=0,
        scoring=Scoring.stream(now=48 * H, recency=0.0, importance=1.0, relevance=0.0),
    )
    assert ids(got) == ["dog", "fire", "menu"]


def test_search_windows_filter_by_sim_time_and_creation_time(mem):
    conv = fresh(mem)
    town_stream(conv)
    for indexed in (False, True):
        assert ids(conv.search("cafe", limit=5, after=5 * H, before=48 * H)) in (["menu", "coffee"], ["coffee", "menu"])
        assert set(ids(conv.search("cafe", limit=5, after=EPOCH))) == {"fire", "menu", "coffee"}
        assert ids(conv.search("cafe", limit=5, created_before=1.0)) == []
        assert set(ids(conv.search("cafe", limit=5, created_after=1.0))) == {"fire", "menu", "coffee", "nosim"}
        if not indexed:
            mem.wait_indexed()
    app_wide = mem.search_app("town", "kitchen fire", limit=10, after=0.0, before=2 * H)
    assert "fire" in ids(app_wide)


def test_context_ranks_recalled_messages_with_stream_scoring(mem):
    conv = fresh(mem)
    town_stream(conv)
    mem.wait_indexed()
    ctx = conv.context(
        "cafe",
        limit=1,
        semantic_limit=2,
        scoring=Scoring.stream(now=48 * H, recency=0.0, importance=1.0, relevance=0.0),
    )
    assert ctx.recalled_ids == ["fire", "menu"]


def test_entries_carry_sim_time_and_importance_into_service_search(mem):
    svc = mem.memory_service
    user = uuid.uuid4().hex
    svc.add_entries(
        "town",
        user,
        [
            MemoryEntry(id="old", content="Klaus likes the library", sim_time=2 * H, importance=0.9),
            MemoryEntry(id="new", content="Klaus reads at the library", sim_time=40 * H, importance=0.2),
            MemoryEntry(id="off", content="Klaus paints the library", importance=0.5),
        ],
    )
    listed = {r.entry.id: r.entry for r in svc.list_entries("town", user)}
    assert listed["old"].sim_time == 2 * H and listed["old"].importance == 0.9 and listed["off"].sim_time is None
    req = SearchRequest(
        query="library",
        user_id=user,
        app_name="town",
        scoring=Scoring.stream(now=41 * H, recency=1.0, importance=0.0, relevance=0.0),
    )
    assert [m.entry.id for m in svc.search(req).memories] == ["new", "old", "off"]
    windowed = svc.search({"query": "library", "user_id": user, "app_name": "town", "after": 10 * H})
    assert [m.entry.id for m in windowed.memories] == ["new"]
    by_importance = svc.search_projects(
        "town", user, "library", [None], scoring=Scoring.stream(now=41 * H, recency=0.0, importance=1.0, relevance=0.0)
    )
    assert [m.entry.id for m in by_importance.memories] == ["old", "off", "new"]
    with pytest.raises(ValidationError, match="entry.importance"):
        svc.add_entry("town", user, {"content": "x", "importance": 2})
