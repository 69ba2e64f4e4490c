"""The conformance suite of the history store's contract, run the ways the cores reach a store: a
:class:`~memray.store.client.StoreClient` over an in-process ref (``mode="inprocess"``) and over
the store actor in Ray (``mode="ray"``: the priority gate, every argument and result pickled,
errors re-raised as themselves). The module-level tests next to this one check each store module
directly; this one checks that the contract holds end to end through the client, in both modes.

Each test works in an app of its own, so the two stores are made once per module.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from memray.errors import ConflictError, NotFoundError, ValidationError
from memray.ids import ConversationKey, Namespace, conversation_namespace, entry_namespace
from memray.models import MessageFilter
from memray.rpc.client import Priority
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient
from memray.store.deadletter import DeadLetter
from memray.store.history import HistoryStore
from memray.store.messages import Correction
from memray.store.rows import EmbeddingRow, MessageRow
from tests.store.conftest import entry, msg

T = TypeVar("T")
MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
MODEL = "conformance-model"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(scope="module", params=MODES)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreClient]:
    path = str(tmp_path_factory.mktemp("store") / "history.duckdb")
    if request.param == "inprocess":
        core = HistoryStore(path)
        ref = LocalRef(core, "history store")
        client = StoreClient(ref)
        run(client.open({"mode": "inprocess", "role": "conformance store"}))
        yield client
        run(client.close())
        ref.shutdown()
        return
    request.getfixturevalue("ray_session")
    import ray

    from memray.runtime.actors import PROBE, RayRef, StoreActor

    actor = ray.remote(concurrency_groups={PROBE: 1})(StoreActor)  # as RayDeployment makes it
    handle = actor.options(num_cpus=0, max_concurrency=32).remote(path, "memray-tests")
    client = StoreClient(RayRef(handle, "history store"))
    assert run(client.ping())
    yield client
    run(client.close())
    ray.kill(handle, no_restart=True)


@pytest.fixture
def key() -> ConversationKey:
    return ConversationKey(f"app-{uuid.uuid4().hex[:8]}", "u1", "c1")


def rows(key: ConversationKey, n: int, start: int = 1, **kw: Any) -> list[MessageRow]:
    return [msg(i, key, **kw) for i in range(start, start + n)]


def test_the_suite_calls_every_method_of_the_store() -> None:
    called = {m.group(1) for m in re.finditer(r"\bstore\.(\w+)\(", Path(__file__).read_text())}
    assert set(StoreClient.calls()) <= called, f"not exercised here: {set(StoreClient.calls()) - called}"


def test_lifecycle_answers_and_a_closed_store_opens_again(store: StoreClient, key: ConversationKey) -> None:
    assert run(store.ping()) is True
    assert isinstance(run(store.pid()), int)
    run(store.append_messages(rows(key, 1)))
    run(store.close())
    run(store.open({"role": "reopened by the conformance suite"}))
    assert [r.id for r in run(store.get_messages(key))] == ["m1"]


def test_api_keys_are_stored_listed_and_revoked(store: StoreClient) -> None:
    from memray.store.keys import KeyRecord

    record = KeyRecord("k1", "d" * 64, "acme", "ada", True, "ci", 1.0)
    run(store.put_api_key(record))
    run(store.put_api_key(record._replace(key_id="k2", app="other", user_id=None, read_only=False)))
    assert [r.key_id for r in run(store.api_keys("acme"))] == ["k1"] and len(run(store.api_keys(None))) == 2
    assert run(store.revoke_api_key("k1", 2.0)) is True and run(store.revoke_api_key("k1", 3.0)) is False
    assert run(store.api_keys("acme"))[0] == record._replace(revoked_at=2.0)
    # a user's erasure deletes every key bound to them, revoked or not, and nothing else
    run(store.put_api_key(record._replace(key_id="k3")))
    assert run(store.count_user_api_keys("acme", "ada")) == 2
    assert run(store.delete_user_api_keys("acme", "ada")) == 2
    assert run(store.count_user_api_keys("acme", "ada")) == 0 and run(store.delete_user_api_keys("acme", "ada")) == 0
    assert [r.key_id for r in run(store.api_keys(None))] == ["k2"]


def test_message_writes_and_reads_keep_seq_order_and_every_filter(store: StoreClient, key: ConversationKey) -> None:
    assert run(store.append_messages(rows(key, 3, role="user"))) == []
    result = run(store.commit_messages([msg(4, key, role="assistant", metadata={"tag": "x"}), msg(5, key)]))
    assert (result.corrections, result.rejected) == ([], [])
    stats = run(store.write_stats())  # the commits' own time, for the ingest benchmark
    assert stats["commits"] == 1 and stats["rows"] == 2 and stats["busy_s"] > 0
    got = run(store.get_messages(key))
    assert [r.seq for r in got] == [1, 2, 3, 4, 5]
    assert [r.seq for r in run(store.get_messages(key, MessageFilter(limit=2)))] == [4, 5]
    assert [r.seq for r in run(store.get_messages(key, MessageFilter(before_seq=3)))] == [1, 2]
    assert [r.seq for r in run(store.get_messages(key, MessageFilter(after_seq=3)))] == [4, 5]
    assert [r.seq for r in run(store.get_messages(key, MessageFilter(roles=["assistant"])))] == [4]
    assert [r.seq for r in run(store.get_messages(key, MessageFilter(metadata={"tag": "x"})))] == [4]
    fetched = run(
        store.fetch_messages(key.app, key.user_id, [(key.conversation_id, "m5"), (key.conversation_id, "m1")])
    )
    assert [r.id for r in fetched] == ["m5", "m1"]
    assert run(store.stored_seqs([(key, ["m2", "m9"])])) == [{"m2": 2}]
    assert run(store.assigned_seqs([(key, ["m2", "m9"])])) == [{"m2": 2}]
    snap = run(store.load_conversation(key, 2))
    assert (snap.exists, snap.last_seq, [r.seq for r in snap.recent]) == (True, 5, [4, 5])
    other = ConversationKey(key.app, key.user_id, "never")
    snaps = run(store.load_conversations([key, other], 1))
    assert [(s.exists, s.last_seq) for s in snaps] == [(True, 5), (False, 0)]


def test_a_re_added_id_keeps_its_seq_and_says_so(store: StoreClient, key: ConversationKey) -> None:
    run(store.append_messages(rows(key, 2)))
    corrections = run(store.append_messages([msg(1, key, seq=7, text="edited")]))
    assert corrections == [Correction(key.app, key.user_id, key.conversation_id, "m1", 1, 1001.0)]
    assert corrections[0].seq == 1 and isinstance(corrections[0], Correction)
    assert [r.text for r in run(store.get_messages(key))] == ["edited", "message 2"]


def test_dead_letters_keep_their_seqs_and_are_listed(store: StoreClient, key: ConversationKey) -> None:
    bad = msg(2, key)._replace(created_at=float("nan"))
    result = run(store.commit_messages([msg(1, key), bad, msg(3, key)]))
    assert [r.seq for r in run(store.get_messages(key))] == [1, 3]
    assert [(d.id, d.seq, d.kind) for d in result.rejected] == [("m2", 2, "rejected")] and result.positions == [1]
    lost = DeadLetter(key.app, key.user_id, key.conversation_id, "m9", 9, "lost", "host killed", "")
    assert run(store.record_dead_letters([lost])) == 1
    letters = run(store.dead_letters(key.app))
    assert {(d.id, d.kind) for d in letters} == {("m2", "rejected"), ("m9", "lost")}
    assert all(isinstance(d, DeadLetter) for d in letters)
    counts = run(store.count_dead_letters())
    assert counts["rejected"] >= 1 and counts["lost"] >= 1
    resolved = run(store.resolve_acknowledged([(key, "m3", 3), (key, "m10", 10)], "not stored"))
    assert [(d.id, d.seq, d.kind) for d in resolved] == [("m10", 10, "lost")]
    assert run(store.load_conversation(key, 5)).last_seq == 10  # a dead letter's seq is never given again


def test_conversations_are_created_listed_updated_and_deleted(store: StoreClient, key: ConversationKey) -> None:
    info = run(store.create_conversation(key, "Trip", {"a": 1}))
    assert (info["title"], info["metadata"]) == ("Trip", {"a": 1})
    assert run(store.get_conversation(key))["conversation_id"] == key.conversation_id
    run(store.update_conversation(key, None, {"b": 2}))
    assert run(store.get_conversation(key))["metadata"] == {"a": 1, "b": 2}  # merged, not clobbered
    second = ConversationKey(key.app, key.user_id, "c2")
    run(store.append_messages(rows(second, 2)))
    listed = run(store.list_conversations(key.app, key.user_id, "updated_desc", 10, 0))
    assert sorted(c["conversation_id"] for c in listed) == ["c1", "c2"]
    paged = run(store.list_conversations(key.app, key.user_id, "updated_desc", 1, 1))
    assert [c["conversation_id"] for c in paged] == [listed[1]["conversation_id"]]
    assert run(store.delete_messages(second, ["m1"]))["messages"] == 1
    assert [r.id for r in run(store.get_messages(second))] == ["m2"]
    assert run(store.delete_conversation(second))["messages"] == 1
    assert run(store.get_conversation(second)) is None
    with pytest.raises(NotFoundError):  # a memray error crosses the boundary as itself
        run(store.update_conversation(second, "gone", None))


def test_titles_compare_and_set_and_conversations_are_counted(store: StoreClient, key: ConversationKey) -> None:
    run(store.append_messages(rows(key, 1, text="plan the trip to Kyoto")))
    automatic = run(store.get_conversation(key))["title"]
    assert run(store.retitle(key, automatic, "Kyoto trip")) is True
    assert run(store.retitle(key, automatic, "stale guess")) is False  # the caller's title is kept
    assert run(store.get_conversation(key))["title"] == "Kyoto trip"
    run(store.append_messages(rows(ConversationKey(key.app, key.user_id, "c2"), 1)))
    assert run(store.count_conversations(key.app, key.user_id)) == 2


def test_clearing_keeps_the_conversation_and_counts_what_is_left(store: StoreClient, key: ConversationKey) -> None:
    run(store.append_messages(rows(key, 4)))
    run(store.put_summary(key, "so far", 2, 0))
    assert run(store.count_messages(key)) == {"messages": 4, "embeddings": 0, "export_rows": 0}
    counts, ids = run(store.clear_messages(key, 3))
    assert (counts["messages"], counts["summaries"], sorted(ids)) == (3, 1, ["m1", "m2", "m3"])
    assert [r.id for r in run(store.get_messages(key))] == ["m4"]
    assert run(store.count_messages(key, ["m1", "m4"]))["messages"] == 1
    assert run(store.get_conversation(key))["last_seq"] == 4  # seqs are not reused
    with pytest.raises(ValidationError):
        run(store.clear_messages(key, -1))


def test_a_fork_copies_the_file_as_of_the_call_and_lists_what_changed_after(
    store: StoreClient, key: ConversationKey, tmp_path: Path
) -> None:
    run(store.append_messages(rows(key, 2)))
    copied = run(store.fork_to(str(tmp_path / "fork.duckdb")))
    before = run(store.version())
    assert copied["version"] == before and copied["bytes"] > 0
    run(store.append_messages(rows(key, 1, start=3)))
    assert run(store.version()) > before
    assert run(store.changed_refs(before)) == [(conversation_namespace(key), "m3")]
    fork = HistoryStore(str(tmp_path / "fork.duckdb"))
    fork.open()
    assert [r.id for r in fork.get_messages(key)] == ["m1", "m2"]  # the point in time of the call
    fork.close()
    with pytest.raises(ValidationError):
        run(store.fork_to(str(tmp_path / "fork.duckdb")))  # never over an existing file


def test_working_memory_and_summaries_compare_and_set(store: StoreClient, key: ConversationKey) -> None:
    assert run(store.get_working_memory(key.app, key.user_id, "conversation", key.conversation_id)) == (None, 0)
    assert run(store.put_working_memory(key.app, key.user_id, "conversation", key.conversation_id, "note", 0)) == 1
    with pytest.raises(ConflictError):
        run(store.put_working_memory(key.app, key.user_id, "conversation", key.conversation_id, "stale", 0))
    assert run(store.get_working_memory(key.app, key.user_id, "conversation", key.conversation_id)) == ("note", 1)
    assert run(store.get_summary(key)) is None
    assert run(store.put_summary(key, "so far", 3, 0)) == 1
    state = run(store.get_summary(key))
    assert (state.text, state.summarized_through_seq, state.version) == ("so far", 3, 1)
    assert run(store.context_extras([(key, "conversation"), (key, "user")])) == [
        ("so far", "note", 3),
        ("so far", None, 3),
    ]


def test_entries_are_scoped_by_project_and_session(store: StoreClient, key: ConversationKey) -> None:
    app = key.app
    run(store.put_entries([entry("g1", app=app, session="s1"), entry("p1", app=app, project="P", session="s1")]))
    assert [r.id for r in run(store.get_entries(app, "u1", ["p1", "g1", "nope"]))] == ["p1", "g1"]
    assert [r.id for r in run(store.list_entries(app, "u1"))] == ["g1"]  # global only
    assert [r.id for r in run(store.list_entries(app, "u1", "P"))] == ["p1"]
    assert run(store.entry_projects(app)) == [("u1", "P")]
    removed = run(store.put_entries([entry("g2", app=app, session="s1")], (app, "u1", "s1")))
    assert sorted(removed) == ["g1", "p1"]  # re-adding a session replaces its entries
    assert run(store.delete_entries(app, "u1", ["g2"])) == 1
    assert run(store.list_entries(app, "u1", all_projects=True)) == []


def test_vectors_are_pending_until_stored_and_shards_read_them_back(store: StoreClient, key: ConversationKey) -> None:
    ns = conversation_namespace(key)
    run(store.append_messages(rows(key, 3)))
    pending = run(store.pending_embeddings(MODEL, 100_000))
    mine = sorted(doc for n, doc, _ in pending if Namespace(*n) == ns)
    assert mine == ["m1", "m2", "m3"]
    refs = [(ns, "m1"), (ns, "m2"), (ns, "m3")]
    run(store.mark_embedding_failed(refs[2:], "endpoint down"))
    vec = np.ones(4, dtype=np.float32) / 2
    assert run(store.put_embeddings([EmbeddingRow(ns, "m1", MODEL, vec), EmbeddingRow(ns, "m2", MODEL, vec)])) == 2
    assert run(store.missing_embeddings(MODEL, refs)) == [2]
    scanned = [r for r in run(store.scan_index_rows(0, 1, MODEL, None, 100_000)) if Namespace(*r.namespace) == ns]
    assert [r.doc_id for r in scanned] == ["m1", "m2"] and np.allclose(scanned[0].vector, vec)
    with_text = [
        r for r in run(store.scan_index_rows(0, 1, MODEL, None, 100_000, True)) if Namespace(*r.namespace) == ns
    ]
    assert [(r.doc_id, r.vector is None) for r in with_text] == [("m1", False), ("m2", False), ("m3", True)]
    count, _ = run(store.index_digest(0, 1, MODEL))
    listed = {(Namespace(*n), d): has for n, d, has in run(store.index_refs(0, 1, MODEL))}
    assert count >= 2 and [listed.get(r) for r in refs] == [True, True, False]
    fetched = run(store.fetch_index_rows(refs, MODEL))
    assert [(r.doc_id, r.vector is None) for r in fetched] == [("m1", False), ("m2", False), ("m3", True)]


def test_erasure_and_exports_leave_nothing_of_the_user(
    store: StoreClient, key: ConversationKey, tmp_path: Path
) -> None:
    run(store.append_messages(rows(key, 2)))
    run(store.put_entries([entry("e1", app=key.app)]))
    ns = entry_namespace(key.app, key.user_id, None)
    run(store.put_embeddings([EmbeddingRow(ns, "e1", MODEL, np.ones(4, dtype=np.float32) / 2)]))
    root = str(tmp_path / "exports")
    manifest = run(store.export_parquet(root))
    assert manifest["rows"] >= 3 and root in run(store.export_roots())
    assert run(store.purge_exports(root, key.app, key.user_id)) >= 3
    with pytest.raises(ValidationError):  # a memray error crosses the boundary as itself
        run(store.delete_user(key.app, ""))
    counts = run(store.delete_user(key.app, key.user_id))
    assert counts["messages"] == 2 and counts["entries"] == 1 and counts["embeddings"] == 1
    assert set(run(store.count_user(key.app, key.user_id)).values()) == {0}


def test_store_calls_are_declared_by_priority() -> None:
    """What the store actor orders its queue by (memray.runtime.actors) is declared on the client."""
    assert {StoreClient.options(n).priority for n in StoreClient.calls()} == set(Priority)


def test_table_counts_count_rows_and_route_conversations_as_memray_does(store: StoreClient) -> None:
    """(Last: the store is shared by the module; what it holds already is counted before.)"""
    before, hosts_before = run(store.table_counts(3))
    app = f"app-{uuid.uuid4().hex[:8]}"
    keys = [ConversationKey(app, f"u{i}", "c") for i in range(5)]
    run(store.commit_messages([r for key in keys for r in rows(key, 2)]))
    after, hosts_after = run(store.table_counts(3))
    assert after["conversations"] - before["conversations"] == 5 and after["messages"] - before["messages"] == 10
    assert after["entries"] == before["entries"]
    added = [a - b for a, b in zip(hosts_after, hosts_before)]
    assert added == [sum(1 for k in keys if k.route(3) == h) for h in range(3)]
