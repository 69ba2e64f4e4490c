from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memray.errors import InvalidIdError, ValidationError
from memray.ids import ConversationKey
from memray.models import Message, MessageFilter
from memray.models.messages import ReasoningPart, TextPart
from memray.store.history import HistoryStore
from memray.store.messages import json_equal
from memray.store.rows import message_to_row

from .conftest import KEY, msg


def seqs(rows: list) -> list[int]:
    return [r.seq for r in rows]


def test_append_creates_conversation_and_bumps_last_seq(store: HistoryStore) -> None:
    assert store.append_messages([msg(1), msg(2)]) == []
    info = store.get_conversation(KEY)
    assert info is not None and info["last_seq"] == 2 and info["created_at"] <= 1001.0
    store.append_messages([msg(3)])
    assert store.get_conversation(KEY)["last_seq"] == 3  # type: ignore[index]
    assert store.append_messages([]) == []


def test_upsert_keeps_seq_and_created_at_and_returns_corrections(store: HistoryStore) -> None:
    store.append_messages([msg(1), msg(2)])
    changed = msg(1, seq=7, text="edited", role="assistant")._replace(created_at=5.0)
    same_seq = msg(2, text="edited too")
    out = store.append_messages([changed, same_seq, msg(3)])
    assert out == [("app", "u1", "c1", "m1", 1, 1001.0)]  # only the row whose seq differs
    rows = store.get_messages(KEY)
    assert seqs(rows) == [1, 2, 3]
    assert rows[0].text == "edited" and rows[0].role == "assistant" and rows[0].created_at == 1001.0
    assert rows[1].text == "edited too"
    assert store.get_conversation(KEY)["last_seq"] == 3  # type: ignore[index]


def test_repeated_id_in_one_batch_keeps_first_seq_last_content(store: HistoryStore) -> None:
    out = store.append_messages([msg(1), msg(1, seq=2, text="later")])
    assert out == [("app", "u1", "c1", "m1", 1, 1001.0)]
    rows = store.get_messages(KEY)
    assert len(rows) == 1 and rows[0].seq == 1 and rows[0].text == "later"


def test_upsert_resets_embedding_and_drops_stale_vector(store: HistoryStore) -> None:
    import numpy as np

    from memray.ids import conversation_namespace
    from memray.store.rows import EmbeddingRow

    store.append_messages([msg(1)])
    ns = conversation_namespace(KEY)
    assert store.put_embeddings([EmbeddingRow(ns, "m1", "hash", np.ones(3))]) == 1
    assert store.pending_embeddings("hash", 10) == []
    store.append_messages([msg(1, text="new text")])
    assert store.pending_embeddings("hash", 10) == [(ns, "m1", "new text")]
    assert store.scan_index_rows(0, 1, "hash", None, 10) == []


@pytest.mark.parametrize(
    "field,bad",
    [
        ("seq", 0),
        ("seq", -3),
        ("role", "robot"),
        ("id", ""),
        ("user_id", "a\x00b"),
        ("conversation_id", "x" * 257),
        ("parts_json", "not json"),
        ("metadata_json", "[]"),
        ("seq", "1"),
    ],
)
def test_bad_row_raises_validation_error_and_writes_nothing(store: HistoryStore, field: str, bad: object) -> None:
    store.append_messages([msg(1)])
    rows = [msg(2), msg(3)._replace(**{field: bad})]
    with pytest.raises(ValidationError) as err:
        store.append_messages(rows)
    assert err.value.field == field
    assert seqs(store.get_messages(KEY)) == [1]
    assert store.get_conversation(KEY)["last_seq"] == 1  # type: ignore[index]


def test_invalid_id_is_an_invalid_id_error(store: HistoryStore) -> None:
    with pytest.raises(InvalidIdError):
        store.append_messages([msg(1)._replace(app="")])


