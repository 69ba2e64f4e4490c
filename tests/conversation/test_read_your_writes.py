"""Read-your-writes and relevance, end to end in both modes.

The persist debounce is set to a minute, so nothing written here reaches the store, the embedder
or a shard during a test unless the test flushes: a search that finds a message just added can
only have found it in the conversation's read-your-writes tail (memray.conversation.read_your_writes).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memray
from memray import SearchRequest
from memray.config import EmbedderConfig
from memray.conversation.read_your_writes import Written

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
APP = "ryw"


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    path = str(tmp_path_factory.mktemp(f"ryw-{request.param}"))
    m = memray.open(config=memray.MemoryConfig(path=path, mode=request.param, hosts=2, shards=2, debounce_ms=60_000))
    yield m
    m.close(terminate=True)


def chat(n: int, fact_at: int, fact: str) -> list[dict[str, str]]:
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"small talk number {i} about the weekend"}
        for i in range(n)
    ]
    turns[fact_at] = {"role": "user", "content": fact}
    return turns


def fresh(mem: memray.Memory, user: str | None = None) -> memray.ConversationHandle:
    return mem.conversation(user_id=user or uuid.uuid4().hex[:8], conversation_id=uuid.uuid4().hex[:8], app=APP)


def test_a_message_just_added_is_found_by_search_and_context_without_waiting(mem):
    conv = fresh(mem)
    seqs = conv.add(chat(30, 3, "My niece keeps a purple elephant plush on her bed."))
    hits = conv.search("purple elephant", limit=3)
    assert [h.message.seq for h in hits][:1] == [seqs[3]] and not hits.degraded
    ctx = conv.context("what plush toy does my niece have?", limit=5, semantic_limit=2)
    assert [m.seq for m in ctx.messages[:5]] == seqs[-5:]  # the recent window: the fact is not in it
    assert ctx.recalled_ids[:1] == [hits[0].message.id] and not ctx.degraded


def test_context_sees_what_another_writer_added(mem):
    """A search sees what this process added; context sees what anyone added (the host's tail)."""
    conv = fresh(mem)
    conv.add(chat(12, 1, "The fire drill is on Thursday at noon."))
    other = mem.conversation(user_id=conv.key.user_id, conversation_id=conv.key.conversation_id, app=APP)
    mem.internals.recall.written = Written()  # as if another process had written it: this one keeps nothing
    ctx = other.context("when is the fire drill?", limit=2, semantic_limit=2)
    assert any("fire drill" in m.text for m in ctx.messages) and not ctx.degraded


def test_an_update_is_searched_in_its_newest_version_once_indexed(mem):
    conv = fresh(mem)
    conv.add({"id": "m1", "role": "assistant", "content": "The meeting is in the blue room."})
    conv.flush()
    assert mem.wait_indexed(30)
    conv.add({"id": "m1", "role": "assistant", "content": "Correction: the meeting moved to the cellar."})
    assert "cellar" in conv.context("where is the meeting?", limit=1, semantic_limit=0).messages[0].text
    conv.flush()
    assert mem.wait_indexed(30)
    hits = conv.search("cellar", limit=3)
    assert [h.message.id for h in hits] == ["m1"] and "cellar" in hits[0].message.text


def test_user_wide_search_sees_the_callers_other_conversations(mem):
    user = uuid.uuid4().hex[:8]
    writer, reader = fresh(mem, user), fresh(mem, user)
    writer.add(chat(8, 5, "The spare key hides under the third flowerpot."))
    reader.add({"role": "user", "content": "hello there"})
    assert [h.conversation_id for h in reader.search("spare key flowerpot", limit=2, scope="user")][:1] == [
        writer.key.conversation_id
    ]
    assert reader.search("spare key flowerpot", limit=2) == []  # conversation scope stays in its conversation


def test_a_query_about_nothing_in_memory_returns_nothing(mem):
    conv = fresh(mem)
    conv.add([{"role": "user", "content": "The weather is sunny"}, {"role": "assistant", "content": "Enjoy the sun!"}])
    conv.flush()
    assert mem.wait_indexed(30)
    for scope in ("conversation", "user"):
        for mode in ("hybrid", "vector", "lexical"):
            assert conv.search("programming rust", scope=scope, mode=mode) == [], (scope, mode)
    ctx = conv.context("programming rust", limit=1, semantic_limit=5)
    assert ctx.recalled_ids == [] and not ctx.degraded
    assert len(conv.search("programming rust", min_score=0.0)) == 2  # the floor can be lifted
    svc = mem.memory_service
    user = uuid.uuid4().hex[:8]
    svc.add_entries(APP, user, ["The weather is sunny"], session_id="s", replace_session=True)
    assert svc.search(SearchRequest(query="programming rust", user_id=user, app_name=APP)).memories == []
    assert [
        m.entry.text for m in svc.search(SearchRequest(query="sunny weather", user_id=user, app_name=APP)).memories
    ] == ["The weather is sunny"]


def test_context_min_score_drops_weak_recalls(mem):
    conv = fresh(mem)
    conv.add(chat(20, 2, "Our tent is a blue two-person dome tent."))
    weak = conv.context("blue dome tent for two people camping gear", limit=2, semantic_limit=5)
    assert weak.recalled_ids
    scores = {h.message.id: h.score for h in conv.search("blue dome tent for two people camping gear", limit=10)}
    strict = conv.context(
        "blue dome tent for two people camping gear", limit=2, semantic_limit=5, min_score=max(scores.values()) + 1e-9
    )
    assert strict.recalled_ids == []


def test_a_failing_embedder_leaves_the_lexical_tail_and_says_degraded(tmp_path, openai_server):
    config = memray.MemoryConfig(
        path=str(tmp_path / "m"),
        mode="inprocess",
        hosts=1,
        shards=1,
        debounce_ms=60_000,
        embedder=EmbedderConfig(
            kind="openai",
            model="fake-embed",
            dim=64,
            base_url=openai_server.url,
            max_retries=0,
            timeout_s=2,
            cache_size=0,
        ),
    )
    with memray.open(config=config) as m:
        openai_server.fail_always(503)
        conv = fresh(m)
        seqs = conv.add(chat(12, 1, "The boat is moored at pier nineteen."))
        hits = conv.search("which pier is the boat at?", limit=2)
        assert [h.message.seq for h in hits][:1] == [seqs[1]]
        assert hits.degraded and "query embedding failed" in (hits.reason or "")
        ctx = conv.context("which pier is the boat at?", limit=3, semantic_limit=1)
        assert ctx.recalled_ids == [hits[0].message.id] and ctx.degraded
        openai_server.clear_failures()


def test_the_tail_is_scored_by_vector_too_when_the_embedder_is_recomputable(mem):
    """The hash embedder is cheap: the caller embeds the tail itself, so a just-added message
    is found in vector mode, with the same score the shard gives it once indexed."""
    conv = fresh(mem)
    conv.add(chat(6, 2, "Grandma's lemon drizzle cake recipe uses three lemons."))
    before = conv.search("lemon drizzle cake recipe", limit=1, mode="vector")
    assert [h.message.text for h in before] == ["Grandma's lemon drizzle cake recipe uses three lemons."]
    conv.flush()
    assert mem.wait_indexed(30)
    after = conv.search("lemon drizzle cake recipe", limit=1, mode="vector")
    assert [h.message.id for h in after] == [before[0].message.id]
    assert after[0].score == pytest.approx(before[0].score, abs=1e-5)


def test_what_this_process_remembers_for_search_goes_with_every_delete(mem):
    user = uuid.uuid4().hex[:8]
    a, b, c = fresh(mem, user), fresh(mem, user), fresh(mem, user)
    for conv in (a, b, c):
        conv.add({"id": "gift", "role": "user", "content": "The surprise gift is a violin."})
        assert [h.message.id for h in conv.search("surprise gift violin")] == ["gift"]
    a.delete_messages(["gift"])
    b.delete()
    assert a.search("surprise gift violin") == [] and b.search("surprise gift violin") == []
    assert [h.message.id for h in c.search("surprise gift violin", scope="user")] == ["gift"]
    receipt = mem.delete_user(app=APP, user_id=user)
    assert receipt.counts["caches"] >= 1
    assert c.search("surprise gift violin", scope="user") == []
    proof = mem.verify_deleted(app=APP, user_id=user)
    assert proof.remaining["read_your_writes"] == 0 and proof.clean


def test_a_context_whose_tail_it_shows_already_answers_as_if_the_tail_were_scored(mem, monkeypatch):
    """The messages just added are the recent ones a context shows: a tail made only of those
    changes no recalled message, so it is not scored (recall._shown_only) — and the answer is
    what scoring it gives."""
    import memray.conversation.recall as recall

    conv = fresh(mem)
    conv.add(chat(10, 2, "The spare key is under the blue flowerpot by the shed."))
    conv.flush()
    assert mem.wait_indexed(30)
    conv.add(chat(2, 0, "Where did I leave the spare key?"))  # the tail: two messages, both shown
    asked: list[int] = []
    kernel = recall.score_tails

    def counted(batch, weight):  # type: ignore[no-untyped-def]
        asked.append(len(batch))
        return kernel(batch, weight)

    monkeypatch.setattr(recall, "score_tails", counted)
    skipped = conv.context("where is the spare key?", limit=4, semantic_limit=2)
    assert asked == []  # the tail was not scored
    monkeypatch.setattr(recall, "_shown_only", lambda searched, pending: False)
    scored = conv.context("where is the spare key?", limit=4, semantic_limit=2)
    assert asked == [1]  # now it was
    assert skipped.recalled_ids == scored.recalled_ids and skipped.recalled_ids
    assert [m.id for m in skipped.messages] == [m.id for m in scored.messages]
    assert skipped.degraded == scored.degraded is False
