from __future__ import annotations

import numpy as np
import pytest

from memray.errors import ValidationError
from memray.ids import ConversationKey, Namespace, conversation_namespace, entry_namespace, user_hash
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow

from .conftest import KEY, entry, msg


def test_put_entries_upserts_and_replaces_sessions(store: HistoryStore) -> None:
    assert store.put_entries([entry("e1", session="s1"), entry("e2", session="s1"), entry("e3")]) == []
    assert store.put_entries([entry("e3", text="v2")]) == ["e3"]  # replaced by id
    assert store.get_entries("app", "u1", ["e3"])[0].text == "v2"
    gone = store.put_entries(
        [entry("e2", session="s1", text="again"), entry("e4", session="s1")], replace_session=("app", "u1", "s1")
    )
    assert sorted(gone) == ["e1", "e2"]
    assert [e.id for e in store.list_entries("app", "u1", session_id="s1")] == ["e4", "e2"]
    assert store.get_entries("app", "u1", ["e1"]) == []


def test_replace_session_is_atomic_with_the_insert(store: HistoryStore) -> None:
    store.put_entries([entry("e1", session="s1")])
    with pytest.raises(ValidationError):
        store.put_entries([entry("", session="s1")], replace_session=("app", "u1", "s1"))
    assert [e.id for e in store.get_entries("app", "u1", ["e1"])] == ["e1"]


def test_list_entries_scoping_and_order(store: HistoryStore) -> None:
    store.put_entries(
        [
            entry("g1", ts=1),
            entry("g2", ts=3),
            entry("p1", project="P", ts=2),
            entry("q1", project="Q", ts=4),
            entry("x", user="u2", ts=9),
        ]
    )
    ids = lambda rows: [r.id for r in rows]  # noqa: E731
    assert ids(store.list_entries("app", "u1")) == ["g2", "g1"]
    assert ids(store.list_entries("app", "u1", project_id="P")) == ["p1"]
    assert ids(store.list_entries("app", "u1", all_projects=True)) == ["q1", "g2", "p1", "g1"]
    assert ids(store.list_entries("app", "u1", all_projects=True, limit=2)) == ["q1", "g2"]
    assert [r.project_id for r in store.get_entries("app", "u1", ["p1", "g1"])] == ["P", None]


def test_delete_entries_removes_their_vectors(store: HistoryStore) -> None:
    store.put_entries([entry("e1"), entry("e2", project="P")])
    store.put_embeddings(
        [
            EmbeddingRow(entry_namespace("app", "u1", None), "e1", "h", np.ones(2)),
            EmbeddingRow(entry_namespace("app", "u1", "P"), "e2", "h", np.ones(2)),
        ]
    )
    assert store.delete_entries("app", "u1", ["e1", "missing"]) == 1
    assert [r.doc_id for r in store.scan_index_rows(0, 1, "h", None, 10)] == ["e2"]
    assert store.delete_entries("app", "u1", []) == 0


def test_put_embeddings_skips_deleted_items_and_wrong_namespace(store: HistoryStore) -> None:
    store.append_messages([msg(1)])
    store.put_entries([entry("e1", project="P")])
    ns = conversation_namespace(KEY)
    rows = [
        EmbeddingRow(ns, "m1", "h", np.ones(3)),
        EmbeddingRow(ns, "gone", "h", np.ones(3)),
        EmbeddingRow(entry_namespace("app", "u1", None), "e1", "h", np.ones(3)),  # wrong project
        EmbeddingRow(entry_namespace("app", "u1", "P"), "e1", "h", np.ones(3)),
    ]
    assert store.put_embeddings(rows) == 2
    assert store.put_embeddings([EmbeddingRow(ns, "m1", "h", np.full(3, 2.0))]) == 1  # upsert
    found = store.scan_index_rows(0, 1, "h", None, 10)
    assert [(r.namespace.kind, r.doc_id) for r in found] == [("conv", "m1"), ("entry", "e1")]
    assert found[0].vector.tolist() == [2.0, 2.0, 2.0] and found[0].recency == 1.0
    assert found[1].text == "entry e1"
    with pytest.raises(ValidationError):
        store.put_embeddings([EmbeddingRow(ns, "m1", "h", np.array([np.nan]))])
    with pytest.raises(ValidationError):
        store.put_embeddings([EmbeddingRow(Namespace("app", "u1", "bogus", "c1"), "m1", "h", np.ones(3))])


