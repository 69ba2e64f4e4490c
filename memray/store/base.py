"""The contract of the history store: what hosts, the service and the jobs call on it.

All methods are synchronous (the store is a single-writer actor: DuckDB allows one writing
process per file). Arguments and results are plain data (rows, tuples, dicts) so calls pickle
small across Ray. Each write is one transaction: it happens whole or not at all.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, Protocol

from memray.ids import ConversationKey, Namespace
from memray.models import ConversationOrder
from memray.store.rows import EmbeddingRow, EntryRow, MessageRow

__all__ = ["HistoryStoreAPI", "ConversationSnapshot", "IndexRow", "SummaryState", "WMScope"]

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


class HistoryStoreAPI(Protocol):
    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> None: ...
    def close(self) -> None: ...
    def ping(self) -> bool: ...

    # -- messages -------------------------------------------------------------------------
    def append_messages(self, rows: list[MessageRow]) -> list[tuple[str, str, str, str, int, float]]:
        """Upsert messages in one transaction (group commit) and get-or-create their
        conversations. A row whose (app, user_id, conversation_id, id) exists keeps its stored
        seq and created_at; its role, parts, metadata and text are updated and it is marked for
        re-embedding. Returns (app, user_id, conversation_id, id, seq, created_at) for each such
        pre-existing row whose stored seq differs from the row's, so the caller can correct
        its copy. Durable when it returns (DuckDB commit, WAL)."""
        ...

    def load_conversation(self, key: ConversationKey, window: int) -> ConversationSnapshot: ...

    def load_conversations(self, keys: list[ConversationKey], window: int) -> list[ConversationSnapshot]:
        """``load_conversation`` for many keys in one call, in the order of ``keys``."""
        ...

    def get_messages(
        self,
        key: ConversationKey,
        limit: int | None = None,
        before_seq: int | None = None,
        after_seq: int | None = None,
        roles: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> list[MessageRow]:
        """Messages by seq. ``limit`` = the most recent N that match, returned oldest first.
        ``metadata`` matches rows whose metadata has each key with an equal (JSON) value."""
        ...

    def fetch_messages(self, app: str, user_id: str, refs: list[tuple[str, str]]) -> list[MessageRow]:
        """Messages by (conversation_id, message id), for hydrating search hits."""
        ...

    # -- conversations --------------------------------------------------------------------
    def create_conversation(self, key: ConversationKey, title: str | None, metadata: dict[str, Any]) -> dict[str, Any]:
        """Get-or-create; returns the ConversationInfo fields as a dict."""
        ...

    def get_conversation(self, key: ConversationKey) -> dict[str, Any] | None: ...

    def list_conversations(
        self, app: str, user_id: str, order: ConversationOrder,
        limit: int, offset: int,
    ) -> list[dict[str, Any]]: ...

    def update_conversation(
        self, key: ConversationKey, title: str | None, metadata_patch: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Set the title (if given) and merge ``metadata_patch`` into metadata (keys set, others kept).
        Raises NotFoundError if the conversation does not exist."""
        ...

    def delete_conversation(self, key: ConversationKey) -> dict[str, int]:
        """Delete the conversation and cascade: messages, embeddings, conversation-scope working
        memory, summary. Returns counts per table."""
        ...

    def delete_messages(self, key: ConversationKey, ids: list[str]) -> dict[str, int]:
        """Delete some messages of the conversation with their vectors (and exported rows);
        the conversation and its last seq stay. Returns counts per table."""
        ...

    # -- embeddings -----------------------------------------------------------------------
    def put_embeddings(self, rows: list[EmbeddingRow]) -> int:
        """Upsert vectors by (namespace, doc_id, model_id) and mark their messages/entries
        embedded with that model. Rows whose item no longer exists are skipped (a delete won)."""
        ...

    def mark_embedding_failed(self, refs: list[tuple[Namespace, str]], error: str) -> None: ...

    def pending_embeddings(self, model_id: str, limit: int) -> list[tuple[Namespace, str, str]]:
        """(namespace, doc_id, text) of durable items that have no vector of ``model_id`` yet."""
        ...

    def missing_embeddings(self, model_id: str, refs: list[tuple[Namespace, str]]) -> list[int]:
        """Positions in ``refs`` of the items that have no vector of ``model_id``."""
        ...

    def scan_index_rows(
        self, shard: int, shards: int, model_id: str, after: tuple[Namespace, str] | None, limit: int,
        unembedded: bool = False,
    ) -> list[IndexRow]:
        """Page through the items of one shard (user_hash % shards == shard) that have a vector of
        ``model_id``, ordered by (namespace, doc_id), starting after ``after``. With
        ``unembedded``, items with text but no such vector come too, with ``vector=None`` (a
        recovering shard indexes them lexically)."""
        ...

    # -- working memory and summaries -----------------------------------------------------
    def get_working_memory(self, app: str, user_id: str, scope: WMScope, conversation_id: str | None) -> tuple[str | None, int]:
        """(content, version); (None, 0) when never written."""
        ...

    def put_working_memory(
        self, app: str, user_id: str, scope: WMScope, conversation_id: str | None, content: str | None, expected_version: int
    ) -> int:
        """Write (``None`` clears) if the stored version equals ``expected_version``; returns the
        new version. Raises ConflictError otherwise; nothing written."""
        ...

    def get_summary(self, key: ConversationKey) -> SummaryState | None: ...

    def context_extras(self, requests: list[tuple[ConversationKey, WMScope]]) -> list[tuple[str | None, str | None]]:
        """(summary text, working-memory content of the given scope) per request, in one call."""
        ...

    def put_summary(self, key: ConversationKey, text: str, through_seq: int, expected_version: int) -> int:
        """Like put_working_memory: compare-and-set on version; returns the new version."""
        ...

    # -- long-term entries ----------------------------------------------------------------
    def put_entries(self, rows: list[EntryRow], replace_session: tuple[str, str, str] | None = None) -> list[str]:
        """Insert/replace entries by (app, user_id, id). With ``replace_session=(app, user, session)``
        first delete that session's entries (same transaction). Returns the ids deleted."""
        ...

    def get_entries(self, app: str, user_id: str, ids: list[str]) -> list[EntryRow]: ...

    def list_entries(
        self, app: str, user_id: str, project_id: str | None = None, session_id: str | None = None,
        all_projects: bool = False, limit: int | None = None,
    ) -> list[EntryRow]:
        """Newest first. ``project_id=None`` and not ``all_projects``: global entries only."""
        ...

    def entry_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """Distinct (user_id, project_id) holding entries in ``app`` (one user's if given), sorted."""
        ...

    def delete_entries(self, app: str, user_id: str, ids: list[str]) -> int: ...

    # -- erasure and exports --------------------------------------------------------------
    def delete_user(self, app: str, user_id: str) -> dict[str, int]:
        """Delete everything of the user in one transaction, then rewrite the file so no freed
        block still holds their data. Returns counts per table."""
        ...

    def count_user(self, app: str, user_id: str) -> dict[str, int]:
        """Rows of the user left in each table (all zero after delete_user)."""
        ...

    def export_parquet(self, root: str) -> dict[str, Any]:
        """Incremental hive-partitioned Parquet export of messages and entries under ``root``
        (only what changed since the last export). Returns a manifest (rows, files, watermark)."""
        ...

    def export_roots(self) -> list[str]:
        """Every export root this store has written to (what erasure purges and proofs scan)."""
        ...

    def purge_exports(self, root: str, app: str, user_id: str) -> int:
        """Rewrite the export under ``root`` without the user; returns rows removed."""
        ...
