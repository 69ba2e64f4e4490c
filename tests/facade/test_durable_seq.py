"""``durable_seq()`` says how far a conversation is stored: it follows the commits, in both modes."""

from __future__ import annotations

from tests.support.memories import fresh_conversation

APP = "durable"


def test_durable_seq_follows_commits(mem):
    conv = fresh_conversation(mem, APP)
    assert conv.durable_seq() == 0
    conv.add([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}], durable=True)
    assert conv.durable_seq() == 2
    conv.add({"role": "user", "content": "three"})
    conv.flush()
    assert conv.durable_seq() == 3 and mem.internals.run(conv.adurable_seq()) == 3