def test_get_messages_filters_compose(store: HistoryStore) -> None:
    roles = ["user", "assistant", "tool", "system"]
    store.append_messages([msg(i, role=roles[i % 4], metadata={"n": i % 3}) for i in range(1, 21)])
    assert seqs(store.get_messages(KEY, MessageFilter(limit=3))) == [18, 19, 20]
    assert seqs(store.get_messages(KEY, MessageFilter(limit=3, before_seq=10))) == [7, 8, 9]
    assert seqs(store.get_messages(KEY, MessageFilter(after_seq=17))) == [18, 19, 20]
    assert seqs(store.get_messages(KEY, MessageFilter(after_seq=5, before_seq=9))) == [6, 7, 8]
    assert seqs(store.get_messages(KEY, MessageFilter(roles=["assistant"], limit=2))) == [13, 17]
    assert seqs(store.get_messages(KEY, MessageFilter(roles=["user", "tool"], metadata={"n": 0}, limit=2))) == [12, 18]
    assert store.get_messages(KEY, MessageFilter(roles=[])) == []
    assert store.get_messages(KEY, MessageFilter(limit=0)) == []
    assert store.get_messages(ConversationKey("app", "u1", "other")) == []
    with pytest.raises(ValidationError):
        store.get_messages(KEY, MessageFilter(roles=["robot"]))
    with pytest.raises(ValidationError):
        store.get_messages(KEY, MessageFilter(limit=-1))


@pytest.mark.parametrize(
    "want,matches",
    [
        ({"s": "x"}, [1]),
        ({"s": "y"}, []),
        ({"n": 1}, [1, 2]),
        ({"n": 1.0}, [1, 2]),
        ({"b": True}, [1]),
        ({"b": 1}, [2]),
        ({"one": True}, []),
        ({"z": None}, [2]),
        ({"o": {"a": [1, 2], "b": "c"}}, [1]),
        ({"o": {"b": "c", "a": [1, 2]}}, [1]),
        ({"o": {"a": [2, 1], "b": "c"}}, []),
        ({"missing": None}, []),
        ({"s": "x", "n": 1}, [1]),
        ({}, [1, 2, 3]),
    ],
)
def test_metadata_filter_compares_json_values(store: HistoryStore, want: dict, matches: list[int]) -> None:
    store.append_messages(
        [
            msg(1, metadata={"s": "x", "n": 1, "b": True, "o": {"a": [1, 2], "b": "c"}}),
            msg(2, metadata={"n": 1.0, "b": 1, "one": 1, "z": None}),
            msg(3),
        ]
    )
    assert seqs(store.get_messages(KEY, MessageFilter(metadata=want))) == matches


def test_json_equal() -> None:
    assert json_equal({"a": [1, {"b": 2.0}]}, {"a": [1, {"b": 2}]})
    assert not json_equal(True, 1) and not json_equal(0, False) and not json_equal("1", 1)
    assert not json_equal(None, 0) and json_equal(None, None)


def test_fetch_messages_in_ref_order_skipping_missing(store: HistoryStore) -> None:
    other = ConversationKey("app", "u1", "c2")
    store.append_messages([msg(1), msg(2), msg(1, other, mid="x1")])
    got = store.fetch_messages("app", "u1", [("c2", "x1"), ("c1", "m2"), ("c1", "nope"), ("c1", "m1")])
    assert [(r.conversation_id, r.id) for r in got] == [("c2", "x1"), ("c1", "m2"), ("c1", "m1")]
    assert store.fetch_messages("app", "u2", [("c1", "m1")]) == []
    assert store.fetch_messages("app", "u1", []) == []


def test_load_conversation(store: HistoryStore) -> None:
    assert store.load_conversation(KEY, 5) == (False, 0, [])
    store.append_messages([msg(i) for i in range(1, 9)])
    snap = store.load_conversation(KEY, 3)
    assert snap.exists and snap.last_seq == 8 and seqs(snap.recent) == [6, 7, 8]
    assert store.load_conversation(KEY, 0).recent == []


def test_group_commit_of_many_conversations(store: HistoryStore) -> None:
    keys = [ConversationKey("app", f"u{i % 7}", f"c{i}") for i in range(50)]
    rows = [msg(s, k) for k in keys for s in range(1, 5)]
    assert store.append_messages(rows) == []
    for k in keys[:5]:
        assert seqs(store.get_messages(k)) == [1, 2, 3, 4]
        assert store.get_conversation(k)["last_seq"] == 4  # type: ignore[index]
    assert sum(len(store.list_conversations("app", f"u{u}", "created_asc", 100, 0)) for u in range(7)) == 50


