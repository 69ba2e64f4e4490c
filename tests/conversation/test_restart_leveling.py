"""A host that stopped without closing may have left items its shards lack:

- embedded in the store and missing from their shards: its pipeline gives the store and the
  shard a batch at once, and only the store's write landed. No sweep of pending items finds them
  (they are not pending). The next incarnation of the host levels every shard with the store
  (until then its context answers count nothing as indexed); one that closed cleanly leaves
  nothing to do.
- committed and not yet embedded (its pipeline stopped with it): pending. The next incarnation
  queues its own conversations' again, and keeps them in their read-your-writes tails until the
  shards have them.

In-process: the host core is restarted by hand, as Ray restarts it."""

from __future__ import annotations

from pathlib import Path

import memray
from memray.conversation.host import ConversationHost
from memray.ids import ConversationKey, conversation_namespace
from memray.models import Message, TextPart
from memray.models.wire import RefList
from memray.store.rows import message_to_row
from tests.support.stranded import stranded


def test_a_restarted_host_levels_the_shards_with_what_its_predecessor_committed(tmp_path: Path) -> None:
    path = str(tmp_path / "m")
    mem = memray.open(path, mode="inprocess", hosts=1, shards=1)
    try:
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add(Message(role="user", parts=[TextPart(text="hello")]), durable=True)
        assert (tmp_path / "m" / "hosts" / "host-0.open").exists()  # an incarnation runs
        run, dep = mem.internals.run, mem.internals.deployment
        ref, shard = stranded(mem, conv.key, "I am allergic to peanuts", seq=2)

        fresh = ConversationHost(0, mem.config, dep.stores, dep.shards)  # as Ray restarts it

        async def restart() -> list[str]:
            [snap] = await dep.stores.load_conversations([conv.key], mem.config.buffer_window)
            await fresh.start()  # leveling starts, in the background
            fresh._conversations[conv.key] = fresh._make(conv.key, snap)  # as a call loads it
            return [m.text for m in fresh._tail(conv.key).messages]

        # until the shards are level, nothing it holds counts as indexed: a caller keeps what it wrote
        assert run(restart()) == ["hello", "I am allergic to peanuts"]
        leveling = fresh._leveling
        assert leveling is not None

        async def leveled() -> None:
            await leveling

        run(leveled())
        assert fresh.leveled_on_restart == 1
        assert run(shard.missing_from(RefList([ref]), vectors=True)) == []
        assert fresh._tail(conv.key).messages == []  # level: the tail is what this incarnation added
        run(fresh.close())
    finally:
        mem.close()
    assert not (tmp_path / "m" / "hosts" / "host-0.open").exists()  # closed cleanly
    with memray.open(path, mode="inprocess", hosts=1, shards=1) as again:
        conv = again.conversation(user_id="u", conversation_id="c")
        assert [m.text for m in conv.messages()] == ["hello", "I am allergic to peanuts"]
        host = again.internals.deployment._hosts[0]  # type: ignore[attr-defined]
        assert host._leveling is None  # nothing to level after a clean close


def test_a_restarted_host_indexes_what_its_predecessor_committed_and_had_not_indexed(tmp_path: Path) -> None:
    """Host 1 of 2 (host 0 once queued every host's pending items at its start, and the others
    none): the message is searchable again, and the host's context answer keeps it in the tail
    until then, so a caller's search that trusts that answer still finds its own write."""
    with memray.open(str(tmp_path / "m"), mode="inprocess", hosts=2, shards=1) as mem:
        run, dep = mem.internals.run, mem.internals.deployment
        key, idle = [k for k in (ConversationKey("default", f"u{i}", "c") for i in range(100)) if k.route(2) == 1][:2]
        conv = mem.conversation(user_id=key.user_id, conversation_id=key.conversation_id)
        conv.add(Message(role="user", parts=[TextPart(text="hello")]), durable=True)
        assert mem.wait_indexed(timeout_s=60)
        stopped = Message(role="user", parts=[TextPart(text="I am allergic to peanuts")], seq=2)
        unread = Message(role="user", parts=[TextPart(text="a conversation nobody reads after the restart")], seq=1)
        rows = [message_to_row(conv.key, stopped), message_to_row(idle, unread)]
        assert run(dep.stores.commit_messages(rows)).rejected == []
        ref, shard = (conversation_namespace(conv.key), stopped.id), dep.shards[0]
        assert run(shard.missing_from(RefList([ref]), vectors=False)) == [ref]

        fresh = ConversationHost(1, mem.config, dep.stores, dep.shards)  # as Ray restarts it

        async def restart() -> list[str]:
            [snap] = await dep.stores.load_conversations([conv.key], mem.config.buffer_window)
            await fresh.start()  # queues the message again; the shard has not had it yet
            loaded = fresh._conversations[conv.key] = fresh._make(conv.key, snap)  # as a call loads it
            return [m.id for m in loaded.unindexed_tail().messages]

        assert run(restart()) == [stopped.id]
        assert run(fresh._pipeline.wait_idle(timeout_s=60, retries=True))
        assert run(shard.missing_from(RefList([ref]), vectors=True)) == []
        leveling = fresh._leveling  # (host 1 did not close either: it levels the shards too)
        assert leveling is not None

        async def leveled() -> None:
            await leveling

        run(leveled())
        assert run(fresh.recent_many([(conv.key, 4)]))[0][1].messages == []
        assert fresh._swept == {}  # the one never loaded again left it once indexed
        run(fresh.close())
