"""The working-memory and summary cores run against the real history store (a DuckDB file in
``tmp_path``) behind a :class:`~memray.store.client.StoreClient` over a
:class:`~memray.rpc.local.LocalRef` (its own thread, as the store actor would). The store counts
the calls the tests reason about; everything else is the store itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memray.ids import ConversationKey
from memray.models import Message
from memray.models.filter import ALL_MESSAGES, MessageFilter
from memray.rpc.local import LocalRef
from memray.store.base import WMScope
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.partitions import StorePartitions
from memray.store.rows import MessageRow, message_to_row


class CountingStore(HistoryStore):
    """The history store, counting working-memory writes and the ``after_seq`` of history reads."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.puts = 0
        self.get_messages_calls: list[int | None] = []

    def add(self, key: ConversationKey, messages: list[Message]) -> None:
        """Store ``messages`` after the conversation's last one (seqs as a host would give them)."""
        first = len(super().get_messages(key)) + 1
        self.append_messages(
            [message_to_row(key, m.model_copy(update={"seq": first + i})) for i, m in enumerate(messages)]
        )

    def get_messages(self, key: ConversationKey, where: MessageFilter = ALL_MESSAGES) -> list[MessageRow]:
        self.get_messages_calls.append(where.after_seq)
        return super().get_messages(key, where)

    def put_working_memory(
        self,
        app: str,
        user_id: str,
        scope: WMScope,
        conversation_id: str | None,
        content: str | None,
        expected_version: int,
    ) -> int:
        version = super().put_working_memory(app, user_id, scope, conversation_id, content, expected_version)
        self.puts += 1
        return version


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CountingStore]:
    store = CountingStore(str(tmp_path / "history.duckdb"))
    store.open()
    yield store
    store.close()


@pytest.fixture
def store_client(store: CountingStore) -> Iterator[StorePartitions]:
    ref = LocalRef(store, "history store")
    yield StorePartitions([StoreClient(ref)])
    ref.shutdown()
