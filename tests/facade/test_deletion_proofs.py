"""``clear()`` and ``delete_messages()`` remove messages from every place memray keeps them,
and ``verify_deleted()`` proves it, in both modes."""

from __future__ import annotations

from tests.support.memories import fresh_conversation

APP = "proofs"


def test_clear_removes_every_message_everywhere_and_keeps_the_conversation(mem, tmp_path):
    conv = fresh_conversation(mem, APP)
    conv.add([{"id": f"m{i}", "role": "user", "content": f"the vault code is {4470 + i}"} for i in range(4)])
    conv.working_memory.update("Ada guards the vault")
    mem.wait_indexed()
    mem.export(str(tmp_path / "export"))
    assert not conv.verify_deleted().clean

    counts = conv.clear()

    assert counts["messages"] == 4 and counts["vectors"] == 4 and counts["export_rows"] == 4
    proof = conv.verify_deleted()
    assert proof.clean, proof.remaining
    assert set(proof.remaining) >= {
        "messages",
        "embeddings",
        "vectors",
        "host_messages",
        "host_queued",
        "export_rows",
        "snapshot_items",
    }
    assert conv.messages() == [] and conv.search("vault code") == []
    assert conv.working_memory.get().text == "Ada guards the vault"
    info = conv.info()
    assert info is not None and info.last_seq == 4
    assert conv.add({"role": "user", "content": "a new start"}) == [5]
    assert not conv.verify_deleted().clean  # the new message is there
    assert conv.verify_deleted(["m0", "m3"]).clean


def test_delete_messages_is_proven_by_verify_deleted(mem):
    conv = fresh_conversation(mem, APP)
    conv.add(
        [
            {"id": "keep", "role": "user", "content": "keep this"},
            {"id": "gone", "role": "user", "content": "forget this"},
        ]
    )
    mem.wait_indexed()
    assert not conv.verify_deleted(["gone"]).clean
    conv.delete_messages(["gone"])
    assert conv.verify_deleted(["gone"]).clean
    assert not conv.verify_deleted(["keep"]).clean
