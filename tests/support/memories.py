"""A memray for tests of the facade, in each mode: in-process, and on the tests' Ray session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import memray

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]


@contextmanager
def memory_in_mode(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, **config: Any
) -> Iterator[memray.Memory]:
    """A memray in the mode ``request.param`` names (one of :data:`MODES`), in a fresh folder,
    with ``config`` over small defaults (one host, one shard, a 10 ms debounce); closed after."""
    mode = request.param
    if mode == "ray":
        request.getfixturevalue("ray_session")
    path = str(tmp_path_factory.mktemp(f"memray-{mode}"))
    settings: dict[str, Any] = {"hosts": 1, "shards": 1, "debounce_ms": 10, **config}
    mem = memray.open(config=memray.MemoryConfig(path=path, mode=mode, **settings))
    try:
        yield mem
    finally:
        mem.close(terminate=True)


def fresh_conversation(mem: memray.Memory, app: str, user_id: str | None = None) -> memray.ConversationHandle:
    """A conversation no other test uses (of a new user, unless ``user_id``)."""
    return mem.conversation(user_id=user_id or uuid.uuid4().hex, conversation_id=uuid.uuid4().hex, app=app)
