"""`StorePartitions`: the typed clients of every history partition, routing each call.

A user's rows all live on one partition, :func:`~memray.store.layout.partition_of` ``(app,
user_id, n)`` (the vector shards' hash). A core that serves many users holds a
``StorePartitions`` instead of one :class:`~memray.store.client.StoreClient`, and calls it as it
would the store:

- a call about one user or conversation goes to that user's partition (:meth:`of`);
- a batch (commits, vectors, lookups) is split by partition, sent to each partition at once, and
  its answers put back in the order of the request;
- an app-wide call (dead letters, pending embeddings, exports, shard recovery digests) fans out
  to every partition and merges.

With one partition every call goes straight to its client. :attr:`clients` lists the partitions'
clients in partition order, for a job that writes with one writer per partition
(``partitions.clients[partition_of(app, user_id, len(partitions))]``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from memray.ids import ConversationKey, Namespace
from memray.models import ConversationOrder
from memray.sim_time import Window
from memray.store.base import ConversationSnapshot, IndexRow, SummaryState, WMScope
from memray.store.client import StoreClient
from memray.store.deadletter import CommitResult, DeadLetter
from memray.store.layout import export_root, partition_of, store_file
from memray.store.messages import Correction
from memray.store.rows import EmbeddingRow, EntryRow, MessageRow

__all__ = ["StorePartitions"]

T = TypeVar("T")
R = TypeVar("R")


class StorePartitions:
    """The clients of ``n`` history partitions (see the module docstring)."""

    def __init__(self, clients: Sequence[StoreClient]) -> None:
        if not clients:
            raise ValueError("StorePartitions needs at least one store client")
        self.clients = list(clients)

    def __len__(self) -> int:
        return len(self.clients)

    def __repr__(self) -> str:
        return f"StorePartitions({[c.label for c in self.clients]!r})"

    @property
    def label(self) -> str:
        return self.clients[0].label if len(self.clients) == 1 else f"{len(self.clients)} history stores"

    def partition(self, app: str, user_id: str) -> int:
        return partition_of(app, user_id, len(self.clients))

    def of(self, app: str, user_id: str) -> StoreClient:
        """The client of the user's partition."""
        return self.clients[partition_of(app, user_id, len(self.clients))]

    def of_key(self, key: ConversationKey) -> StoreClient:
        return self.of(key.app, key.user_id)

    async def _split(
        self,
        items: Sequence[T],
        user: Callable[[T], tuple[str, str]],
        call: Callable[[StoreClient, list[T]], Awaitable[R]],
    ) -> list[tuple[list[int], R]]:
        """``call`` once per partition holding some of ``items`` (with those items, in order), at
        once; each answer with the positions in ``items`` of what it was asked about."""
        if len(self.clients) == 1:
            return [(list(range(len(items))), await call(self.clients[0], list(items)))] if items else []
        groups: dict[int, list[int]] = {}
        for i, item in enumerate(items):
            groups.setdefault(self.partition(*user(item)), []).append(i)
        answers = await asyncio.gather(
            *(call(self.clients[p], [items[i] for i in where]) for p, where in groups.items())
        )
        return list(zip(groups.values(), answers))

    async def _in_order(
        self,
        items: Sequence[T],
        user: Callable[[T], tuple[str, str]],
        call: Callable[[StoreClient, list[T]], Awaitable[list[R]]],
    ) -> list[R]:
        """A call that answers one value per item, answered in the order of ``items``."""
        out: list[Any] = [None] * len(items)
        for where, answer in await self._split(items, user, call):
            for i, value in zip(where, answer):
                out[i] = value
        return out

    async def _all(self, call: Callable[[StoreClient], Awaitable[R]]) -> list[R]:
        return list(await asyncio.gather(*(call(c) for c in self.clients)))

    # -- lifecycle -----------------------------------------------------------------------
    async def open(self, owner: dict[str, Any] | None = None) -> None:
        await self._all(lambda c: c.open(owner))

    async def close(self) -> None:
        await self._all(lambda c: c.close())

    async def ping(self) -> bool:
        return all(await self._all(lambda c: c.ping()))

    # -- messages ------------------------------------------------------------------------
    async def commit_messages(self, rows: list[MessageRow]) -> CommitResult:
        corrections: list[Correction] = []
        rejected: list[DeadLetter] = []
        positions: list[int] = []
        for where, result in await self._split(rows, _row_user, lambda c, part: c.commit_messages(part)):
            result = CommitResult(*result)
            corrections += result.corrections
            rejected += result.rejected
            positions += [where[p] for p in result.positions]
        return CommitResult(corrections, rejected, positions)

    async def append_messages(self, rows: list[MessageRow]) -> list[Correction]:
        done = await self._split(rows, _row_user, lambda c, part: c.append_messages(part))
        return [x for _, corrections in done for x in corrections]

    async def write_stats(self) -> list[dict[str, float]]:
        """Each partition's :meth:`~memray.store.history.HistoryStore.write_stats`, in order."""
        return await self._all(lambda c: c.write_stats())

    async def record_dead_letters(self, letters: list[DeadLetter]) -> int:
        return sum(n for _, n in await self._split(letters, _row_user, lambda c, part: c.record_dead_letters(part)))

    async def dead_letters(
        self, app: str | None = None, user_id: str | None = None, limit: int = 100
    ) -> list[DeadLetter]:
        """The user's dead letters from their partition; app-wide, each partition's newest
        ``limit``, partition by partition, cut to ``limit``."""
        if app is not None and user_id is not None:
            return await self.of(app, user_id).dead_letters(app, user_id, limit)
        found = await self._all(lambda c: c.dead_letters(app, user_id, limit))
        return [letter for part in found for letter in part][:limit]

    async def resolve_acknowledged(
        self, acked: list[tuple[ConversationKey, str, int]], reason: str
    ) -> list[DeadLetter]:
        done = await self._split(acked, lambda a: _key_user(a[0]), lambda c, part: c.resolve_acknowledged(part, reason))
        return [x for _, letters in done for x in letters]

    async def stored_seqs(self, requests: list[tuple[ConversationKey, list[str]]]) -> list[dict[str, int]]:
        return await self._in_order(requests, lambda r: _key_user(r[0]), lambda c, part: c.stored_seqs(part))

    async def assigned_seqs(self, requests: list[tuple[ConversationKey, list[str]]]) -> list[dict[str, int]]:
        return await self._in_order(requests, lambda r: _key_user(r[0]), lambda c, part: c.assigned_seqs(part))

    async def count_dead_letters(self) -> dict[str, int]:
        return _sum_counts(await self._all(lambda c: c.count_dead_letters()))

    async def load_conversation(self, key: ConversationKey, window: int) -> ConversationSnapshot:
        return await self.of_key(key).load_conversation(key, window)

    async def context_extras(
        self, requests: list[tuple[ConversationKey, WMScope]]
    ) -> list[tuple[str | None, str | None, int]]:
        return await self._in_order(requests, lambda r: _key_user(r[0]), lambda c, part: c.context_extras(part))

    async def load_conversations(self, keys: list[ConversationKey], window: int) -> list[ConversationSnapshot]:
        return await self._in_order(keys, _key_user, lambda c, part: c.load_conversations(part, window))

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
        return await self.of_key(key).get_messages(
            key, limit, before_seq, after_seq, roles, metadata, window, agent_id, sub_agent_id
        )

    async def fetch_messages(self, app: str, user_id: str, refs: list[tuple[str, str]]) -> list[MessageRow]:
        return await self.of(app, user_id).fetch_messages(app, user_id, refs)

    # -- conversations -------------------------------------------------------------------
    async def create_conversation(
        self, key: ConversationKey, title: str | None, metadata: dict[str, Any]
    ) -> dict[str, Any]:
        return await self.of_key(key).create_conversation(key, title, metadata)

    async def get_conversation(self, key: ConversationKey) -> dict[str, Any] | None:
        return await self.of_key(key).get_conversation(key)

    async def list_conversations(
        self, app: str, user_id: str, order: ConversationOrder, limit: int, offset: int
    ) -> list[dict[str, Any]]:
        return await self.of(app, user_id).list_conversations(app, user_id, order, limit, offset)

    async def update_conversation(
        self, key: ConversationKey, title: str | None, metadata_patch: dict[str, Any] | None
    ) -> dict[str, Any]:
        return await self.of_key(key).update_conversation(key, title, metadata_patch)

    async def retitle(self, key: ConversationKey, expected: str | None, title: str) -> bool:
        return await self.of_key(key).retitle(key, expected, title)

    async def count_conversations(self, app: str, user_id: str) -> int:
        return await self.of(app, user_id).count_conversations(app, user_id)

    async def delete_conversation(self, key: ConversationKey) -> dict[str, int]:
        return await self.of_key(key).delete_conversation(key)

    async def delete_messages(self, key: ConversationKey, ids: list[str]) -> dict[str, int]:
        return await self.of_key(key).delete_messages(key, ids)

    async def clear_messages(self, key: ConversationKey, through_seq: int) -> tuple[dict[str, int], list[str]]:
        return await self.of_key(key).clear_messages(key, through_seq)

    async def count_messages(self, key: ConversationKey, ids: list[str] | None = None) -> dict[str, int]:
        return await self.of_key(key).count_messages(key, ids)

    # -- embeddings and shard recovery ----------------------------------------------------
    async def put_embeddings(self, rows: list[EmbeddingRow]) -> int:
        return sum(n for _, n in await self._split(rows, _ns_user, lambda c, part: c.put_embeddings(part)))

    async def mark_embedding_failed(self, refs: list[tuple[Namespace, str]], error: str) -> None:
        await self._split(refs, _ref_user, lambda c, part: c.mark_embedding_failed(part, error))

    async def pending_embeddings(self, model_id: str, limit: int) -> list[tuple[Namespace, str, str]]:
        """Up to ``limit`` items waiting for a vector, from every partition."""
        found = await self._all(lambda c: c.pending_embeddings(model_id, limit))
        return [item for part in found for item in part][:limit]

    async def missing_embeddings(self, model_id: str, refs: list[tuple[Namespace, str]]) -> list[int]:
        done = await self._split(refs, _ref_user, lambda c, part: c.missing_embeddings(model_id, part))
        return sorted(where[p] for where, positions in done for p in positions)

    async def index_pages(
        self, shard: int, shards: int, model_id: str, page_size: int, unembedded: bool = False
    ) -> AsyncIterator[list[IndexRow]]:
        """Every item of ``shard`` (``scan_index_rows``), page by page, partition by partition."""
        for client in self.clients:
            after: tuple[Namespace, str] | None = None
            while page := await client.scan_index_rows(shard, shards, model_id, after, page_size, unembedded):
                yield page
                after = (Namespace(*page[-1].namespace), page[-1].doc_id)

    async def index_digest(self, shard: int, shards: int, model_id: str) -> tuple[int, int]:
        """``(count, checksum)`` over every partition (checksums add modulo 2**64)."""
        found = await self._all(lambda c: c.index_digest(shard, shards, model_id))
        return sum(n for n, _ in found), sum(s for _, s in found) % (1 << 64)

    async def index_refs(self, shard: int, shards: int, model_id: str) -> list[tuple[Namespace, str, bool]]:
        found = await self._all(lambda c: c.index_refs(shard, shards, model_id))
        return [ref for part in found for ref in part]

    async def fetch_index_rows(self, wanted: list[tuple[Namespace, str]], model_id: str) -> list[IndexRow]:
        done = await self._split(wanted, _ref_user, lambda c, part: c.fetch_index_rows(part, model_id))
        return [row for _, rows in done for row in rows]

    # -- working memory and summaries ----------------------------------------------------
    async def get_working_memory(
        self, app: str, user_id: str, scope: WMScope, conversation_id: str | None
    ) -> tuple[str | None, int]:
        return await self.of(app, user_id).get_working_memory(app, user_id, scope, conversation_id)

    async def put_working_memory(
        self,
        app: str,
        user_id: str,
        scope: WMScope,
        conversation_id: str | None,
        content: str | None,
        expected_version: int,
    ) -> int:
        return await self.of(app, user_id).put_working_memory(
            app, user_id, scope, conversation_id, content, expected_version
        )

    async def get_summary(self, key: ConversationKey) -> SummaryState | None:
        return await self.of_key(key).get_summary(key)

    async def put_summary(self, key: ConversationKey, text: str, through_seq: int, expected_version: int) -> int:
        return await self.of_key(key).put_summary(key, text, through_seq, expected_version)

    # -- long-term entries ---------------------------------------------------------------
    async def put_entries(self, rows: list[EntryRow], replace_session: tuple[str, str, str] | None = None) -> list[str]:
        """One user's entries (a session's, or one entry): one partition, one transaction."""
        if replace_session is not None:
            app, user_id = replace_session[0], replace_session[1]
        elif rows:
            app, user_id = rows[0].app, rows[0].user_id
        else:
            return []
        if any(self.partition(r.app, r.user_id) != self.partition(app, user_id) for r in rows):
            raise ValueError("put_entries takes one user's entries (one partition, one transaction)")
        return await self.of(app, user_id).put_entries(rows, replace_session)

    async def get_entries(self, app: str, user_id: str, ids: list[str]) -> list[EntryRow]:
        return await self.of(app, user_id).get_entries(app, user_id, ids)

    async def list_entries(
        self,
        app: str,
        user_id: str,
        project_id: str | None = None,
        session_id: str | None = None,
        all_projects: bool = False,
        limit: int | None = None,
    ) -> list[EntryRow]:
        return await self.of(app, user_id).list_entries(app, user_id, project_id, session_id, all_projects, limit)

    async def entry_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        if user_id is not None:
            return await self.of(app, user_id).entry_projects(app, user_id)
        return sorted({p for part in await self._all(lambda c: c.entry_projects(app, None)) for p in part})

    async def delete_entries(self, app: str, user_id: str, ids: list[str]) -> int:
        return await self.of(app, user_id).delete_entries(app, user_id, ids)

    # -- forks -------------------------------------------------------------------------
    async def versions(self) -> list[int]:
        """Each partition's version (``changed_refs`` takes them back)."""
        return await self._all(lambda c: c.version())

    async def changed_refs(self, versions: list[int]) -> list[tuple[Namespace, str]]:
        found = await asyncio.gather(*(c.changed_refs(v) for c, v in zip(self.clients, versions)))
        return [ref for part in found for ref in part]

    async def fork_to(self, root: str) -> dict[str, int]:
        """Copy every partition into the data directory ``root`` (its files, same names)."""
        n = len(self.clients)
        found = await asyncio.gather(*(c.fork_to(store_file(root, i, n)) for i, c in enumerate(self.clients)))
        return {"bytes": sum(int(f["bytes"]) for f in found), "cloned": int(all(f["cloned"] for f in found))}

    # -- erasure and exports -------------------------------------------------------------
    async def delete_user(self, app: str, user_id: str) -> dict[str, int]:
        return await self.of(app, user_id).delete_user(app, user_id)

    async def count_user(self, app: str, user_id: str) -> dict[str, int]:
        return await self.of(app, user_id).count_user(app, user_id)

    async def export_parquet(self, root: str) -> dict[str, Any]:
        """Every partition exports to its own root under ``root``
        (:func:`~memray.store.layout.export_root`); the manifest adds theirs up, each one in
        ``stores``. Each partition counts its own versions, so ``watermark`` is the lowest: a job
        that re-reads rows changed after it re-reads some rows, never misses one."""
        n = len(self.clients)
        if n == 1:
            return await self.clients[0].export_parquet(root)
        found = await asyncio.gather(*(c.export_parquet(export_root(root, i, n)) for i, c in enumerate(self.clients)))
        merged: dict[str, Any] = {
            "root": export_root(root, 0, 1),
            "watermark": min(int(m["watermark"]) for m in found),
            "previous_watermark": min(int(m["previous_watermark"]) for m in found),
            "files": [f for m in found for f in m["files"]],
            "stores": found,
        }
        merged.update({k: sum(int(m[k]) for m in found) for k in ("rows", "rows_written", "partitions")})
        return merged

    async def export_roots(self) -> list[str]:
        return sorted({r for part in await self._all(lambda c: c.export_roots()) for r in part})

    async def purge_exports(self, root: str, app: str, user_id: str) -> int:
        p, n = self.partition(app, user_id), len(self.clients)
        return await self.clients[p].purge_exports(export_root(root, p, n), app, user_id)


def _row_user(row: MessageRow | DeadLetter) -> tuple[str, str]:
    return row.app, row.user_id


def _key_user(key: ConversationKey) -> tuple[str, str]:
    return key.app, key.user_id


def _ns_user(row: EmbeddingRow) -> tuple[str, str]:
    return row.namespace[0], row.namespace[1]


def _ref_user(ref: tuple[Namespace, str]) -> tuple[str, str]:
    return ref[0][0], ref[0][1]


def _sum_counts(parts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + int(v)
    return out
