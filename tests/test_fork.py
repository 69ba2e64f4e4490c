"""`mem.fork(path)`: a consistent, independent copy of the whole memray, taken while agents keep
writing, in both modes; and `memray fork SRC DST`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import memray
from memray import MemoryEntry, SearchRequest
from memray.errors import ValidationError
from memray.index.keeper import reconcile_shard

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return str(request.param)


@pytest.fixture
def source(tmp_path: Path, mode: str) -> Iterator[memray.Memory]:
    mem = memray.open(str(tmp_path / "source"), mode=mode, hosts=1, shards=1, debounce_ms=10)
    yield mem
    mem.close(terminate=True)


def items_of(mem: memray.Memory) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(every item the shard holds, every item with text in the store), as (scope, doc_id)."""
    held = mem.internals.run(mem.internals.deployment.shards[0].inventory())
    rows = mem.internals.run(
        mem.internals.deployment.stores.clients[0].scan_index_rows(
            0, 1, mem.internals.embedder.model_id, None, 100_000, True
        )
    )
    return {(ns[3], doc) for ns, doc in held}, {(r.namespace[3], r.doc_id) for r in rows}


def test_a_fork_holds_every_kind_of_memory_and_lives_on_its_own(source, tmp_path):
    conv = source.conversation(user_id="ada", conversation_id="town")
    conv.add([{"id": "m1", "role": "user", "content": "the bakery opens at six", "sim_time": 60.0, "importance": 0.4}])
    conv.working_memory.update("Ada runs the bakery")
    source.internals.run(source.internals.deployment.stores.put_summary(conv.key, "Ada bakes bread", 1, 0))
    source.memory_service.add_entry("default", "ada", MemoryEntry(id="e1", content="Ada is allergic to walnuts"))

    fork = source.fork(str(tmp_path / "branch"))
    try:
        assert set(fork.fork_info or {}) >= {"seconds", "store_s", "shards_s", "store_bytes"}
        fconv = fork.conversation(user_id="ada", conversation_id="town")
        assert [(m.id, m.sim_time, m.importance) for m in fconv.messages()] == [("m1", 60.0, 0.4)]
        assert fconv.working_memory.get().text == "Ada runs the bakery"
        assert fconv.summary() == "Ada bakes bread"
        assert [h.message.id for h in fconv.search("when does the bakery open")] == ["m1"]
        found = fork.memory_service.search(SearchRequest(query="walnuts", user_id="ada"))
        assert [m.entry.id for m in found.memories] == ["e1"]
        # the hash embedder's vectors are not stored: the fork's shard recomputes them from the text
        assert fork.wait_indexed()
        assert fork.internals.run(fork.internals.deployment.shards[0].stats())["vectors"] == 2
        model = source.internals.embedder.model_id
        store = source.internals.deployment.stores.clients[0]
        assert source.wait_indexed() and source.internals.run(store.scan_index_rows(0, 1, model, None, 10)) == []

        fconv.add({"id": "branch", "role": "user", "content": "the bakery burned down"})
        conv.add({"id": "trunk", "role": "user", "content": "the bakery won a prize"})
        assert [m.id for m in fconv.messages()] == ["m1", "branch"]
        assert [m.id for m in conv.messages()] == ["m1", "trunk"]
        assert fconv.search("prize") == [] and conv.search("burned") == []
        fork.delete_user(app="default", user_id="ada")
        assert [m.id for m in conv.messages()] == ["m1", "trunk"]
    finally:
        fork.close()
    assert not (tmp_path / "branch" / "exports").exists()


