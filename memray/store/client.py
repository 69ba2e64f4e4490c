"""`StoreClient`: the typed calls to a :class:`~memray.store.history.HistoryStore` (its actor in
Ray mode, the object itself in-process), with each call's priority declared.

Every method has the store's signature and contract (see :class:`~memray.store.history.HistoryStore`).
The store actor serves one call at a time and lets the most urgent waiting call in first
(:class:`~memray.rpc.client.Priority`): message commits, which durable lag waits for, before reads
and other writes, before background work (vectors, scans, exports).
"""

from __future__ import annotations

from typing import Any

from memray.ids import ConversationKey, Namespace
from memray.models import ConversationOrder
from memray.rpc.client import Client, background, short_read, urgent
from memray.sim_time import Window
from memray.store.base import ConversationSnapshot, IndexRow, SummaryState, WMScope
from memray.store.deadletter import CommitResult, DeadLetter
from memray.store.keys import KeyRecord
from memray.store.messages import Correction
from memray.store.rows import EmbeddingRow, EntryRow, MessageRow

__all__ = ["StoreClient"]


class StoreClient(Client):
    """Typed calls to the history store (see the module docstring)."""

    # -- lifecycle -----------------------------------------------------------------------
    async def open(self, owner: dict[str, Any] | None = None) -> None:
        return await self._call("open", owner)

    async def close(self) -> None:
        return await self._call("close")

    async def ping(self) -> bool:
        return await self._call("ping")

    @urgent  # a diagnostic that must answer under load: it waits only for the call in progress
    async def pid(self) -> int:
        return await self._call("pid")

    # -- messages (commits are urgent: durable lag waits for them) -----------------------
    @urgent
    async def append_messages(self, rows: list[MessageRow]) -> list[Correction]:
        return await self._call("append_messages", rows)

    @urgent
    async def commit_messages(self, rows: list[MessageRow]) -> CommitResult:
        return await self._call("commit_messages", rows)

    @urgent  # a diagnostic: counters only
    async def write_stats(self) -> dict[str, float]:
        return await self._call("write_stats")

    @urgent
    async def record_dead_letters(self, letters: list[DeadLetter]) -> int:
        return await self._call("record_dead_letters", letters)

    async def dead_letters(
        self, app: str | None = None, user_id: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        return await self._call("dead_letters", app, user_id, limit)

    @urgent
    async def resolve_acknowledged(
        self, acked: list[tuple[ConversationKey, str, int]], reason: str
    ) -> list[DeadLetter]:
        return await self._call("resolve_acknowledged", acked, reason)

    async def stored_seqs(self, requests: list[tuple[ConversationKey, list[str]]]) -> list[dict[str, int]]:
        return await self._call("stored_seqs", requests)

    async def assigned_seqs(self, requests: list[tuple[ConversationKey, list[str]]]) -> list[dict[str, int]]:
        return await self._call("assigned_seqs", requests)

    async def count_dead_letters(self) -> dict[str, int]:
        return await self._call("count_dead_letters")

    async def load_conversation(self, key: ConversationKey, window: int) -> ConversationSnapshot:
        return await self._call("load_conversation", key, window)

    @short_read  # answered from the store's cache but on a summary or working-memory write
    async def context_extras(
        self, requests: list[tuple[ConversationKey, WMScope]]
    ) -> list[tuple[str | None, str | None, int]]:
        return await self._call("context_extras", requests)

    async def load_conversations(self, keys: list[ConversationKey], window: int) -> list[ConversationSnapshot]:
        return await self._call("load_conversations", keys, window)

    async def get_messages(
        self,
        key: ConversationKey,
        limit: int | None = None,
        before_seq: int | None = None,
        after_seq: int | None = None,
        roles: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        window: Window | None = None,
        agent_id: str | None = None,
        sub_agent_id: str | None = None,
    ) -> list[MessageRow]:
        return await self._call(
            "get_messages", key, limit, before_seq, after_seq, roles, metadata, window, agent_id, sub_agent_id
        )

    async def fetch_messages(self, app: str, user_id: str, refs: list[tuple[str, str]]) -> list[MessageRow]:
        return await self._call("fetch_messages", app, user_id, refs)

    # -- the server's API keys --------------------------------------------------------------
    async def put_api_key(self, record: KeyRecord) -> None:
        return await self._call("put_api_key", record)

    async def api_keys(self, app: str | None = None) -> list[KeyRecord]:
        return await self._call("api_keys", app)

    async def revoke_api_key(self, key_id: str, at: float) -> bool:
        return await self._call("revoke_api_key", key_id, at)

    # -- conversations -------------------------------------------------------------------
    async def create_conversation(
        self, key: ConversationKey, title: str | None, metadata: dict[str, Any]
    ) -> dict[str, Any]:
        return await self._call("create_conversation", key, title, metadata)

    async def get_conversation(self, key: ConversationKey) -> dict[str, Any] | None:
        return await self._call("get_conversation", key)

    async def list_conversations(
        self, app: str, user_id: str, order: ConversationOrder, limit: int, offset: int
    ) -> list[dict[str, Any]]:
        return await self._call("list_conversations", app, user_id, order, limit, offset)

    async def update_conversation(
        self, key: ConversationKey, title: str | None, metadata_patch: dict[str, Any] | None
    ) -> dict[str, Any]:
        return await self._call("update_conversation", key, title, metadata_patch)

    async def retitle(self, key: ConversationKey, expected: str | None, title: str) -> bool:
        return await self._call("retitle", key, expected, title)

    async def count_conversations(self, app: str, user_id: str) -> int:
        return await self._call("count_conversations", app, user_id)

    async def delete_conversation(self, key: ConversationKey) -> dict[str, int]:
        return await self._call("delete_conversation", key)

    async def delete_messages(self, key: ConversationKey, ids: list[str]) -> dict[str, int]:
        return await self._call("delete_messages", key, ids)

    async def clear_messages(self, key: ConversationKey, through_seq: int) -> tuple[dict[str, int], list[str]]:
        return await self._call("clear_messages", key, through_seq)

    async def count_messages(self, key: ConversationKey, ids: list[str] | None = None) -> dict[str, int]:
        return await self._call("count_messages", key, ids)

    # -- embeddings (background: they wait while anything else is queued) ----------------
    @background
    async def put_embeddings(self, rows: list[EmbeddingRow]) -> int:
        return await self._call("put_embeddings", rows)

    @background
    async def mark_embedding_failed(self, refs: list[tuple[Namespace, str]], error: str) -> None:
        return await self._call("mark_embedding_failed", refs, error)

    @background
    async def pending_embeddings(self, model_id: str, limit: int) -> list[tuple[Namespace, str, str]]:
        return await self._call("pending_embeddings", model_id, limit)

    @background
    async def missing_embeddings(self, model_id: str, refs: list[tuple[Namespace, str]]) -> list[int]:
        return await self._call("missing_embeddings", model_id, refs)

    @background
    async def scan_index_rows(
        self,
        shard: int,
        shards: int,
        model_id: str,
        after: tuple[Namespace, str] | None,
        limit: int,
        unembedded: bool = False,
    ) -> list[IndexRow]:
        return await self._call("scan_index_rows", shard, shards, model_id, after, limit, unembedded)

    @background
    async def index_digest(self, shard: int, shards: int, model_id: str) -> tuple[int, int]:
        return await self._call("index_digest", shard, shards, model_id)

    @background
    async def index_refs(self, shard: int, shards: int, model_id: str) -> list[tuple[Namespace, str, bool]]:
        return await self._call("index_refs", shard, shards, model_id)

    @background
    async def fetch_index_rows(self, wanted: list[tuple[Namespace, str]], model_id: str) -> list[IndexRow]:
        return await self._call("fetch_index_rows", wanted, model_id)

    # -- working memory and summaries ----------------------------------------------------
    async def get_working_memory(
        self, app: str, user_id: str, scope: WMScope, conversation_id: str | None
    ) -> tuple[str | None, int]:
        return await self._call("get_working_memory", app, user_id, scope, conversation_id)

    async def put_working_memory(
        self,
        app: str,
        user_id: str,
        scope: WMScope,
        conversation_id: str | None,
        content: str | None,
        expected_version: int,
    ) -> int:
        return await self._call("put_working_memory", app, user_id, scope, conversation_id, content, expected_version)

    async def get_summary(self, key: ConversationKey) -> SummaryState | None:
        return await self._call("get_summary", key)

    async def put_summary(self, key: ConversationKey, text: str, through_seq: int, expected_version: int) -> int:
        return await self._call("put_summary", key, text, through_seq, expected_version)

    # -- long-term entries ---------------------------------------------------------------
    async def put_entries(self, rows: list[EntryRow], replace_session: tuple[str, str, str] | None = None) -> list[str]:
        return await self._call("put_entries", rows, replace_session)

    async def get_entries(self, app: str, user_id: str, ids: list[str]) -> list[EntryRow]:
        return await self._call("get_entries", app, user_id, ids)

    async def list_entries(
        self,
        app: str,
        user_id: str,
        project_id: str | None = None,
        session_id: str | None = None,
        all_projects: bool = False,
        limit: int | None = None,
    ) -> list[EntryRow]:
        return await self._call("list_entries", app, user_id, project_id, session_id, all_projects, limit)

    async def entry_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        return await self._call("entry_projects", app, user_id)

    async def delete_entries(self, app: str, user_id: str, ids: list[str]) -> int:
        return await self._call("delete_entries", app, user_id, ids)

    # -- forks -------------------------------------------------------------------------
    async def version(self) -> int:
        return await self._call("version")

    async def changed_refs(self, version: int) -> list[tuple[Namespace, str]]:
        return await self._call("changed_refs", version)

    async def fork_to(self, dst: str) -> dict[str, int]:
        return await self._call("fork_to", dst)

    # -- erasure and exports -------------------------------------------------------------
    async def delete_user(self, app: str, user_id: str) -> dict[str, int]:
        return await self._call("delete_user", app, user_id)

    async def count_user(self, app: str, user_id: str) -> dict[str, int]:
        return await self._call("count_user", app, user_id)

    @background
    async def table_counts(self, hosts: int) -> tuple[dict[str, int], list[int]]:
        return await self._call("table_counts", hosts)

    @background
    async def export_parquet(self, root: str) -> dict[str, Any]:
        return await self._call("export_parquet", root)

    async def export_roots(self) -> list[str]:
        return await self._call("export_roots")

    @background
    async def purge_exports(self, root: str, app: str, user_id: str) -> int:
        return await self._call("purge_exports", root, app, user_id)
