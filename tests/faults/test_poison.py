"""Poison that gets past validation (a row the store refuses) is dead-lettered, never retried
forever: the rest of its batch and of its conversation is stored, flush() raises naming it, no
call hangs, close() returns. Both modes; the poison is sent to the host directly, as a message
that slipped past the facade would arrive."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

import memray
from memray.errors import DeadLetterError
from memray.models import Message, TextPart

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    m = memray.open(
        config=memray.MemoryConfig(
            path=str(tmp_path_factory.mktemp(f"poison-{request.param}")),
            mode=request.param,
            hosts=1,
            shards=1,
            debounce_ms=10,
            write_timeout_s=20,
        )
    )
    yield m
    m.close(terminate=True)


def poison(kind: str) -> Message:
    """A message as it would be if validation had missed it (built without validating)."""
    text, created, mid, meta = "x", time.time(), f"poison-{kind}-{uuid.uuid4().hex[:6]}", {}
    if kind == "inf":
        created = float("inf")
    elif kind == "nan":
        created = float("nan")
    elif kind == "content":
        text = "a\ud800b"
    elif kind == "id":
        mid = "a\ud800b" + uuid.uuid4().hex[:6]
    elif kind == "metadata":
        meta = {"k": "a\ud800b"}
    return Message.model_construct(
        id=mid, role="user", parts=[TextPart(text=text)], created_at=created, metadata=meta, seq=None
    )


@pytest.mark.parametrize("kind", ["inf", "nan", "content", "id", "metadata"])
def test_poison_past_validation_is_dead_lettered_and_the_conversation_goes_on(mem: memray.Memory, kind: str) -> None:
    conv = mem.conversation(user_id="u", conversation_id=uuid.uuid4().hex, app="poison")
    bystander = mem.conversation(user_id="v", conversation_id=uuid.uuid4().hex, app="poison")
    host = mem.internals.host_for(conv.key)
    bad = poison(kind)
    assert conv.add({"role": "user", "content": "before"}) == [1]
    assert mem.internals.run(host.add(conv.key, [bad], False)) == [2]  # acknowledged, as before the fix
    assert bystander.add({"role": "user", "content": "other conversation"}) == [1]
    assert conv.add({"role": "user", "content": "after"}) == [3]
    t0 = time.monotonic()
    with pytest.raises(DeadLetterError) as err:
        conv.flush()
    assert time.monotonic() - t0 < 10, "flush must not wait on a row that can never be stored"
    assert [(x[4], x[5]) for x in err.value.letters] == [(2, "rejected")]
    assert "seq 2 rejected" in str(err.value)
    conv.flush()  # reported once; nothing left pending
    assert conv.add({"role": "user", "content": "durable after"}, durable=True) == [4]
    rows = mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))
    assert [(r.seq, r.text) for r in rows] == [(1, "before"), (3, "after"), (4, "durable after")]
    assert [m.seq for m in conv.messages()] == [1, 3, 4]  # the poison left the buffer too
    assert [m.text for m in bystander.messages()] == ["other conversation"]
    mem.flush()
    letters = [d for d in mem.dead_letters(app="poison", user_id="u") if d.conversation_id == conv.key.conversation_id]
    assert [(d.seq, d.kind) for d in letters] == [(2, "rejected")]
    assert sum(s["dead_letters"] for s in mem.stats()) >= 1


def test_a_durable_add_of_poison_raises_and_nothing_else_is_lost(mem: memray.Memory) -> None:
    conv = mem.conversation(user_id="u", conversation_id=uuid.uuid4().hex, app="poison")
    good = Message(role="user", parts=[TextPart(text="good twin")])
    with pytest.raises(DeadLetterError):
        mem.internals.run(mem.internals.host_for(conv.key).add(conv.key, [good, poison("inf")], True))
    assert [r.text for r in mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))] == ["good twin"]


def test_close_returns_and_reports_unflushed_dead_letters(tmp_path, request: pytest.FixtureRequest) -> None:
    m = memray.open(str(tmp_path / "m"), mode="inprocess", hosts=1, shards=1, debounce_ms=10, write_timeout_s=20)
    conv = m.conversation(user_id="u", conversation_id="c")
    m.internals.run(m.internals.host_for(conv.key).add(conv.key, [poison("nan")], False))
    conv.add({"role": "user", "content": "fine"})
    t0 = time.monotonic()
    with pytest.raises(memray.StoreError, match="1 were dead-lettered"):
        m.close()
    assert time.monotonic() - t0 < 15
    with memray.open(str(tmp_path / "m"), mode="inprocess", hosts=1, shards=1) as again:
        assert [m.text for m in again.conversation(user_id="u", conversation_id="c").messages()] == ["fine"]
        assert [d.kind for d in again.dead_letters()] == ["rejected"]