def test_a_fork_taken_while_agents_write_is_one_point_in_time(source, tmp_path):
    convs = [source.conversation(user_id=f"agent{i}", conversation_id="stream") for i in range(3)]
    acked: list[list[str]] = [[] for _ in convs]
    stop, warmed = threading.Event(), threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            for c, done in zip(convs, acked):
                c.add(
                    {
                        "id": f"{c.key.user_id}-{n}",
                        "role": "user",
                        "content": f"observation number {n} of {c.key.user_id}",
                    }
                )
                done.append(f"{c.key.user_id}-{n}")
            n += 1
            if n == 20:
                warmed.set()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert warmed.wait(120)
        before = [list(done) for done in acked]  # acknowledged before fork() was called
        fork = source.fork(str(tmp_path / "branch"))
    finally:
        stop.set()
        writer.join()
    try:
        for c, had, all_acked in zip(convs, before, acked):
            got = [m.id for m in fork.conversation(user_id=c.key.user_id, conversation_id="stream").messages()]
            assert got == all_acked[: len(got)]  # a prefix: no gap, nothing invented
            assert len(got) >= len(had)  # everything acknowledged before the fork
            assert [
                m.seq for m in fork.conversation(user_id=c.key.user_id, conversation_id="stream").messages()
            ] == list(range(1, len(got) + 1))
        held, stored = items_of(fork)
        assert held == stored  # the fork's indexes hold exactly the fork's items...
        assert fork.wait_indexed()  # the fork embeds what the source had not embedded yet
        model = fork.internals.embedder.model_id
        rows, stale, extra = fork.internals.run(
            reconcile_shard(fork.internals.deployment.shards[0], fork.internals.deployment.stores, 0, 1, model)
        )
        assert rows == len(stored) and (stale, extra) == (0, 0)  # ...each as the fork's store has it
    finally:
        fork.close()


class Writer:
    """A thread adding numbered messages to one conversation until stopped (what is acknowledged
    is in ``acked``, in order)."""

    def __init__(self, conv: memray.ConversationHandle, name: str) -> None:
        self.conv, self.name = conv, name
        self.acked: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            mid = f"{self.name}-{n}"
            self.conv.add({"id": mid, "role": "user", "content": f"the {self.name} goes on: entry {n}"})
            self.acked.append(mid)
            n += 1

    def start(self, warm: int = 10) -> Writer:
        self._thread.start()
        deadline = time.monotonic() + 120
        while len(self.acked) < warm:  # wait on state: some messages acknowledged
            assert self._thread.is_alive() and time.monotonic() < deadline, "the writer does not write"
            time.sleep(0.01)
        return self

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(120)
        self.conv.flush()
        return self.acked


def check_branches(trunk: Writer, before: list[str], branch: Writer, fork: memray.Memory) -> None:
    """The fork holds what the trunk acknowledged before the fork (a prefix of what it wrote, at
    the same seqs) and its own writes; the trunk holds none of the branch's, and each finds only
    its own words."""
    forked = fork.conversation(user_id=trunk.conv.key.user_id, conversation_id=trunk.conv.key.conversation_id)
    got = forked.messages()
    from_trunk = [m.id for m in got if m.id.startswith("trunk")]
    assert from_trunk == trunk.acked[: len(from_trunk)] and len(from_trunk) >= len(before)
    assert [m.id for m in got if m.id.startswith("branch")] == branch.acked
    assert [m.seq for m in got] == list(range(1, len(got) + 1))
    source = trunk.conv.messages()
    assert [m.id for m in source] == trunk.acked and [m.seq for m in source[: len(from_trunk)]] == [
        m.seq for m in got[: len(from_trunk)]
    ]
    assert [h.message.id for h in forked.search("the branch goes on", limit=1)][0].startswith("branch")
    assert all(h.message.id.startswith("trunk") for h in trunk.conv.search("the branch goes on", limit=3))


CROSS = [
    pytest.param("ray", "inprocess", {}, id="ray-to-inprocess", marks=pytest.mark.ray),
    pytest.param("ray", "ray", {"namespace": "memray-branch"}, id="ray-to-ray-namespace", marks=pytest.mark.ray),
    pytest.param("inprocess", "ray", {"namespace": "memray-branch"}, id="inprocess-to-ray", marks=pytest.mark.ray),
]


