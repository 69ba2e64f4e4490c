"""The records the history store hands back (besides its rows, :mod:`.rows`).

The store's contract is :class:`~memray.store.history.HistoryStore` itself, called through
:class:`~memray.store.client.StoreClient` (held to it by ``tests/rpc/test_clients.py``) and
checked in both modes by ``tests/store/test_store_conformance.py``. Its methods are synchronous
(the store is a single-writer actor: DuckDB allows one writing process per file); arguments and
results are plain data (rows, tuples, dicts) so calls pickle small across Ray; each write is one
transaction: it happens whole or not at all.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from memray.ids import Namespace
from memray.store.rows import MessageRow

__all__ = ["ConversationSnapshot", "IndexRow", "SummaryState", "WMScope"]

WMScope = Literal["conversation", "user"]


class ConversationSnapshot(NamedTuple):
    """What a host needs to bring a conversation into memory."""

    exists: bool
    last_seq: int  # 0 when the conversation has no messages
    recent: list[MessageRow]  # the last `window` messages, oldest first


class SummaryState(NamedTuple):
    text: str
    summarized_through_seq: int
    version: int


class IndexRow(NamedTuple):
    """An item a vector shard indexes, as the store hands it back for rebuilds."""

    namespace: Namespace
    doc_id: str
    vector: Any  # float32[dim]; None for an item not (yet) embedded with the model
    text: str
    recency: float  # seq for messages, timestamp for entries: later wins ties
    columns: tuple[float, float, float] | None = None  # (created_at, sim_time, importance); NaN: none
