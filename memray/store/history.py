"""The DuckDB history store: durable truth for one file, owned by one single-writer actor.

:class:`HistoryStore` is the store's contract, written once: its public methods, each with its
call priority (``@urgent``, ``@background``: the store actor lets the most urgent waiting call in
first) and, where a store of many partitions answers it, its ``@route``
(:mod:`memray.store.routing`). Other cores call it through the
:class:`~memray.store.client.StoreClient` and :class:`~memray.store.partitions.StorePartitions`
derived from these declarations. It keeps one connection and runs calls one at a time (the actor,
or the in-process ref, serialises them).
Every write method is one transaction, committed to DuckDB's WAL before it returns: it survives
a crash of the process (SIGKILL) once it has returned, and is absent entirely if it had not.

The work lives in small modules — :mod:`.messages` (the group-commit upsert), :mod:`.conversations`
(conversations, working memory, summaries), :mod:`.items` (entries and vectors), :mod:`.export`
(Parquet) over :mod:`.database` (connection, transactions, rewrite) and :mod:`.schema` (tables,
Arrow batches, vectorised validation). This class wires them together and owns the cascades.
"""

from __future__ import annotations

import os
import time
from typing import Any, cast

from memray.ids import ConversationKey, Namespace
from memray.models import ConversationOrder, MessageFilter
from memray.models.filter import ALL_MESSAGES
from memray.rpc.client import background, short_read, urgent
from memray.store import census, deadletter, entries, export, items, keys, messages, refs, removal
from memray.store import conversations as conv
from memray.store.base import ConversationSnapshot, IndexRow, SummaryState, WMScope
from memray.store.database import Database
from memray.store.deadletter import CommitResult, DeadLetter
from memray.store.extras import Extras, ExtrasCache
from memray.store.fork import fork_database
from memray.store.keys import KeyRecord
from memray.store.messages import Correction
from memray.store.routing import (
    by_key,
    by_ref,
    by_user,
    by_user_or,
    commit_results,
    concat,
    digest,
    each,
    every,
    first,
    first_key_user,
    flat,
    in_order,
    key_user,
    nothing,
    ns_user,
    positions,
    ref_user,
    route,
    row_user,
    sorted_union,
    split,
    sum_counts,
    total,
)
from memray.store.rows import EmbeddingRow, EntryRow, MessageRow

__all__ = ["HistoryStore"]