def test_put_embeddings_marks_without_vectors_and_drops_a_stale_one(store: HistoryStore) -> None:
    store.append_messages([msg(1), msg(2)])
    ns = conversation_namespace(KEY)
    assert store.put_embeddings([EmbeddingRow(ns, "m1", "h", np.ones(3))]) == 1
    # a recomputable model's rows: marked embedded, no vector kept, and the stored one replaced
    marks = [EmbeddingRow(ns, "m1", "h", None), EmbeddingRow(ns, "m2", "h", None), EmbeddingRow(ns, "gone", "h", None)]
    assert store.put_embeddings(marks) == 2
    assert store.pending_embeddings("h", 10) == []
    assert [(r.doc_id, r.vector) for r in store.scan_index_rows(0, 1, "h", None, 10, unembedded=True)] == [
        ("m1", None),
        ("m2", None),
    ]


def test_pending_embeddings_includes_failed_and_other_models(store: HistoryStore) -> None:
    store.append_messages([msg(1), msg(2), msg(3, text="")])
    store.put_entries([entry("e1")])
    ns = conversation_namespace(KEY)
    pending = store.pending_embeddings("h", 10)
    assert [(p[0].kind, p[1]) for p in pending] == [("conv", "m1"), ("conv", "m2"), ("entry", "e1")]
    store.put_embeddings([EmbeddingRow(ns, "m1", "h", np.ones(2))])
    store.mark_embedding_failed([(ns, "m2")], "boom")
    assert [p[1] for p in store.pending_embeddings("h", 10)] == ["m2", "e1"]
    assert [p[1] for p in store.pending_embeddings("h", 1)] == ["m2"]
    assert len(store.pending_embeddings("other-model", 10)) == 3


def test_scan_index_rows_shards_by_python_modulo_and_pages(store: HistoryStore) -> None:
    users = [f"user-{i}" for i in range(40)]
    assert any(user_hash("app", u) < 0 for u in users) and any(user_hash("app", u) > 0 for u in users)
    rows, vecs = [], []
    for u in users:
        key = ConversationKey("app", u, "c")
        rows += [msg(1, key), msg(2, key)]
        vecs += [EmbeddingRow(conversation_namespace(key), m, "h", np.ones(2)) for m in ("m1", "m2")]
    store.append_messages(rows)
    store.put_embeddings(vecs)
    for shards in (1, 3, 4):
        seen: list[tuple[Namespace, str]] = []
        for shard in range(shards):
            page = store.scan_index_rows(shard, shards, "h", None, 7)
            got = list(page)
            while page:
                page = store.scan_index_rows(shard, shards, "h", (got[-1].namespace, got[-1].doc_id), 7)
                got += page
            assert all(user_hash(r.namespace.app, r.namespace.user_id) % shards == shard for r in got)
            keys = [(r.namespace, r.doc_id) for r in got]
            assert keys == sorted(keys)
            seen += keys
        assert len(seen) == len(set(seen)) == 80
    with pytest.raises(ValidationError):
        store.scan_index_rows(3, 3, "h", None, 10)


def test_scan_index_rows_unembedded_brings_items_without_vectors(store: HistoryStore) -> None:
    users = [f"user-{i}" for i in range(12)]
    for u in users:
        key = ConversationKey("app", u, "c")
        store.append_messages([msg(1, key), msg(2, key), msg(3, key, text="")])
        store.put_embeddings([EmbeddingRow(conversation_namespace(key), "m1", "h", np.ones(2))])
    store.put_entries([entry("e1", project="P"), entry("e2", text="")])
    store.put_embeddings(
        [EmbeddingRow(conversation_namespace(ConversationKey("app", "user-0", "c")), "m2", "other", np.ones(2))]
    )
    for shards in (1, 3):
        got: list = []
        for shard in range(shards):
            page = store.scan_index_rows(shard, shards, "h", None, 5, unembedded=True)
            part = list(page)
            while page:
                page = store.scan_index_rows(
                    shard, shards, "h", (part[-1].namespace, part[-1].doc_id), 5, unembedded=True
                )
                part += page
            assert all(user_hash(r.namespace.app, r.namespace.user_id) % shards == shard for r in part)
            keys = [(r.namespace, r.doc_id) for r in part]
            assert keys == sorted(keys)
            got += part
        # m1 with its vector, m2 (a vector of another model only) and e1 without; empty texts skipped
        assert sorted((r.namespace.user_id, r.doc_id, r.vector is None) for r in got) == sorted(
            [(u, "m1", False) for u in users] + [(u, "m2", True) for u in users] + [("u1", "e1", True)]
        )
        by = {(r.namespace.user_id, r.doc_id): r for r in got}
        assert by[("user-3", "m1")].vector.tolist() == [1.0, 1.0] and by[("user-3", "m2")].recency == 2.0
        assert by[("u1", "e1")].namespace == entry_namespace("app", "u1", "P")
    # the default keeps its contract: vectors of the model only
    assert len(store.scan_index_rows(0, 1, "h", None, 100)) == len(users)
