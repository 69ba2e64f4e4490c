"""A host that stopped without closing may have left items embedded in the store and missing from
their shards: its pipeline gives the store and the shard a batch at once, and only the store's
write landed. No sweep of pending items finds them (they are not pending). The next incarnation of
the host levels every shard with the store; one that closed cleanly leaves nothing to do
(in-process: the host core is restarted by hand, as Ray restarts it)."""

from __future__ import annotations

from pathlib import Path

import memray
from memray.conversation.host import ConversationHost
from memray.models import Message, TextPart
from memray.models.wire import RefList
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
        run(fresh.start())
        leveling = fresh._leveling
        assert leveling is not None

        async def leveled() -> None:
            await leveling

        run(leveled())
        assert fresh.leveled_on_restart == 1
        assert run(shard.missing_from(RefList([ref]), vectors=True)) == []
        run(fresh.close())
    finally:
        mem.close()
    assert not (tmp_path / "m" / "hosts" / "host-0.open").exists()  # closed cleanly
    with memray.open(path, mode="inprocess", hosts=1, shards=1) as again:
        conv = again.conversation(user_id="u", conversation_id="c")
        assert [m.text for m in conv.messages()] == ["hello", "I am allergic to peanuts"]
        host = again.internals.deployment._hosts[0]  # type: ignore[attr-defined]
        assert host._leveling is None  # nothing to level after a clean close
