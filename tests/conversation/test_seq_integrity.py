"""The seq an add returns is the seq stored, and a seq once given is never given to another
message: re-adds of old ids, retried calls, and a restarted host's ledger (in-process: the host
core is restarted by hand, as Ray would restart its process)."""

from __future__ import annotations

import pytest

import memray
from memray.conversation.host import ConversationHost
from memray.models import Message, TextPart


def msg(text: str, mid: str | None = None) -> Message:
    if mid is None:
        return Message(role="user", parts=[TextPart(text=text)])
    return Message(id=mid, role="user", parts=[TextPart(text=text)])


@pytest.fixture
def mem(tmp_path):
    m = memray.open(str(tmp_path / "m"), mode="inprocess", hosts=1, shards=1, debounce_ms=10, buffer_window=4)
    yield m
    m.close()


def stored(mem: memray.Memory, conv: memray.ConversationHandle) -> dict[str, int]:
    return {r.id: r.seq for r in mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))}


def test_a_readded_old_id_keeps_its_seq_even_unflushed(mem: memray.Memory) -> None:
    conv = mem.conversation(user_id="u", conversation_id="c")
    conv.add([msg(f"m{i}", f"id{i}") for i in range(1, 11)], durable=True)  # 10 > window 4: id1 left the buffer
    assert conv.add(msg("m1 edited", "id1")) == [1]  # not durable=True: the store was asked
    assert conv.add(msg("new")) == [11]  # and seq 11 was not spent on the re-add
    assert [m.seq for m in conv.messages()] == list(range(1, 12))
    conv.flush()
    assert stored(mem, conv)["id1"] == 1
    assert [m.text for m in conv.messages(limit=2, before_seq=3)] == ["m1 edited", "m2"]


def test_a_retried_add_returns_the_seqs_of_its_first_attempt(mem: memray.Memory) -> None:
    conv = mem.conversation(user_id="u", conversation_id="c")
    first = [msg(f"t{i}") for i in range(8)]  # memray's own ids: a first attempt needs no lookup
    host = mem.internals.host_for(conv.key)
    assert mem.internals.run(host.add(conv.key, first, True)) == list(range(1, 9))
    conv.add([msg(f"later {i}") for i in range(6)], durable=True)  # first[:] leave the window
    # the caller never heard back and sends the same call again
    assert mem.internals.run(host.add(conv.key, first, True, retried=True)) == list(range(1, 9))
    assert len(stored(mem, conv)) == 14


def test_a_restarted_host_reports_losses_and_never_reuses_their_seqs(tmp_path) -> None:
    path = str(tmp_path / "r")
    mem = memray.open(path, mode="inprocess", hosts=1, shards=1, debounce_ms=60_000)
    try:
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add([msg("durable")], durable=True)
        lost = [msg("buffered a"), msg("buffered b")]
        assert conv.add(lost) == [2, 3]
        # the host process dies: a fresh host core over the same store and ledger, as Ray restarts it
        dep = mem.internals.deployment
        fresh = ConversationHost(0, mem.config, dep.stores, dep.shards)
        seqs = mem.internals.run(fresh.add(conv.key, [msg("after restart")]))
        assert seqs == [4]  # 2 and 3 were acknowledged: never given again
        assert fresh.lost_on_restart == 2
        assert [(d.seq, d.kind) for d in mem.dead_letters()] == [(3, "lost"), (2, "lost")]
        # the caller retries one of them (it never heard back): it keeps its seq and is not lost any more
        assert mem.internals.run(fresh.add(conv.key, [lost[0]], False, True)) == [2]
        with pytest.raises(memray.DeadLetterError) as err:
            mem.internals.run(fresh.flush(conv.key))
        assert [(x[4], x[5]) for x in err.value.letters] == [(3, "lost")]
        assert {r.seq for r in mem.internals.run(dep.stores.get_messages(conv.key))} == {1, 2, 4}
        mem.internals.run(fresh.close())
    finally:
        mem.close()


