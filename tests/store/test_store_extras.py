"""``context_extras`` answered from the store's cache: every write that changes a summary or a
working memory is seen by the next call (a real DuckDB file; the oracle is the uncached query)."""

from __future__ import annotations

import random

import pytest

from memray.errors import ConflictError
from memray.ids import ConversationKey
from memray.store import conversations as conv
from memray.store.extras import ExtrasCache

from .conftest import msg

A = ConversationKey("app", "u", "a")
B = ConversationKey("app", "u", "b")
OTHER = ConversationKey("app", "v", "a")
ASKS = [(A, "conversation"), (A, "user"), (B, "conversation"), (B, "user"), (OTHER, "conversation")]


def ask(store):
    got = store.context_extras(ASKS)
    assert got == conv.context_extras(store._db, ASKS)  # the cache agrees with the database
    return got


def test_a_summary_write_is_seen_by_the_next_call(store):
    assert ask(store)[0] == (None, None, 0)
    store.put_summary(A, "first", 3, 0)
    assert ask(store)[0] == ("first", None, 3)
    store.put_summary(A, "second", 7, 1)
    assert ask(store)[:2] == [("second", None, 7), ("second", None, 7)]


def test_working_memory_writes_of_both_scopes_are_seen(store):
    ask(store)
    store.put_working_memory("app", "u", "conversation", "a", "note a", 0)
    assert [g[1] for g in ask(store)] == ["note a", None, None, None, None]
    store.put_working_memory("app", "u", "user", None, "user note", 0)  # every conversation of u
    assert [g[1] for g in ask(store)] == ["note a", "user note", None, "user note", None]
    store.put_working_memory("app", "u", "conversation", "a", None, 1)  # cleared
    assert [g[1] for g in ask(store)] == [None, "user note", None, "user note", None]


def test_deletes_are_seen(store):
    store.commit_messages([msg(i, A) for i in range(1, 4)])
    store.put_summary(A, "sum a", 2, 0)
    store.put_summary(B, "sum b", 1, 0)
    store.put_working_memory("app", "u", "conversation", "a", "note a", 0)
    store.put_working_memory("app", "u", "user", None, "user note", 0)
    assert ask(store)[0] == ("sum a", "note a", 2)
    store.clear_messages(A, 2)  # drops the summary, keeps the working memory
    assert ask(store)[0] == (None, "note a", 0)
    store.put_summary(A, "again", 3, 0)
    store.delete_conversation(A)  # summary and conversation-scope note go, the user's note stays
    assert ask(store)[:3] == [(None, None, 0), (None, "user note", 0), ("sum b", None, 1)]
    store.delete_user("app", "u")
    assert ask(store)[:4] == [(None, None, 0)] * 4


def test_a_failed_write_changes_nothing_and_other_users_stay_cached(store):
    store.put_summary(OTHER, "theirs", 1, 0)
    before = ask(store)
    with pytest.raises(ConflictError):
        store.put_summary(A, "stale", 1, 5)
    assert ask(store) == before
    assert len(store._extras) == len(ASKS)
    store.put_working_memory("app", "u", "user", None, "x", 0)
    assert len(store._extras) == 1  # only u's answers were dropped
    assert ask(store)[4] == ("theirs", None, 1)


def test_a_reopened_store_answers_from_the_file(store):
    ask(store)
    store.close()
    store.open()
    store.put_summary(A, "after reopen", 1, 0)
    assert ask(store)[0] == ("after reopen", None, 1)


def test_random_writes_against_the_uncached_query(store):
    rng = random.Random(7)
    versions: dict[tuple[str, ...], int] = {}
    keys = [ConversationKey("app", u, c) for u in ("u", "v") for c in ("a", "b")]
    asks = [(k, s) for k in keys for s in ("conversation", "user")]
    for step in range(60):
        key = rng.choice(keys)
        op = rng.randrange(5)
        if op == 0:
            v = versions.get(("s", key.app, key.user_id, key.conversation_id), 0)
            versions[("s", key.app, key.user_id, key.conversation_id)] = store.put_summary(key, f"s{step}", step, v)
        elif op in (1, 2):
            scope = "conversation" if op == 1 else "user"
            slot = ("w", key.app, key.user_id, scope, key.conversation_id if op == 1 else "")
            content = None if rng.random() < 0.2 else f"w{step}"
            cid = key.conversation_id if op == 1 else None
            versions[slot] = store.put_working_memory(key.app, key.user_id, scope, cid, content, versions.get(slot, 0))
        elif op == 3 and rng.random() < 0.3:
            store.delete_conversation(key)
            versions.pop(("s", key.app, key.user_id, key.conversation_id), None)
            versions.pop(("w", key.app, key.user_id, "conversation", key.conversation_id), None)
        wanted = rng.sample(asks, rng.randrange(1, len(asks)))
        assert store.context_extras(wanted) == conv.context_extras(store._db, wanted), step


def test_an_answer_read_across_a_write_is_not_kept():
    cache = ExtrasCache()
    found, generation = cache.lookup([(A, "conversation")])
    assert found == [None]
    cache.drop("app", "u")  # a write committed while the answer was being read
    cache.keep(generation, [(A, "conversation")], [("old", None, 1)])
    assert cache.lookup([(A, "conversation")])[0] == [None]
    found, generation = cache.lookup([(A, "conversation")])
    cache.keep(generation, [(A, "conversation")], [("new", None, 2)])
    assert cache.lookup([(A, "conversation")])[0] == [("new", None, 2)]


def test_the_cache_is_bounded():
    cache = ExtrasCache(max_answers=3)
    asks = [[(ConversationKey("app", u, c), "conversation") for c in ("a", "b")] for u in ("u1", "u2", "u3")]
    for user_asks in asks:
        _, generation = cache.lookup([])
        cache.keep(generation, user_asks, [(None, None, 0)] * 2)
        cache.keep(generation, user_asks[:1], [("again", None, 1)])  # replaced, not counted twice
    assert len(cache) == 2  # whole users dropped, the first filled first
    assert cache.lookup(asks[1])[0] == [None, None]
    assert cache.lookup(asks[2])[0] == [("again", None, 1), (None, None, 0)]
    cache.drop("app", "u3")
    assert len(cache) == 0