def test_text_round_trips_unicode_and_quotes(store: HistoryStore) -> None:
    text = "日本語 'quote' \"dq\" ? -- ; DROP TABLE messages;"
    store.append_messages([msg(1, text=text, metadata={"k": "é"})])
    row = store.get_messages(KEY)[0]
    assert row.text == text and json.loads(row.metadata_json) == {"k": "é"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    roles=st.lists(st.sampled_from(["user", "assistant", "tool"]), min_size=0, max_size=30),
    limit=st.one_of(st.none(), st.integers(0, 10)),
    before=st.one_of(st.none(), st.integers(0, 32)),
    after=st.one_of(st.none(), st.integers(0, 32)),
    want=st.one_of(st.none(), st.lists(st.sampled_from(["user", "assistant", "tool"]), max_size=2)),
    tag=st.one_of(st.none(), st.integers(0, 2)),
)
def test_get_messages_matches_a_list_model(tmp_path_factory, roles, limit, before, after, want, tag) -> None:  # type: ignore[no-untyped-def]
    s = HistoryStore(str(tmp_path_factory.mktemp("h") / "h.duckdb"))
    s.open()
    try:
        rows = [msg(i + 1, role=r, metadata={"t": i % 3}) for i, r in enumerate(roles)]
        s.append_messages(rows)
        model = [
            r
            for r in rows
            if (before is None or r.seq < before)
            and (after is None or r.seq > after)
            and (want is None or r.role in want)
            and (tag is None or json.loads(r.metadata_json)["t"] == tag)
        ]
        if limit is not None:
            model = model[max(0, len(model) - limit) :] if limit else []
        got = s.get_messages(KEY, MessageFilter(limit, before, after, want, None if tag is None else {"t": tag}))
        assert got == model
    finally:
        s.close()


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 24),
    limit=st.one_of(st.none(), st.integers(0, 8)),
    before=st.one_of(st.none(), st.integers(0, 26)),
    after=st.one_of(st.none(), st.integers(0, 26)),
    want=st.one_of(st.none(), st.lists(st.sampled_from(["user", "assistant"]), max_size=2)),
    tag=st.one_of(st.none(), st.integers(0, 2)),
    since=st.one_of(st.none(), st.integers(0, 24)),
    until=st.one_of(st.none(), st.integers(0, 24)),
    agent=st.one_of(st.none(), st.sampled_from(["a", "b"])),
    sub_agent=st.one_of(st.none(), st.sampled_from(["x", "y"])),
)
def test_the_store_and_a_hosts_buffer_keep_the_same_messages_for_one_filter(  # type: ignore[no-untyped-def]
    tmp_path_factory, n, limit, before, after, want, tag, since, until, agent, sub_agent
) -> None:
    """A filter is applied twice: in SQL by the store, in Python by a host over its buffer
    (:meth:`MessageFilter.keeps`); both must keep the same messages."""
    from memray.sim_time import Window
    from memray.store.rows import row_to_message

    rows = [
        msg(i, role=("user", "assistant", "tool")[i % 3], metadata={"t": i % 3})._replace(
            sim_time=None if i % 4 == 0 else float(i),
            agent_id=(None, "a", "b")[i % 3],
            sub_agent_id=(None, "x", "y")[i % 2],
        )
        for i in range(1, n + 1)
    ]
    window = None if since is None and until is None else Window(since, until)
    where = MessageFilter(limit, before, after, want, None if tag is None else {"t": tag}, window, agent, sub_agent)
    s = HistoryStore(str(tmp_path_factory.mktemp("h") / "h.duckdb"))
    s.open()
    try:
        s.append_messages(rows)
        kept = [r.seq for r in rows if where.keeps(row_to_message(r))]
        if limit is not None:
            kept = kept[max(0, len(kept) - limit) :] if limit else []
        assert seqs(s.get_messages(KEY, where)) == kept
    finally:
        s.close()


@given(st.text(), st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=2))
def test_a_row_writes_parts_and_metadata_as_json_dumps_of_their_pydantic_dumps(text: str, metadata: dict) -> None:
    # one text part takes a short cut past pydantic: the same bytes as the general path
    for parts in ([TextPart(text=text)], [TextPart(text=text), ReasoningPart(text=text)]):
        m = Message(role="user", parts=parts, metadata=metadata, seq=1)
        row = message_to_row(KEY, m)
        assert row.parts_json == json.dumps([p.model_dump(mode="json") for p in m.parts], ensure_ascii=False)
        assert row.metadata_json == json.dumps(m.metadata, ensure_ascii=False, default=str)
        assert json.loads(row.parts_json) == [p.model_dump(mode="json") for p in m.parts]
