"""The read-your-writes tail, piece by piece: what a host keeps, what the caller's process keeps,
and the stamp check that closes the race between a shard's answer and the host's (module doc of
memray.conversation.read_your_writes). How the caller scores it: tests/index/test_scorer.py,
against the reference of the scoring rule."""

from __future__ import annotations

import asyncio
from typing import Any

from memray.conversation.buffer import MessageBuffer
from memray.conversation.client import HostClient
from memray.conversation.persist import PersistChain
from memray.conversation.read_your_writes import Tail, TailSource, Written
from memray.conversation.reads import ContextRead, SearchRead
from memray.conversation.recall import Recall
from memray.conversation.state import Conversation
from memray.embedding.calibration import Calibration
from memray.embedding.pipeline import PendingItem
from memray.embedding.query import QueryEncoder
from memray.ids import ConversationKey, conversation_namespace
from memray.index.base import ShardHit
from memray.index.lexical import Bm25Stats
from memray.index.router import RouterResult
from memray.models import Message
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient
from memray.store.partitions import StorePartitions

KEY = ConversationKey("app", "u", "c")
NS = conversation_namespace(KEY)


def msg(i: int, text: str) -> Message:
    return Message(id=f"m{i}", role="user", parts=[{"type": "text", "text": text}], seq=i)  # type: ignore[list-item]


def make_conversation(key: ConversationKey) -> Conversation:
    async def write() -> int:
        return 0

    return Conversation(key, MessageBuffer(8), lambda conv: PersistChain.solo(write, debounce_s=60.0), 0, whole=True)


def test_a_conversation_keeps_what_it_acknowledged_until_the_shard_confirms_that_version() -> None:
    asyncio.run(_keeps_until_confirmed())


async def _keeps_until_confirmed() -> None:
    conv = make_conversation(KEY)
    conv.add([msg(0, "first draft"), msg(0, "ignored: same id, merged"), Message(id="t", role="tool", parts=[])])
    assert [m.id for m in conv.unindexed_tail().messages] == ["m0"]  # a message without text is never indexed
    stored = conv.unindexed_tail().messages[0]
    conv.add([msg(0, "second draft")])  # a newer version, acknowledged before the old one is confirmed
    conv.indexed([PendingItem(NS, "m0", stored.text, 1.0)], stamp=7)
    tail = conv.unindexed_tail()
    assert [m.text for m in tail.messages] == ["second draft"] and tail.stamp == 7  # the newer version stays
    conv.indexed([PendingItem(NS, "m0", "second draft", 1.0)], stamp=9)
    assert conv.unindexed_tail() == Tail([], 9) and conv.unindexed is None


class FakeRouter:
    """A shard that has just applied the upsert the host confirmed: its first answer predates it
    (stamp 3, message missing), the second includes it (stamp 5). A fake, not a mock: the race is
    between two processes and cannot be timed from a test."""

    def __init__(self) -> None:
        self.calls = 0

    async def search_many(self, requests: list[Any]) -> list[RouterResult]:
        self.calls += 1
        if self.calls == 1:
            return [RouterResult([], False, None, Bm25Stats(1, 3, {}), {NS: 3}, {NS: []}) for _ in requests]
        payload = msg(4, "the code word is tangerine").model_dump_json()
        hit = ShardHit(NS, "m4", 0.9, 4.0, payload)
        return [RouterResult([hit], False, None, Bm25Stats(2, 6, {"tangerin": 1}), {NS: 5}, {NS: []}) for _ in requests]


class ConfirmedHost:
    """A host whose tail of the conversation is empty: it confirmed the upsert with stamp 5."""

    async def recent_many(self, requests: list[tuple[ConversationKey, int]]) -> list[tuple[list[Message], Tail]]:
        return [([msg(9, "latest")], Tail([], 5)) for _ in requests]  # m4 confirmed with stamp 5: left the tail


class NoExtras:
    """A store with no summary and no working memory."""

    def context_extras(self, requests: list[tuple[ConversationKey, str]]) -> list[tuple[None, None, int]]:
        return [(None, None, 0) for _ in requests]


def test_a_shard_answer_older_than_the_hosts_confirmation_is_asked_again() -> None:
    router = FakeRouter()
    host = HostClient(LocalRef(ConfirmedHost(), "host 0"))
    store = StorePartitions([StoreClient(LocalRef(NoExtras(), "store"))])
    recall = Recall(QueryEncoder(None, Calibration(1.0, 0.0)), router, store, "hybrid", lambda key: host)  # type: ignore[arg-type]

    ctx = asyncio.run(recall.context(ContextRead(KEY, "tangerine", limit=1, semantic_limit=2)))
    assert router.calls == 2 and ctx.recalled_ids == ["m4"]


