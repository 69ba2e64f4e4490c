"""`ConversationHandle.delete_messages`: some messages of a conversation leave the buffer, the
store, the vectors and the Parquet exports; the rest and the seq order stay."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow.dataset as ds
import pytest

import memray
from memray.errors import InvalidIdError, ValidationError


@pytest.fixture
def mem(tmp_path) -> Iterator[memray.Memory]:
    m = memray.open(str(tmp_path / "data"), mode="inprocess", hosts=1, shards=1, debounce_ms=10)
    yield m
    m.close()


def test_deleted_messages_leave_every_store_and_seqs_are_not_reused(mem, tmp_path):
    conv = mem.conversation(user_id="u", conversation_id="c")
    conv.add(
        [
            {"id": "m1", "role": "user", "content": "my locker code is 4471"},
            {"id": "m2", "role": "assistant", "content": "noted the wombat"},
            {"id": "m3", "role": "user", "content": "and the bike lock is 9902"},
        ],
        durable=True,
    )
    mem.wait_indexed()
    mem.export(str(tmp_path / "export"))

    counts = conv.delete_messages(["m1", "m3", "never-there"])

    # the hash embedder's vectors are only in the shard (recomputable: not stored)
    assert counts == {"messages": 2, "embeddings": 0, "export_rows": 2, "vectors": 2}
    assert [(m.id, m.seq) for m in conv.messages()] == [("m2", 2)]
    assert conv.search("locker code 4471", mode="lexical") == []
    assert [h.message.id for h in conv.search("wombat", mode="lexical")] == ["m2"]
    exported = ds.dataset(str(tmp_path / "export" / "messages"), format="parquet").to_table(columns=["id"])
    assert exported.column("id").to_pylist() == ["m2"]
    assert conv.add({"role": "user", "content": "again"}) == [4]


def test_a_message_still_pending_is_deleted_not_written_later(mem):
    conv = mem.conversation(user_id="u", conversation_id="pending")
    conv.add([{"id": "a", "role": "user", "content": "kept"}, {"id": "b", "role": "user", "content": "dropped"}])
    assert conv.delete_messages(["b"])["messages"] == 1  # flushed first, then deleted
    conv.flush()
    assert [m.id for m in conv.messages()] == ["a"]
    stored = mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))
    assert [r.id for r in stored] == ["a"]


def test_delete_messages_validates_ids_before_deleting(mem):
    conv = mem.conversation(user_id="u", conversation_id="v")
    conv.add({"id": "x", "role": "user", "content": "stays"}, durable=True)
    with pytest.raises(InvalidIdError):
        conv.delete_messages(["x", "bad\nid"])
    with pytest.raises(ValidationError, match="not one string"):
        conv.delete_messages("x")
    assert [m.id for m in conv.messages()] == ["x"]
