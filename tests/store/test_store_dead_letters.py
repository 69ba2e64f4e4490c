"""A group commit with a row the store cannot hold commits every other row and dead-letters that
one (bisecting the batch); an outage is not mistaken for bad data."""

from __future__ import annotations

import pytest

from memray.errors import ClosedError, StoreError, ValidationError
from memray.ids import ConversationKey
from memray.store.deadletter import is_data_error
from memray.store.history import HistoryStore

from .conftest import KEY, msg

OTHER = ConversationKey("app", "u2", "c9")


def test_one_bad_row_is_isolated_and_the_rest_of_every_conversation_commits(store: HistoryStore) -> None:
    rows = [msg(i) for i in range(1, 8)] + [msg(i, OTHER) for i in range(1, 5)]
    rows[3] = rows[3]._replace(created_at=float("inf"))  # KEY seq 4
    rows[9] = rows[9]._replace(text="a\ud800b")  # OTHER seq 3: not UTF-8
    corrections, rejected, positions = store.commit_messages(rows)
    assert positions == [3, 9]
    assert corrections == []
    assert sorted((d.conversation_id, d.id, d.seq, d.kind) for d in rejected) == [
        ("c1", "m4", 4, "rejected"),
        ("c9", "m3", 3, "rejected"),
    ]
    assert "created_at" in next(d.error for d in rejected if d.id == "m4")
    assert [r.seq for r in store.get_messages(KEY)] == [1, 2, 3, 5, 6, 7]
    assert [r.seq for r in store.get_messages(OTHER)] == [1, 2, 4]
    letters = store.dead_letters()
    assert {(d.id, d.seq) for d in letters} == {("m4", 4), ("m3", 3)}
    kept = next(d for d in letters if d.id == "m3")
    assert "\\ud800" in kept.payload  # what could be kept of it, legibly
    assert store.count_dead_letters() == {"rejected": 2, "lost": 0}


def test_a_dead_lettered_seq_is_never_given_again(store: HistoryStore) -> None:
    store.commit_messages([msg(1), msg(2)._replace(created_at=float("nan"))])
    assert store.get_conversation(KEY)["last_seq"] == 2  # type: ignore[index]
    alone = ConversationKey("app", "u1", "fresh")
    _, rejected, _ = store.commit_messages([msg(1, alone)._replace(text="\udfff")])
    assert len(rejected) == 1
    assert store.load_conversation(alone, 8).last_seq == 1  # the conversation exists to hold its seq


def test_storing_an_id_later_clears_its_dead_letter(store: HistoryStore) -> None:
    store.commit_messages([msg(1)._replace(created_at=float("inf"))])
    assert store.count_dead_letters()["rejected"] == 1
    store.commit_messages([msg(1)])  # the caller fixed it and sent it again
    assert store.count_dead_letters()["rejected"] == 0
    assert [r.seq for r in store.get_messages(KEY)] == [1]


def test_resolve_acknowledged_records_only_what_is_missing(store: HistoryStore) -> None:
    store.commit_messages([msg(1), msg(2)])
    lost = store.resolve_acknowledged([(KEY, "m1", 1), (KEY, "m2", 2), (KEY, "m3", 3), (KEY, "m4", 4)], "host died")
    assert [(d.id, d.seq, d.kind) for d in lost] == [("m3", 3, "lost"), ("m4", 4, "lost")]
    assert store.get_conversation(KEY)["last_seq"] == 4  # type: ignore[index]
    assert store.stored_seqs([(KEY, ["m1", "m3", "zz"])]) == [{"m1": 1}]
    # the seq a lost id was given stays its own: a retry that brings it after all keeps it
    assert store.assigned_seqs([(KEY, ["m1", "m3", "zz"])]) == [{"m1": 1, "m3": 3}]
    store.commit_messages([msg(3)])  # a retried add brought m3 after all
    assert {d.id for d in store.dead_letters()} == {"m4"}


def test_delete_conversation_and_user_remove_their_dead_letters(store: HistoryStore) -> None:
    store.commit_messages([msg(1)._replace(created_at=float("inf")), msg(1, OTHER)._replace(created_at=float("inf"))])
    assert store.delete_conversation(KEY)["dead_letters"] == 1
    assert store.count_user("app", "u2")["dead_letters"] == 1
    assert store.delete_user("app", "u2")["dead_letters"] == 1
    assert store.dead_letters() == []


def test_an_outage_is_not_mistaken_for_bad_data(store_path: str) -> None:
    s = HistoryStore(store_path)
    s.open()
    s.close()  # closed: every row "fails", but not because of its data
    with pytest.raises(ClosedError):
        s.commit_messages([msg(1), msg(2)])
    assert not is_data_error(ClosedError("closed"))
    assert not is_data_error(StoreError("history store write failed: IO Error: No space left on device"))
    assert is_data_error(ValidationError("created_at", float("inf"), "must be finite"))
    assert is_data_error(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"))
