"""``mem.internals``: the running parts under a memray for jobs and extensions (docs/internals.md).
It is the object the handles are built from, its parts are the session's, and once the memray is
closed it refuses every member as the handles do."""

from __future__ import annotations

import asyncio

import pytest

import memray
from memray.errors import ClosedError
from memray.ids import ConversationKey


def test_the_parts_are_the_running_sessions(mem: memray.Memory, app: str) -> None:
    parts = mem.internals
    assert isinstance(parts, memray.Internals) and not parts.closed
    session = parts.session
    assert (parts.deployment, parts.recall, parts.router, parts.encoder, parts.embedder, parts.service) == (
        session.deployment,
        session.recall,
        session.router,
        session.encoder,
        session.embedder,
        session.service,
    )
    conv = mem.conversation("u", "c", app)
    conv.add({"role": "user", "content": "otters hold hands"}, durable=True)
    assert parts.host_for(conv.key) is session.host_for(conv.key)
    rows = parts.run(parts.deployment.stores.get_messages(conv.key))
    assert [r.text for r in rows] == ["otters hold hands"]


def test_a_handle_is_built_from_the_internals_not_the_memory(mem: memray.Memory, app: str) -> None:
    conv = memray.ConversationHandle(mem.internals, ConversationKey.of(app, "u", "built"))
    conv.add({"role": "user", "content": "made without the Memory"}, durable=True)
    assert [m.text for m in mem.conversation("u", "built", app).messages()] == ["made without the Memory"]
    assert memray.MemoryServiceHandle(mem.internals).list_entries(app, "u") == []


def test_arun_runs_a_part_from_a_coroutine(mem: memray.Memory, app: str) -> None:
    parts = mem.internals
    conv = mem.conversation("u", "async", app)
    conv.add({"role": "user", "content": "one"}, durable=True)

    async def caller() -> tuple[int, int]:  # a caller's own loop, not memray's
        assert not parts.on_loop()
        return await parts.arun(parts.host_for(conv.key).last_seq(conv.key))

    assert asyncio.run(caller())[1] == 1  # the durable seq


def test_closed_refuses_the_accessor_and_every_member(tmp_path) -> None:
    mem = memray.open(str(tmp_path / "m"), mode="inprocess", hosts=1, shards=1)
    parts = mem.internals
    mem.close()
    assert parts.closed and mem.closed
    with pytest.raises(ClosedError):
        _ = mem.internals
    for member in ("session", "deployment", "recall", "router", "encoder", "embedder", "service"):
        with pytest.raises(ClosedError):
            getattr(parts, member)
    with pytest.raises(ClosedError):
        parts.host_for(ConversationKey.of("a", "u", "c"))
