"""The facade, in both modes, through one parametrised suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator

import pytest

import memray
from memray.errors import InvalidIdError, ValidationError

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]


def small_config(path: str, mode: str) -> memray.MemoryConfig:
    return memray.MemoryConfig(path=path, mode=mode, hosts=2, shards=2, debounce_ms=20)


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    m = memray.open(config=small_config(str(tmp_path_factory.mktemp(f"mem-{request.param}")), request.param))
    yield m
    m.close(terminate=True)


def fresh(mem: memray.Memory, user: str = "u1") -> memray.ConversationHandle:
    return mem.conversation(user_id=user, conversation_id=uuid.uuid4().hex, app="tests")


def test_add_assigns_increasing_seqs_and_reads_back_in_order(mem):
    conv = fresh(mem)
    assert conv.add([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]) == [1, 2]
    assert conv.add({"role": "user", "content": "again"}) == [3]
    msgs = conv.messages()
    assert [m.seq for m in msgs] == [1, 2, 3]
    assert [m.text for m in msgs] == ["hi", "hello", "again"]


def test_limit_is_most_recent_n_oldest_first_and_cursors_page(mem):
    conv = fresh(mem)
    conv.add([{"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(1, 41)])
    assert [m.text for m in conv.messages(limit=3)] == ["m38", "m39", "m40"]
    assert [m.seq for m in conv.messages(limit=2, before_seq=10)] == [8, 9]
    assert [m.seq for m in conv.messages(after_seq=37)] == [38, 39, 40]
    assert {m.role for m in conv.messages(roles=["user"])} == {"user"}
    conv.flush()
    assert [m.seq for m in conv.messages(limit=2, before_seq=3)] == [1, 2]  # from the store


def test_readding_an_id_updates_in_place(mem):
    conv = fresh(mem)
    conv.add([{"id": "m1", "role": "user", "content": "draft"}], durable=True)
    first = conv.messages()[0]
    assert conv.add([{"id": "m1", "role": "user", "content": "final", "metadata": {"edited": True}}]) == [1]
    conv.flush()
    again = conv.messages()
    assert len(again) == 1
    assert again[0].text == "final" and again[0].seq == 1 and again[0].created_at == first.created_at


def test_durable_add_is_in_the_store_when_it_returns(mem):
    conv = fresh(mem)
    conv.add({"role": "user", "content": "durable please"}, durable=True)
    rows = mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))
    assert [r.text for r in rows] == ["durable please"]


def test_search_finds_the_relevant_message(mem):
    conv = fresh(mem)
    conv.add(
        [
            {"role": "user", "content": "My sister lives in Reykjavik and loves knitting."},
            {"role": "user", "content": "The quarterly budget review is on Thursday."},
            {"role": "user", "content": "I adopted a grey cat named Pixel."},
        ]
    )
    assert mem.wait_indexed(30)
    hits = conv.search("what is my cat called?", limit=2)
    assert hits and "Pixel" in hits[0].message.text
    assert 0.0 <= hits[0].score <= 1.0
    assert not hits.degraded


def test_context_has_recent_and_recalled_without_duplicates(mem):
    conv = fresh(mem)
    conv.add({"role": "user", "content": "My passport number ends in 4471."})
    conv.add([{"role": "user", "content": f"small talk {i} about the weather"} for i in range(12)])
    assert mem.wait_indexed(30)
    ctx = conv.context("what does my passport number end in?", limit=4, semantic_limit=2)
    ids = [m.id for m in ctx.messages]
    assert len(ids) == len(set(ids))
    assert any("4471" in m.text for m in ctx.messages)
    assert not ctx.degraded


def test_queries_with_any_characters_are_safe(mem):
    conv = fresh(mem)
    conv.add({"role": "user", "content": "don't forget the 'quoted' thing - really?"})
    assert mem.wait_indexed(30)
    for q in ['"', "?", "-", "don't", "a OR b", "", "日本語", "*:()"]:
        conv.search(q, limit=3)
    assert conv.search("dont forget", limit=1, mode="lexical")


@pytest.mark.parametrize(
    "field,kwargs",
    [
        ("user_id", dict(user_id="", conversation_id="c")),
        ("conversation_id", dict(user_id="u", conversation_id="x" * 257)),
        ("app", dict(user_id="u", conversation_id="c", app="a\x00")),
    ],
)
def test_invalid_ids_raise_and_write_nothing(mem, field, kwargs):
    with pytest.raises(InvalidIdError, match=field):
        mem.conversation(**kwargs)


def test_bad_messages_raise_and_write_nothing(mem):
    conv = fresh(mem)
    with pytest.raises(ValidationError, match="role"):
        conv.add([{"role": "user", "content": "ok"}, {"role": "robot", "content": "no"}])
    with pytest.raises(ValidationError, match="parts"):
        conv.add([{"role": "user", "content": [{"type": "tool"}]}])
    with pytest.raises(InvalidIdError, match="message.id"):
        conv.add([{"id": "", "role": "user", "content": "x"}])
    assert conv.messages() == []


def test_many_threads_adding_to_one_conversation_get_one_total_order(mem):
    conv = fresh(mem)
    got: list[list[int]] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        for i in range(10):
            seqs = conv.add({"id": f"t{t}-{i}", "role": "user", "content": f"{t}/{i}"})
            with lock:
                got.append(seqs)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    conv.flush()
    seqs = sorted(s for batch in got for s in batch)
    assert seqs == list(range(1, 61))
    stored = mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))
    assert sorted(r.seq for r in stored) == seqs and len({r.id for r in stored}) == 60


def test_add_many_routes_to_hosts_and_keeps_per_item_seqs(mem):
    convs = [fresh(mem, user=f"user{i}") for i in range(8)]
    seqs = mem.add_many([(c, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]) for c in convs])
    assert seqs == [[1, 2]] * 8
    mem.flush()
    for c in convs:
        assert [m.text for m in c.messages()] == ["a", "b"]


def test_async_twins(mem):
    import asyncio

    conv = fresh(mem)

    async def main() -> list[int]:
        await conv.aadd({"role": "user", "content": "async hi"})
        await conv.aflush()
        return [m.seq for m in await conv.amessages()]

    assert asyncio.run(main()) == [1]


def test_reopen_in_a_new_process_keeps_messages_order_and_search(tmp_path):
    path = str(tmp_path / "data")
    writer = textwrap.dedent(
        f"""
        import memray
        with memray.open({path!r}, mode="inprocess", hosts=1, shards=1) as mem:
            conv = mem.conversation(user_id="u", conversation_id="c")
            conv.add([{{"role": "user", "content": f"note {{i}}: the code word is walrus{{i}}"}} for i in range(25)])
        """
    )
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=120)
    with memray.open(path, mode="inprocess", hosts=1, shards=1) as mem:
        conv = mem.conversation(user_id="u", conversation_id="c")
        msgs = conv.messages()
        assert [m.seq for m in msgs] == list(range(1, 26))
        hits = conv.search("walrus17", limit=1)
        assert hits and "walrus17" in hits[0].message.text
        assert conv.add({"role": "user", "content": "after reopen"}) == [26]


@pytest.mark.ray
def test_ray_tasks_and_a_second_driver_share_one_conversation(mem, tmp_path):
    if mem.config.mode != "ray":
        pytest.skip("Ray tasks need mode='ray'")
    import ray

    key = fresh(mem).key
    config = mem.config

    @ray.remote(num_cpus=0)
    def writer(t: int) -> list[int]:
        other = memray.open(config=config)  # joins the running Ray: same named actors
        try:
            conv = other.conversation(key.user_id, key.conversation_id, key.app)
            return [conv.add({"id": f"task{t}-{i}", "role": "user", "content": f"{t}:{i}"})[0] for i in range(5)]
        finally:
            other.close()

    results = ray.get([writer.remote(t) for t in range(4)])
    seqs = sorted(s for r in results for s in r)
    assert seqs == list(range(1, 21))
    conv = mem.conversation(key.user_id, key.conversation_id, key.app)
    conv.flush()
    assert [m.seq for m in conv.messages()] == seqs


@pytest.mark.ray
def test_every_actor_process_runs_with_the_raised_collector_thresholds(mem):
    """memray's actors allocate a few dozen objects a message: at CPython's 700 the collector ran
    thousands of times a tick (memray.runtime.collector)."""
    if mem.config.mode != "ray":
        pytest.skip("reads Ray actors' processes")
    import gc

    import ray

    from memray.runtime.collector import FIRST_THRESHOLD, OLDER_THRESHOLDS

    deployment = mem.internals.deployment
    refs = [c.ref for c in (*deployment.hosts, *deployment.shards, *deployment.stores.clients)]
    got = ray.get([ref.handle.__ray_call__.remote(lambda _self: gc.get_threshold()) for ref in refs], timeout=120)
    assert got == [(FIRST_THRESHOLD, *OLDER_THRESHOLDS)] * len(refs)


@pytest.mark.ray
def test_a_killed_host_loses_nothing_acknowledged_durably(mem):
    if mem.config.mode != "ray":
        pytest.skip("kills a Ray actor")
    import time

    import ray

    conv = fresh(mem)
    conv.add([{"role": "user", "content": f"durable {i}"} for i in range(5)], durable=True)
    host = mem.internals.host_for(conv.key)
    old_pid = mem.internals.run(host.stats())["pid"]
    ray.kill(host.ref.handle, no_restart=False)  # Ray restarts it; its memory is gone
    deadline = time.monotonic() + 60
    while mem.internals.run(host.stats())["pid"] == old_pid:  # the kill lands asynchronously: wait for the new process
        assert time.monotonic() < deadline, "the host was not restarted"
        time.sleep(0.05)
    while True:
        try:
            texts = [m.text for m in conv.messages()]
            break
        except memray.UnavailableError:
            assert time.monotonic() < deadline, "the host did not come back"
            time.sleep(0.2)
    assert texts == [f"durable {i}" for i in range(5)]
    assert conv.add({"role": "user", "content": "after restart"}) == [6]


def test_context_sees_each_summary_and_working_memory_write_at_once(mem):
    """The store keeps context()'s summary and working memory between calls: every write to them
    must be seen by the very next context() (both modes)."""
    user = f"ctx-{uuid.uuid4().hex[:8]}"
    conv = mem.conversation(user_id=user, conversation_id="a", app="tests")
    shared = memray.WorkingMemorySpec(scope="user")
    mine, theirs = (mem.conversation(user, c, app="tests", working_memory=shared) for c in ("b", "c"))
    conv.add([{"role": "user", "content": "I like tea"}, {"role": "assistant", "content": "noted"}])
    assert (conv.context().summary, conv.context().working_memory, theirs.context().working_memory) == (None,) * 3
    conv.working_memory.update("likes tea")
    assert "likes tea" in (conv.context().working_memory or "")
    mine.working_memory.update("user-wide note")  # every conversation of the user, at once
    assert "user-wide note" in (theirs.context().working_memory or "")
    assert "user-wide note" not in (conv.context().working_memory or "")
    mem.internals.run(mem.internals.deployment.stores.put_summary(conv.key, "they talked about tea", 1, 0))
    assert conv.context().summary == "they talked about tea"
    conv.working_memory.clear()
    assert conv.context().working_memory is None
    conv.clear()  # drops the summary with the messages
    assert conv.context().summary is None
    assert "user-wide note" in (theirs.context().working_memory or "")