def test_ledgers_of_hosts_that_no_longer_exist_are_resolved_too(tmp_path) -> None:
    path = str(tmp_path / "shrunk")
    mem = memray.open(path, mode="inprocess", hosts=3, shards=1, debounce_ms=60_000)
    keys = [mem.conversation(user_id=f"u{i}", conversation_id="c") for i in range(30)]
    on_host_2 = next(k for k in keys if k.key.route(3) == 2)
    assert on_host_2.add(msg("buffered on host 2")) == [1]
    ledger = tmp_path / "shrunk" / "hosts" / "host-2.ledger"
    kept = ledger.read_bytes()  # the process "dies" here: its ledger stays as it is...
    mem.internals.deployment._hosts[2]._conversations.clear()  # type: ignore[attr-defined]  # ...its buffer is gone
    mem.close()
    ledger.write_bytes(kept)
    with memray.open(path, mode="inprocess", hosts=1, shards=1) as again:  # one host now
        conv = again.conversation(user_id=on_host_2.key.user_id, conversation_id="c")
        assert [(d.seq, d.kind) for d in again.dead_letters()] == [(1, "lost")]
        assert conv.add(msg("next")) == [2]
        with pytest.raises(memray.DeadLetterError):
            conv.flush()
    assert not (tmp_path / "shrunk" / "hosts" / "host-2.ledger").exists()


def test_a_retry_returns_the_stored_seq_of_every_message_of_its_batch(mem: memray.Memory) -> None:
    """The store committed the whole batch but the caller never heard back (its host died): the
    restarted host loads the conversation's last ``buffer_window`` messages, asks the store for
    the others, and the retry's earlier messages must not push the later ones out of the buffer
    before their seqs are read (per message, not per call)."""
    conv = mem.conversation(user_id="u", conversation_id="c")
    conv.add([msg("first")], durable=True)
    batch = [msg(f"m{i}") for i in range(10)]  # 10 > window 4
    dep = mem.internals.deployment
    assert mem.internals.run(mem.internals.host_for(conv.key).add(conv.key, batch, True)) == list(range(2, 12))
    fresh = ConversationHost(0, mem.config, dep.stores, dep.shards)  # the host died after the commit
    try:
        assert mem.internals.run(fresh.add(conv.key, batch, True, retried=True)) == list(range(2, 12))
        assert mem.internals.run(fresh.add(conv.key, [msg("next")], True)) == [12]
        held = stored(mem, conv)
        assert [held[m.id] for m in batch] == list(range(2, 12)) and len(held) == 12
    finally:
        mem.internals.run(fresh.close())


def test_a_readd_of_a_whole_old_stretch_keeps_every_seq(mem: memray.Memory) -> None:
    """Caller-chosen ids re-added in one call longer than the window: none gets a second seq."""
    conv = mem.conversation(user_id="u", conversation_id="c")
    conv.add([msg(f"m{i}", f"id{i}") for i in range(1, 11)], durable=True)
    again = [msg(f"m{i} edited", f"id{i}") for i in range(1, 11)]
    assert conv.add(again) == list(range(1, 11))
    conv.flush()
    assert stored(mem, conv) == {f"id{i}": i for i in range(1, 11)}


def test_a_durable_add_returns_the_seq_the_store_keeps(mem: memray.Memory) -> None:
    """The store is the arbiter of an id's seq (the first commit of an id wins). A message the
    host cannot know is stored — the caller sends one of its own messages again, unnamed and not
    as a retry, after it left the buffer — gets a seq the store then corrects: a durable add
    answers with the stored one."""
    conv = mem.conversation(user_id="u", conversation_id="c")
    first = [msg(f"m{i}") for i in range(10)]  # memray's own ids: never looked up on a first send
    assert conv.add(first, durable=True) == list(range(1, 11))
    assert conv.add(first[0], durable=True) == [1]
    assert stored(mem, conv)[first[0].id] == 1


@pytest.mark.parametrize("first_call", ["delete", "clear"])
def test_a_restarted_host_answers_a_delete_or_clear_as_its_first_call(mem: memray.Memory, first_call: str) -> None:
    """A host Ray restarted starts itself on its first call, whatever that call is; a delete as
    the first call raised AttributeError (the chaos soak found it: the call read the removal
    machinery before the start that builds it)."""
    conv = mem.conversation(user_id="u", conversation_id="c")
    ids = [m.id for m in [msg("keep"), msg("drop")]]
    conv.add([Message(id=i, role="user", parts=[TextPart(text=i)]) for i in ids], durable=True)
    dep = mem.internals.deployment
    fresh = ConversationHost(0, mem.config, dep.stores, dep.shards)  # restarted: not started yet
    try:
        if first_call == "delete":
            done = mem.internals.run(fresh.delete_messages(conv.key, [ids[1]]))
            assert done["messages"] == 1 and set(stored(mem, conv)) == {ids[0]}
        else:
            mem.internals.run(fresh.clear(conv.key))
            assert stored(mem, conv) == {}
    finally:
        mem.internals.run(fresh.close())