def test_a_search_finds_what_this_process_wrote_until_the_shard_holds_it() -> None:
    """One call: the search tells the shard the seqs this process wrote; the shard says which it
    holds; the rest are scored here (memray.conversation.recall)."""

    class Shard:
        def __init__(self) -> None:
            self.held: list[int] = []
            self.watched: list[Any] = []

        async def search_many(self, requests: list[Any]) -> list[RouterResult]:
            self.watched += [r.query.watch for r in requests]
            return [
                RouterResult([], False, None, Bm25Stats(0, 0, {}), {NS: 0}, {NS: list(self.held)}) for _ in requests
            ]

    shard = Shard()
    host = HostClient(LocalRef(ConfirmedHost(), "host 0"))
    recall = Recall(QueryEncoder(None, Calibration(1.0, 0.0)), shard, None, "hybrid", lambda key: host)  # type: ignore[arg-type]
    recall.written.add(
        KEY, [msg(0, "the parcel code is zebra"), msg(0, "no text").model_copy(update={"parts": []})], [7, 8]
    )
    hits = asyncio.run(recall.search(SearchRead(KEY, "parcel code", 3)))
    assert [h.message.id for h in hits] == ["m0"] and hits[0].message.seq == 7
    assert shard.watched[-1] == ((NS, (7,)),)  # the message without text is not kept
    shard.held = [7]
    assert (
        list(asyncio.run(recall.search(SearchRead(KEY, "parcel code", 3)))) == []
    )  # held: the shard answers (here: nothing)
    asyncio.run(recall.search(SearchRead(KEY, "parcel code", 3)))
    assert shard.watched[-1] == ()  # forgotten once the shard held it


def test_what_a_host_says_is_indexed_is_forgotten_but_not_what_it_had_not_seen() -> None:
    """context() hands the host's answer to Written: messages the host held (seq up to its newest)
    and no longer has in its tail are indexed; one added after the host answered is kept."""
    written = Written()
    written.add(KEY, [msg(0, "one"), msg(1, "two")], [1, 2])
    written.confirmed(KEY, Tail([msg(1, "two")], 0), last_seq=2)
    assert written.count_user(KEY.app, KEY.user_id) == 1  # "two" is not indexed yet
    written.add(KEY, [msg(2, "three")], [3])
    written.confirmed(KEY, Tail([], 0), last_seq=2)  # an answer from before "three" arrived
    assert written.count_user(KEY.app, KEY.user_id) == 1
    written.confirmed(KEY, Tail([], 0), last_seq=3)
    assert written.count_user(KEY.app, KEY.user_id) == 0 and written.unseen(KEY, "user") == {}


def test_a_tail_of_what_this_process_wrote_holds_the_very_messages_with_their_seqs() -> None:
    """Written keeps a message packed (one tuple), or as itself when it does not pack (metadata
    that is not plain JSON); either way the tail a search gets is the message added, with its seq."""
    plain = Message(id="p", role="user", parts="my locker code is 4417", metadata={"k": [1]}, sim_time=3.0)
    odd = Message(id="o", role="user", parts="the parcel is at the desk", metadata={"when": {1, 2}})  # a set
    written = Written()
    written.add(KEY, [plain, odd], [4, 5])
    tails = written.seen(KEY, {NS: []})
    assert tails[KEY].messages == [plain.model_copy(update={"seq": 4}), odd.model_copy(update={"seq": 5})]
    assert written.seen(KEY, {NS: [4, 5]}) == {} and written.count_user(KEY.app, KEY.user_id) == 0


def test_a_tails_neighbours_are_its_messages_at_seq_minus_and_plus_one() -> None:
    """In seq order (as a tail is) or not, each message's neighbours are those at seq - 1 and seq + 1."""
    for seqs in ([3, 4, 5, 7, 8], [8, 3, 5, 4, 7], [2, 9], [6], []):
        msgs = [Message(id=f"m{s}", role="user", parts=f"text {s}", seq=s) for s in seqs]
        before, after = TailSource(NS, msgs, None).adjacent()
        assert before.tolist() == [seqs.index(s - 1) if s - 1 in seqs else -1 for s in seqs], seqs
        assert after.tolist() == [seqs.index(s + 1) if s + 1 in seqs else -1 for s in seqs], seqs