class HistoryStore:
    """One DuckDB history file. ``HistoryStore(path)`` stores the path; :meth:`open` opens it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._db = Database(path)
        self._commits = [0, 0, 0.0, 0.0]  # commits, rows, wall and CPU seconds in them (write_stats)
        self._extras = ExtrasCache()  # context_extras answers; the writes below drop a user's

    # -- lifecycle ------------------------------------------------------------------------
    @route(each(nothing))
    def open(self, owner: dict[str, Any] | None = None) -> None:
        """Create or open the file and its tables (finishing an interrupted erasure rewrite).
        ``owner`` describes this process for others that find the file in use (see
        :meth:`.database.Database.open`); a file in use raises StoreError naming its holder."""
        if not self._db.is_open:
            self._extras.clear()
            self._db.open(owner)

    @route(each(nothing))
    def close(self) -> None:
        """Checkpoint the WAL into the file and close. Idempotent."""
        self._extras.clear()
        self._db.close()

    @route(each(every))
    def ping(self) -> bool:
        return self._db.is_open and self._db.sql("SELECT 1").fetchall() == [(1,)]

    @urgent
    def pid(self) -> int:
        """The id of the process that holds the file (the fault tests kill it)."""
        return os.getpid()

    # -- messages -------------------------------------------------------------------------
    @urgent
    @route(split("rows", row_user, concat))
    def append_messages(self, rows: list[MessageRow]) -> list[Correction]:
        """Upsert messages in one transaction (group commit); see :func:`.messages.append_messages`.
        Durability: committed to the WAL when it returns."""
        return messages.append_messages(self._db, rows)

    @urgent
    @route(split("rows", row_user, commit_results))
    def commit_messages(self, rows: list[MessageRow]) -> CommitResult:
        """:meth:`append_messages` that never fails a batch for one bad row: rows rejected for a
        data error are recorded as dead letters and returned; see :func:`.deadletter.commit_messages`.
        Durability: every row is committed or dead-lettered when it returns."""
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return deadletter.commit_messages(self._db, rows)
        finally:
            self._commits[0] += 1
            self._commits[1] += len(rows)
            self._commits[2] += time.perf_counter() - t0
            self._commits[3] += time.process_time() - c0

    @urgent
    def write_stats(self) -> dict[str, float]:
        """Message commits since the store opened: ``commits``, ``rows``, ``busy_s`` (the wall
        seconds spent in them: this store's own time, not its callers' wait) and ``cpu_s`` (the
        CPU seconds this process used meanwhile, DuckDB's threads included: on a busy machine the
        part of ``busy_s`` that is this store's own work, not waiting for a core)."""
        commits, rows, busy_s, cpu_s = self._commits
        return {"commits": commits, "rows": rows, "busy_s": busy_s, "cpu_s": cpu_s}

    @urgent
    @route(split("letters", row_user, total))
    def record_dead_letters(self, letters: list[DeadLetter]) -> int:
        """Record messages that cannot be stored (and keep their seqs from being given out again).
        Durable on return."""
        return deadletter.record(self._db, [DeadLetter(*x) for x in letters])

    @route(by_user_or(each(flat, cut="limit")))
    def dead_letters(self, app: str | None = None, user_id: str | None = None, limit: int = 100) -> list[DeadLetter]:
        """Recorded dead letters, newest first (optionally of one app or user)."""
        return deadletter.list_letters(self._db, app, user_id, limit)

    @urgent
    @route(split("acked", first_key_user, concat))
    def resolve_acknowledged(self, acked: list[tuple[ConversationKey, str, int]], reason: str) -> list[DeadLetter]:
        """Record the acknowledged ``(key, id, seq)`` the store does not hold as ``lost`` dead
        letters, keeping their seqs from reuse; returns them. Durable on return."""
        return deadletter.resolve_acknowledged(self._db, acked, reason)

    @route(split("requests", first_key_user, in_order))
    def stored_seqs(self, requests: list[tuple[ConversationKey, list[str]]]) -> list[dict[str, int]]:
        """Per ``(conversation, ids)``: ``{id: stored seq}`` of the ids the store holds."""
        return messages.stored_seqs(self._db, requests)

    @route(split("requests", first_key_user, in_order))
    def assigned_seqs(self, requests: list[tuple[ConversationKey, list[str]]]) -> list[dict[str, int]]:
        """Per ``(conversation, ids)``: ``{id: seq}`` of the ids that have one — stored, or
        dead-lettered (see :func:`.messages.assigned_seqs`)."""
        return messages.assigned_seqs(self._db, requests)

    @route(each(sum_counts))
    def count_dead_letters(self) -> dict[str, int]:
        """``{"rejected": n, "lost": m}``: dead letters of each kind."""
        return deadletter.count(self._db)

    @route(by_key)
    def load_conversation(self, key: ConversationKey, window: int) -> ConversationSnapshot:
        return conv.load_conversation(self._db, key, window)

    @short_read
    @route(split("requests", first_key_user, in_order))
    def context_extras(
        self, requests: list[tuple[ConversationKey, WMScope]]
    ) -> list[tuple[str | None, str | None, int]]:
        """(summary text, working-memory content, seq the summary covers through) per
        (conversation, working-memory scope). Answered from :class:`.extras.ExtrasCache` where it
        can (every write to a summary or working memory drops its user's answers there)."""
        found, generation = self._extras.lookup(requests)
        missing = [i for i, answer in enumerate(found) if answer is None]
        if missing:
            wanted = [requests[i] for i in missing]
            answers = conv.context_extras(self._db, wanted)
            self._extras.keep(generation, wanted, answers)
            for i, answer in zip(missing, answers):
                found[i] = answer
        return cast("list[Extras]", found)

    @route(split("keys", key_user, in_order))
    def load_conversations(self, keys: list[ConversationKey], window: int) -> list[ConversationSnapshot]:
        """Snapshots of many conversations at once, in the order of ``keys``."""
        return conv.load_conversations(self._db, keys, window)

    @route(by_key)
    def get_messages(self, key: ConversationKey, where: MessageFilter = ALL_MESSAGES) -> list[MessageRow]:
        """The conversation's messages that ``where`` keeps, by seq (see
        :class:`~memray.models.filter.MessageFilter`): ``limit`` = the most recent N matching,
        oldest first; ``metadata`` compares JSON values (bools are not numbers; objects ignore
        key order)."""
        return messages.get_messages(self._db, key, where)

    @route(by_user)
    def fetch_messages(self, app: str, user_id: str, refs: list[tuple[str, str]]) -> list[MessageRow]:
        """Messages by (conversation_id, id), in the order of ``refs``; missing ones skipped."""
        return messages.fetch_messages(self._db, app, user_id, refs)

    # -- conversations --------------------------------------------------------------------
    @route(by_key)
    def create_conversation(self, key: ConversationKey, title: str | None, metadata: dict[str, Any]) -> dict[str, Any]:
        """Get-or-create (an existing conversation is returned unchanged). Durable on return."""
        return conv.create_conversation(self._db, key, title, metadata)

    @route(by_key)
    def get_conversation(self, key: ConversationKey) -> dict[str, Any] | None:
        return conv.get_conversation(self._db, key)

    @route(by_user)
    def list_conversations(
        self, app: str, user_id: str, order: ConversationOrder, limit: int, offset: int
    ) -> list[dict[str, Any]]:
        """The user's conversations in ``order`` (ties broken by conversation id), paged."""
        return conv.list_conversations(self._db, app, user_id, order, limit, offset)

    @route(by_user)
    def count_conversations(self, app: str, user_id: str) -> int:
        """How many conversations the user has (the total behind ``list_conversations``' pages)."""
        return conv.count_conversations(self._db, app, user_id)

    @route(by_key)
    def retitle(self, key: ConversationKey, expected: str | None, title: str) -> bool:
        """Set the title if it is still ``expected``; True if written. Durable on return."""
        return conv.retitle(self._db, key, expected, title)

    @route(by_key)
    def update_conversation(
        self, key: ConversationKey, title: str | None, metadata_patch: dict[str, Any] | None
    ) -> dict[str, Any]:
        """Set the title (if given), merge the patch into metadata. Durable on return."""
        return conv.update_conversation(self._db, key, title, metadata_patch)

    @route(by_key)
    def delete_conversation(self, key: ConversationKey) -> dict[str, int]:
        """Delete the conversation with its messages, vectors, conversation-scope working memory
        and summary (and its dead letters) in one transaction, then purge it from every Parquet export root this store
        wrote to. Returns counts per table plus ``export_rows``. Durable on return (the freed
        bytes stay in the file until the next rewrite; ``delete_user`` is the physical erasure)."""
        with self._extras.dropping(key.app, key.user_id):
            return removal.delete_conversation(self._db, key)

    @route(by_key)
    def delete_messages(self, key: ConversationKey, ids: list[str]) -> dict[str, int]:
        """Delete some messages of a conversation with their vectors in one transaction, then
        purge them from every Parquet export root. The conversation and its ``last_seq`` stay
        (seqs are never reused). Returns counts (``messages``, ``embeddings``, ``export_rows``).
        Durable on return."""
        return removal.delete_messages(self._db, key, ids)

    @route(by_key)
    def clear_messages(self, key: ConversationKey, through_seq: int) -> tuple[dict[str, int], list[str]]:
        """Delete the conversation's messages up to ``through_seq`` with their vectors and its
        summary (it summarised them) in one transaction, then purge them from every export root.
        The conversation, its working memory and its ``last_seq`` stay. Returns counts
        (``messages``, ``embeddings``, ``summaries``, ``export_rows``) and the ids deleted.
        Durable on return."""
        with self._extras.dropping(key.app, key.user_id):
            return removal.clear_messages(self._db, key, through_seq)

    @route(by_key)
    def count_messages(self, key: ConversationKey, ids: list[str] | None = None) -> dict[str, int]:
        """Rows left of the conversation's messages (only ``ids`` when given): ``messages`` and
        ``embeddings`` here, ``export_rows`` in every export root (a deletion check)."""
        return removal.count_messages(self._db, key, ids)

    # -- embeddings -----------------------------------------------------------------------
    @background
    @route(split("rows", ns_user, total))
    def put_embeddings(self, rows: list[EmbeddingRow]) -> int:
        """Upsert vectors of items that still exist; returns vectors written. Durable on return."""
        return items.put_embeddings(self._db, rows)

    @background
    @route(split("refs", ref_user, nothing))
    def mark_embedding_failed(self, refs: list[tuple[Namespace, str]], error: str) -> None:
        """Record the failure; the items stay in :meth:`pending_embeddings`. Durable on return."""
        items.mark_embedding_failed(self._db, refs, error)

    @background
    @route(each(by_ref, cut="limit"))
    def pending_embeddings(
        self, model_id: str, limit: int, after: tuple[Namespace, str] | None = None
    ) -> list[tuple[Namespace, str, str]]:
        """Items with non-empty text and no vector of ``model_id`` (new, updated, failed), in
        (namespace, doc_id) order, past ``after`` (a page's last item: the next page)."""
        return items.pending_embeddings(self._db, model_id, limit, after)

    @background
    @route(split("refs", ref_user, positions))
    def missing_embeddings(self, model_id: str, refs: list[tuple[Namespace, str]]) -> list[int]:
        """Positions in ``refs`` of items without a vector of ``model_id`` (the re-embedding job
        skips the others, so a rerun after a finished run embeds nothing)."""
        return items.missing_embeddings(self._db, model_id, refs)

    @background
    def scan_index_rows(
        self,
        shard: int,
        shards: int,
        model_id: str,
        after: tuple[Namespace, str] | None,
        limit: int,
        unembedded: bool = False,
    ) -> list[IndexRow]:
        return items.scan_index_rows(self._db, shard, shards, model_id, after, limit, unembedded)

    @background
    @route(each(digest))
    def index_digest(self, shard: int, shards: int, model_id: str) -> tuple[int, int]:
        """(count, checksum) of the shard's items with a stored vector of ``model_id``: what the
        shard must hold (see :func:`memray.index.keeper.level_shard`)."""
        return items.index_digest(self._db, shard, shards, model_id)

    # -- working memory and summaries -----------------------------------------------------
    @route(by_user)
    def get_working_memory(
        self, app: str, user_id: str, scope: WMScope, conversation_id: str | None
    ) -> tuple[str | None, int]:
        return conv.get_working_memory(self._db, app, user_id, scope, conversation_id)

    @route(by_user)
    def put_working_memory(
        self,
        app: str,
        user_id: str,
        scope: WMScope,
        conversation_id: str | None,
        content: str | None,
        expected_version: int,
    ) -> int:
        """Compare-and-set (``None`` clears); ConflictError on a stale version. Durable on return."""
        with self._extras.dropping(app, user_id):
            return conv.put_working_memory(self._db, app, user_id, scope, conversation_id, content, expected_version)

    @route(by_key)
    def get_summary(self, key: ConversationKey) -> SummaryState | None:
        return conv.get_summary(self._db, key)

    @route(by_key)
    def put_summary(self, key: ConversationKey, text: str, through_seq: int, expected_version: int) -> int:
        """Compare-and-set on version; ConflictError on a stale one. Durable on return."""
        with self._extras.dropping(key.app, key.user_id):
            return conv.put_summary(self._db, key, text, through_seq, expected_version)

    # -- long-term entries ----------------------------------------------------------------
    def put_entries(self, rows: list[EntryRow], replace_session: tuple[str, str, str] | None = None) -> list[str]:
        """Insert/replace entries; returns ids whose old version (and vectors) were removed.
        Durable on return."""
        return entries.put_entries(self._db, rows, replace_session)

    @route(by_user)
    def get_entries(self, app: str, user_id: str, ids: list[str]) -> list[EntryRow]:
        return entries.get_entries(self._db, app, user_id, ids)

    @route(by_user)
    def list_entries(
        self,
        app: str,
        user_id: str,
        project_id: str | None = None,
        session_id: str | None = None,
        all_projects: bool = False,
        limit: int | None = None,
    ) -> list[EntryRow]:
        """Newest first. Not ``all_projects``: ``project_id=None`` → global entries only,
        ``project_id=P`` → P's entries only. ``session_id`` narrows further."""
        return entries.list_entries(self._db, app, user_id, project_id, session_id, all_projects, limit)

    @route(by_user_or(each(sorted_union)))
    def entry_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """Distinct (user_id, project_id) holding entries in ``app`` (one user's if given)."""
        return entries.entry_projects(self._db, app, user_id)

    @route(by_user)
    def delete_entries(self, app: str, user_id: str, ids: list[str]) -> int:
        """Delete entries and their vectors; returns entries deleted. Durable on return."""
        return entries.delete_entries(self._db, app, user_id, ids)

    # -- the server's API keys (kept by the first partition) -----------------------------
    @route(first)
    def put_api_key(self, record: KeyRecord) -> None:
        """Store a new key's record (its digest, never the key). Durable on return."""
        keys.put_key(self._db, KeyRecord(*record))

    @route(first)
    def api_keys(self, app: str | None = None) -> list[KeyRecord]:
        """Every key record (of ``app`` when given), revoked ones included, oldest first."""
        return keys.list_keys(self._db, app)

    @route(first)
    def revoke_api_key(self, key_id: str, at: float) -> bool:
        """Mark the key revoked at ``at``; False if no live key has that id. Durable on return."""
        return keys.revoke_key(self._db, key_id, at)

    @route(first)
    def delete_user_api_keys(self, app: str, user_id: str) -> int:
        """Delete every key bound to the user (their erasure), the file rewritten so none of their
        bytes stays; how many. Durable on return."""
        return keys.delete_user_keys(self._db, app, user_id)

    @route(first)
    def count_user_api_keys(self, app: str, user_id: str) -> int:
        """Keys bound to the user still stored (what ``verify_deleted`` checks)."""
        return keys.count_user_keys(self._db, app, user_id)

    # -- forks ----------------------------------------------------------------------------
    def fork_to(self, dst: str) -> dict[str, int]:
        """Copy the database, as of this call, to the new file ``dst`` (no export roots): see
        :mod:`.fork`. Durable on return."""
        return fork_database(self._db, dst)

    def version(self) -> int:
        """The last committed write transaction's number (``changed_version`` of its rows)."""
        return self._db.version

    def changed_refs(self, version: int) -> list[tuple[Namespace, str]]:
        """(namespace, doc_id) of the items written after transaction ``version``."""
        return refs.changed_refs(self._db, version)

    @background
    @route(each(flat))
    def index_refs(self, shard: int, shards: int, model_id: str) -> list[tuple[Namespace, str, bool]]:
        """Every item of the shard's users that it indexes, with whether it has a vector."""
        return refs.index_refs(self._db, shard, shards, model_id)

    @background
    @route(split("wanted", ref_user, concat))
    def fetch_index_rows(self, wanted: list[tuple[Namespace, str]], model_id: str) -> list[IndexRow]:
        """The index rows of these items (missing ones skipped)."""
        return refs.fetch_index_rows(self._db, wanted, model_id)

    # -- erasure and exports --------------------------------------------------------------
    @route(by_user)
    def delete_user(self, app: str, user_id: str) -> dict[str, int]:
        """Delete every row of the user in one transaction, purge them from every export root this
        store wrote to (``export_rows``), then rewrite the database file so no freed block keeps
        their bytes and no WAL remains. Returns counts per table.

        Durability: the delete is committed first, with a mark that a rewrite is owed; if the
        process dies before the rewrite finishes, :meth:`open` redoes it. Cost: the rewrite
        copies the whole database (seconds per GB); batch erasures where that matters."""
        with self._extras.dropping(app, user_id):
            return removal.delete_user(self._db, app, user_id)

    @route(by_user)
    def count_user(self, app: str, user_id: str) -> dict[str, int]:
        """Rows of the user left in each table (all zero after :meth:`delete_user`)."""
        return removal.count_user(self._db, app, user_id)

    @background
    def table_counts(self, hosts: int) -> tuple[dict[str, int], list[int]]:
        """Rows per table and conversations per host of ``hosts`` (:mod:`memray.store.census`)."""
        return census.table_counts(self._db.con, hosts)

    @background
    def export_parquet(self, root: str) -> dict[str, Any]:
        """Incremental hive-partitioned Parquet export; see :mod:`memray.store.export`."""
        return export.export_parquet(self._db, root)

    @route(each(sorted_union))
    def export_roots(self) -> list[str]:
        """Every Parquet export root this store has written to (absolute paths)."""
        return export.export_roots(self._db)

    @background
    def purge_exports(self, root: str, app: str, user_id: str) -> int:
        """Rewrite the user's export partitions under ``root`` without them; returns rows removed."""
        return export.purge_exports(self._db, root, app, user_id)