@pytest.mark.parametrize(("source_mode", "fork_mode", "options"), CROSS)
def test_a_fork_opens_in_another_mode_while_its_source_runs_and_both_are_written(
    ray_session: None, tmp_path: Path, source_mode: str, fork_mode: str, options: dict[str, str]
) -> None:
    source = memray.open(str(tmp_path / "source"), mode=source_mode, hosts=1, shards=1, debounce_ms=10)
    try:
        trunk = Writer(source.conversation(user_id="ada", conversation_id="town"), "trunk").start()
        before = list(trunk.acked)  # acknowledged before fork() was called
        fork = source.fork(str(tmp_path / "branch"), mode=fork_mode, **options)  # type: ignore[arg-type]
        try:
            assert fork.config.mode == fork_mode and fork.config.namespace == options.get("namespace", "memray")
            branch = Writer(fork.conversation(user_id="ada", conversation_id="town"), "branch").start()
            branch.stop(), trunk.stop()  # both written at once until here
            check_branches(trunk, before, branch, fork)
        finally:
            fork.close()
    finally:
        source.close(terminate=True)


@pytest.mark.ray
def test_a_fork_opens_in_another_process_while_its_source_runs_and_writes(ray_session: None, tmp_path: Path) -> None:
    """``fork_to`` copies without opening: another process opens the fork (here in-process) and
    writes it while the source, in Ray mode, keeps writing."""
    source = memray.open(str(tmp_path / "source"), mode="ray", hosts=1, shards=1, debounce_ms=10)
    try:
        trunk = Writer(source.conversation(user_id="ada", conversation_id="town"), "trunk").start()
        before = list(trunk.acked)
        info = source.fork_to(str(tmp_path / "branch"))
        assert info["path"] == str(tmp_path / "branch")
        script = (
            "import json, sys, memray\n"
            "with memray.open(sys.argv[1], mode='inprocess', hosts=1, shards=1) as fork:\n"
            "    conv = fork.conversation(user_id='ada', conversation_id='town')\n"
            "    conv.add([{'id': f'branch-{n}', 'role': 'user', 'content': f'the branch goes on: entry {n}'}"
            " for n in range(5)], durable=True)\n"
            "    print(json.dumps([m.id for m in conv.messages()]))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "branch")], capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr
        in_branch = json.loads(out.stdout.strip().splitlines()[-1])
        trunk.stop()
        from_trunk = [i for i in in_branch if i.startswith("trunk")]
        assert from_trunk == trunk.acked[: len(from_trunk)] and len(from_trunk) >= len(before)
        assert in_branch[len(from_trunk) :] == [f"branch-{n}" for n in range(5)]
        assert not [m for m in trunk.conv.messages() if m.id.startswith("branch")]
    finally:
        source.close(terminate=True)


def test_fork_refuses_a_path_inside_the_source_or_not_empty(tmp_path):
    source = memray.open(
        str(tmp_path / "source"), mode="inprocess", hosts=1, shards=1
    )  # checked before any mode's work
    source.conversation(user_id="u", conversation_id="c").add({"role": "user", "content": "x"})
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    for bad in (source.config.root, str(Path(source.config.root) / "inner"), str(busy), str(tmp_path)):
        with pytest.raises(ValidationError, match="path"):
            source.fork(bad)
    assert (busy / "keep.txt").read_text() == "mine" and not (Path(source.config.root) / "inner").exists()
    source.close()


def test_cli_forks_a_closed_data_directory(tmp_path):
    with memray.open(str(tmp_path / "src"), mode="inprocess", hosts=1, shards=1) as mem:
        mem.conversation(user_id="u", conversation_id="c").add(
            {"role": "user", "content": "kept in both"}, durable=True
        )
    out = subprocess.run(
        [sys.executable, "-m", "memray.cli", "fork", str(tmp_path / "src"), str(tmp_path / "dst")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["dst"] == str(tmp_path / "dst") and report["seconds"] > 0
    with memray.open(str(tmp_path / "dst"), mode="inprocess", hosts=1, shards=1) as fork:
        assert [m.text for m in fork.conversation(user_id="u", conversation_id="c").messages()] == ["kept in both"]
    bad = subprocess.run(
        [sys.executable, "-m", "memray.cli", "fork", str(tmp_path / "src"), str(tmp_path / "dst")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "already exists" in bad.stderr


@pytest.mark.ray
def test_cli_fork_joins_a_memray_running_on_its_source_and_opens_a_closed_one_in_process(
    ray_session: None, tmp_path: Path
) -> None:
    from memray.cli import fork_mode

    src = str(tmp_path / "src")
    running = memray.open(src, mode="ray", hosts=1, shards=1)
    try:
        assert fork_mode(src, 1, None) == "ray"  # joined: its writers go on
    finally:
        running.close(terminate=True)
    assert fork_mode(src, 1, None) == "inprocess"  # nothing runs on it: no Ray started for a copy
    assert fork_mode(src, 1, "127.0.0.1:6379") == "ray"  # a Ray named is joined


def test_a_marked_shard_is_made_exact_from_the_changes_alone(tmp_path):
    """The in-process open of a fork: items the store lacks go, missing items and vectors come,
    items written after the copy are re-read (their kept JSON dropped), untouched ones stay."""
    import asyncio
    from collections import Counter

    import numpy as np

    from memray.config import IndexConfig
    from memray.ids import Namespace
    from memray.index import IndexItem
    from memray.index.client import ShardClient
    from memray.index.keeper import reconcile_marked
    from memray.index.recovery import RecoveringShard
    from memray.rpc.local import LocalRef
    from memray.store.client import StoreClient
    from memray.store.history import HistoryStore
    from memray.store.rows import EmbeddingRow, MessageRow
    from memray.text import index_terms

    store = HistoryStore(str(tmp_path / "h.duckdb"))
    store.open()
    ns = Namespace("a", "u", "conv", "c")
    rows = [
        MessageRow(
            "a", "u", "c", f"m{i}", i + 1, "user", f'[{{"type":"text","text":"note {i}"}}]', "{}", 1.0, f"note {i}"
        )
        for i in range(4)
    ]
    store.append_messages(rows)
    vec = np.ones(8, dtype=np.float32) / np.sqrt(8)
    store.put_embeddings([EmbeddingRow(ns, f"m{i}", "m8", vec) for i in range(4)])
    shard = RecoveringShard(0, str(tmp_path / "s"), 8, "m8", IndexConfig(), recovering=False)
    shard.open()
    shard.upsert(
        [
            IndexItem(ns, "m0", vec, "note 0", 1.0, "kept"),
            IndexItem(ns, "m1", None, "note 1", 2.0, "lexical only"),
            IndexItem(ns, "m2", vec, "note 2 newer", 3.0, "newer json"),
            IndexItem(ns, "late", vec, "after the copy", 9.0, "x"),
        ],
        "m8",
    )
    s, st = LocalRef(shard, "shard"), LocalRef(store, "store")
    try:
        marked = reconcile_marked(ShardClient(s), StoreClient(st), 0, 1, "m8", [(ns, "m2"), (ns, "late")])
        upserted, deleted = asyncio.run(marked)
    finally:
        s.shutdown()
        st.shutdown()
    space = shard._spaces[ns]
    assert deleted == 1 and sorted(space.labels) == ["m0", "m1", "m2", "m3"]
    assert upserted == 3  # m1 (its vector), m2 (written after the copy), m3 (missing)
    assert space.payload.get("m0") == "kept" and "m2" not in space.payload
    assert space.lexical.terms("m2") == dict(Counter(index_terms("note 2")))  # the copy's version
    assert sorted(shard.vectored_refs()) == [(ns, f"m{i}") for i in range(4)]
    store.close()
