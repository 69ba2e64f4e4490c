from __future__ import annotations

import numpy as np
import pytest

from memray.errors import ConflictError, NotFoundError, ValidationError
from memray.ids import ConversationKey, conversation_namespace
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow

from .conftest import KEY, msg


def test_create_is_get_or_create(store: HistoryStore) -> None:
    info = store.create_conversation(KEY, "Title", {"a": 1})
    assert info["title"] == "Title" and info["metadata"] == {"a": 1} and info["last_seq"] == 0
    again = store.create_conversation(KEY, "Other", {"b": 2})
    assert again == info
    assert store.get_conversation(ConversationKey("app", "u1", "nope")) is None


def test_create_rejects_bad_metadata(store: HistoryStore) -> None:
    with pytest.raises(ValidationError):
        store.create_conversation(KEY, None, {"x": object()})
    with pytest.raises(ValidationError):
        store.create_conversation(KEY, None, ["not", "a", "dict"])  # type: ignore[arg-type]
    assert store.get_conversation(KEY) is None


def test_update_merges_metadata_without_clobbering(store: HistoryStore) -> None:
    store.create_conversation(KEY, "t", {"a": 1, "b": {"x": 1}})
    out = store.update_conversation(KEY, None, {"b": {"y": 2}, "c": 3})
    assert out["title"] == "t" and out["metadata"] == {"a": 1, "b": {"y": 2}, "c": 3}
    out = store.update_conversation(KEY, "new", None)
    assert out["title"] == "new" and out["metadata"]["a"] == 1
    with pytest.raises(NotFoundError):
        store.update_conversation(ConversationKey("app", "u1", "missing"), "t", {})


def test_list_orders_and_paginates(store: HistoryStore) -> None:
    for i in range(5):
        store.create_conversation(ConversationKey("app", "u1", f"c{i}"), None, {})
    store.append_messages([msg(1, ConversationKey("app", "u1", "c2"))])  # c2 updated last
    store.create_conversation(ConversationKey("app", "u2", "other"), None, {})
    ids = lambda rows: [r["conversation_id"] for r in rows]  # noqa: E731
    assert ids(store.list_conversations("app", "u1", "created_asc", 10, 0)) == ["c0", "c1", "c2", "c3", "c4"]
    assert ids(store.list_conversations("app", "u1", "created_desc", 2, 1)) == ["c3", "c2"]
    assert ids(store.list_conversations("app", "u1", "updated_desc", 1, 0)) == ["c2"]
    assert ids(store.list_conversations("app", "u1", "updated_asc", 10, 4)) == ["c2"]
    assert store.list_conversations("app", "u1", "created_asc", 10, 5) == []
    with pytest.raises(ValidationError):
        store.list_conversations("app", "u1", "sideways", 10, 0)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        store.list_conversations("app", "u1", "created_asc", -1, 0)


def test_working_memory_compare_and_set(store: HistoryStore) -> None:
    args = ("app", "u1", "conversation", "c1")
    assert store.get_working_memory(*args) == (None, 0)
    assert store.put_working_memory(*args, "v1", 0) == 1
    with pytest.raises(ConflictError) as err:
        store.put_working_memory(*args, "stale", 0)
    assert (err.value.expected, err.value.actual) == (0, 1)
    assert store.get_working_memory(*args) == ("v1", 1)
    assert store.put_working_memory(*args, None, 1) == 2  # clear still bumps the version
    assert store.get_working_memory(*args) == (None, 2)
    # user scope is separate and ignores the conversation id
    assert store.get_working_memory("app", "u1", "user", None) == (None, 0)
    assert store.put_working_memory("app", "u1", "user", None, "profile", 0) == 1
    assert store.get_working_memory("app", "u1", "user", "ignored") == ("profile", 1)
    with pytest.raises(ValidationError):
        store.put_working_memory("app", "u1", "conversation", None, "x", 0)
    with pytest.raises(ValidationError):
        store.put_working_memory("app", "u1", "team", None, "x", 0)  # type: ignore[arg-type]


def test_summary_compare_and_set(store: HistoryStore) -> None:
    assert store.get_summary(KEY) is None
    assert store.put_summary(KEY, "s1", 10, 0) == 1
    with pytest.raises(ConflictError):
        store.put_summary(KEY, "stale", 20, 0)
    assert store.get_summary(KEY) == ("s1", 10, 1)
    assert store.put_summary(KEY, "s2", 20, 1) == 2
    assert store.get_summary(KEY) == ("s2", 20, 2)
    with pytest.raises(ValidationError):
        store.put_summary(KEY, "s", -1, 2)


def test_delete_conversation_cascades_and_spares_the_rest(store: HistoryStore) -> None:
    other = ConversationKey("app", "u1", "c2")
    store.append_messages([msg(1), msg(2), msg(1, other)])
    ns = conversation_namespace(KEY)
    store.put_embeddings(
        [
            EmbeddingRow(ns, "m1", "h", np.ones(2)),
            EmbeddingRow(ns, "m2", "h", np.ones(2)),
            EmbeddingRow(conversation_namespace(other), "m1", "h", np.ones(2)),
        ]
    )
    store.put_working_memory("app", "u1", "conversation", "c1", "wm", 0)
    store.put_working_memory("app", "u1", "user", None, "user wm", 0)
    store.put_summary(KEY, "sum", 2, 0)
    counts = store.delete_conversation(KEY)
    assert counts == {
        "embeddings": 2,
        "messages": 2,
        "summaries": 1,
        "working_memory": 1,
        "conversations": 1,
        "dead_letters": 0,
        "export_rows": 0,
    }
    assert store.get_conversation(KEY) is None and store.get_messages(KEY) == []
    assert store.get_summary(KEY) is None
    assert store.get_working_memory("app", "u1", "conversation", "c1") == (None, 0)
    assert store.get_working_memory("app", "u1", "user", None) == ("user wm", 1)
    assert len(store.get_messages(other)) == 1
    assert [r.doc_id for r in store.scan_index_rows(0, 1, "h", None, 10)] == ["m1"]
    assert store.delete_conversation(KEY)["messages"] == 0


def test_context_extras_answers_many_conversations_in_one_call(store):
    from memray.ids import ConversationKey

    a, b, c = (ConversationKey("app", "u", cid) for cid in ("a", "b", "c"))
    store.put_summary(a, "summary of a", 3, 0)
    store.put_working_memory("app", "u", "conversation", "a", "note a", 0)
    store.put_working_memory("app", "u", "user", None, "user note", 0)
    got = store.context_extras([(a, "conversation"), (b, "user"), (c, "conversation"), (a, "user")])
    assert got == [
        ("summary of a", "note a", 3),
        (None, "user note", 0),
        (None, None, 0),
        ("summary of a", "user note", 3),
    ]
    assert store.context_extras([]) == []
