"""Fixtures for the history store tests: a real DuckDB file in tmp_path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memray.ids import ConversationKey
from memray.store.history import HistoryStore
from memray.store.rows import EntryRow, MessageRow

KEY = ConversationKey("app", "u1", "c1")


def msg(
    i: int,
    key: ConversationKey = KEY,
    *,
    seq: int | None = None,
    role: str = "user",
    text: str | None = None,
    metadata: dict[str, Any] | None = None,
    mid: str | None = None,
) -> MessageRow:
    body = text if text is not None else f"message {i}"
    return MessageRow(
        key.app,
        key.user_id,
        key.conversation_id,
        mid or f"m{i}",
        seq if seq is not None else i,
        role,
        json.dumps([{"type": "text", "text": body}]),
        json.dumps(metadata or {}),
        1000.0 + i,
        body,
    )


def entry(
    eid: str,
    *,
    app: str = "app",
    user: str = "u1",
    session: str | None = None,
    project: str | None = None,
    ts: float = 1.0,
    text: str | None = None,
) -> EntryRow:
    body = text if text is not None else f"entry {eid}"
    return EntryRow(app, user, eid, session, project, "user", json.dumps(body), "{}", ts, body)


@pytest.fixture
def store_path(tmp_path: Path) -> str:
    return str(tmp_path / "data" / "history.duckdb")


@pytest.fixture
def store(store_path: str) -> Iterator[HistoryStore]:
    s = HistoryStore(store_path)
    s.open()
    yield s
    s.close()
