"""A small in-memory stand-in for the history store's working-memory and summary methods.

It implements only what the working-memory and summary cores call, with the same
compare-and-set semantics as memray.store.base.HistoryStoreAPI. At integration the tests can run
against the real HistoryStore (a DuckDB file in tmp_path) instead: it is a drop-in replacement.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from memray.errors import ConflictError
from memray.ids import ConversationKey
from memray.models import Message
from memray.rpc.local import LocalRef
from memray.store.base import SummaryState, WMScope
from memray.store.rows import MessageRow, message_to_row


class FakeStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.wm: dict[tuple[str, str, str, str | None], tuple[str | None, int]] = {}
        self.summaries: dict[ConversationKey, SummaryState] = {}
        self.messages: dict[ConversationKey, list[MessageRow]] = {}
        self.puts = 0
        self.get_messages_calls: list[int | None] = []

    # -- working memory -------------------------------------------------------------------
    def get_working_memory(
        self, app: str, user_id: str, scope: WMScope, conversation_id: str | None
    ) -> tuple[str | None, int]:
        assert (scope == "user") == (conversation_id is None)
        with self._lock:
            return self.wm.get((app, user_id, scope, conversation_id), (None, 0))

    def put_working_memory(
        self, app: str, user_id: str, scope: WMScope, conversation_id: str | None,
        content: str | None, expected_version: int,
    ) -> int:
        assert (scope == "user") == (conversation_id is None)
        key = (app, user_id, scope, conversation_id)
        with self._lock:
            _, version = self.wm.get(key, (None, 0))
            if version != expected_version:
                raise ConflictError("stale working memory", expected_version, version)
            self.wm[key] = (content, version + 1)
            self.puts += 1
            return version + 1

    # -- summaries and messages -----------------------------------------------------------
    def add(self, key: ConversationKey, messages: list[Message]) -> None:
        rows = self.messages.setdefault(key, [])
        for msg in messages:
            seq = len(rows) + 1
            rows.append(message_to_row(key, msg.model_copy(update={"seq": seq})))

    def get_messages(
        self, key: ConversationKey, limit: int | None = None, before_seq: int | None = None,
        after_seq: int | None = None, roles: list[str] | None = None, metadata: object = None,
    ) -> list[MessageRow]:
        self.get_messages_calls.append(after_seq)
        rows = [
            r for r in self.messages.get(key, [])
            if (after_seq is None or r.seq > after_seq) and (before_seq is None or r.seq < before_seq)
        ]
        return rows[-limit:] if limit else rows

    def get_summary(self, key: ConversationKey) -> SummaryState | None:
        with self._lock:
            return self.summaries.get(key)

    def put_summary(self, key: ConversationKey, text: str, through_seq: int, expected_version: int) -> int:
        with self._lock:
            old = self.summaries.get(key)
            version = old.version if old else 0
            if version != expected_version:
                raise ConflictError("stale summary", expected_version, version)
            self.summaries[key] = SummaryState(text, through_seq, version + 1)
            return version + 1


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def fake_store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def store_ref(fake_store: FakeStore) -> Iterator[LocalRef]:
    # The fake runs behind a LocalRef on its own thread, as the real store actor would.
    ref = LocalRef(fake_store, "history store")
    yield ref
    ref.shutdown()
