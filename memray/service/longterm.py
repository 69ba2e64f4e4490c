"""`MemoryService`: long-term memory entries per ``(app, user_id)``, optionally per project.

A plain async class that runs in the caller's process (like :mod:`memray.conversation.recall`):
it holds the store's :class:`~memray.store.partitions.StorePartitions`, a :class:`~memray.index.router.ShardRouter`
and the caller's embedder, and owns one :class:`~memray.embedding.pipeline.EmbeddingPipeline`.

Scopes
------
Entries live in the namespace ``entry_namespace(app, user_id, project_id)``; a global entry has
project ``""``. Nothing crosses an ``(app, user_id)`` boundary.

==================================  ======================================================
search ``project_id=None``          the user's global entries only
search ``project_id=P``             global entries plus P's (never another project's)
``delete(query)``                   global entries matching the query; projects untouched
``delete(query, project_id=P)``     P's entries matching the query; global untouched
``delete(ids=...)``                 these entries, in whatever scope (only P's with P)
``delete(session_id=...)``          every entry of the session, in whatever scope (only P's)
``delete(everything=True, ...)``    every entry of P; without a project, every entry of the
                                    user (the entries part of an erasure:
                                    :meth:`memray.Memory.delete_user` erases everything else
                                    too: conversations, exports, caches...)
==================================  ======================================================

Writes: write first, then embed. :meth:`MemoryService.add` commits the entries to the store
(durable when it returns), then queues them on the pipeline and waits (up to
``index_timeout_s``) until they are indexed, so a search right after an add finds them. If the
embedder fails the add still succeeds: the entries are indexed lexically at once and embedded by
the pipeline's retries (or the backfill). ``replace_session=True`` replaces what the session
stored before.

One add and one delete: users reach them through the facade's
:class:`~memray.facade.service.MemoryServiceHandle`, which offers them as ``add_entry`` /
``add_entries`` and ``delete_entries``, with project scope through ``for_project``.

"Entries matching a query" (``delete(query)``): see :mod:`memray.service.entries`.

Search: ``score`` and ``min_score`` mean exactly what :mod:`memray.index.scorer` says (in [0, 1],
0 = not relevant; by default only relevant entries come back, so a query about something the
user never stored returns nothing). Results are ranked by score, then recency (the entry's
timestamp, later first), then id: deterministic. A query with no tokens returns no results in
every mode (nearest neighbours of nothing would be arbitrary). Any text is a safe query: there is
no query syntax.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable, Sequence

from memray.arguments import check_query
from memray.embedding.base import Embedder
from memray.embedding.pipeline import EmbeddingPipeline, PendingItem
from memray.embedding.query import QueryEncoder
from memray.errors import ValidationError
from memray.ids import entry_namespace, validate_id, validate_optional_id, validate_project_id
from memray.index.columns import columns_of
from memray.index.router import ShardRouter
from memray.models import RetrievalMode
from memray.service.entries import EntryInput, coerce_entries, entry_matches, entry_payload
from memray.service.reader import DEFAULT_LIMIT, EntryReader
from memray.store.partitions import StorePartitions
from memray.store.rows import EntryRow, entry_to_row
from memray.text import tokenize

__all__ = ["MemoryService", "DEFAULT_LIMIT"]

log = logging.getLogger(__name__)


class MemoryService(EntryReader):
    """The long-term memory service (see the module docstring): the reads of
    :class:`~memray.service.reader.EntryReader` and the writes. All methods are coroutines."""

    def __init__(
        self,
        store: StorePartitions,
        router: ShardRouter,
        encoder: QueryEncoder,
        default_mode: RetrievalMode = "hybrid",
        batch_size: int = 256,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        index_timeout_s: float = 60.0,
    ) -> None:
        super().__init__(store, router, encoder, default_mode)
        self._index_timeout_s = index_timeout_s
        self._pipeline = EmbeddingPipeline(encoder.embedder, store, router, batch_size, backoff_s, backoff_max_s)
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()

    def set_embedder(self, embedder: Embedder | None) -> None:
        """Embed entries with ``embedder`` from now on (after a re-embedding cutover; queries
        follow the shared :class:`~memray.embedding.query.QueryEncoder`)."""
        self._pipeline.set_embedder(embedder)

    @property
    def pipeline(self) -> EmbeddingPipeline:
        return self._pipeline

    def user_lock(self, app: str, user_id: str) -> asyncio.Lock:
        """Writes of one user run one at a time in this process (an add and a delete of the same
        user do not interleave between their store and index steps)."""
        lock = self._locks.get((app, user_id))
        if lock is None:
            lock = asyncio.Lock()
            self._locks[(app, user_id)] = lock
        return lock

    # -- writes -----------------------------------------------------------------------------
    async def add(
        self,
        app: str,
        user_id: str,
        entries: Iterable[EntryInput],
        *,
        project_id: str | None = None,
        session_id: str | None = None,
        replace_session: bool = False,
    ) -> list[str]:
        """Store entries, globally or in ``project_id``, each replacing a stored entry with the
        same id; returns their ids (in order, each once). ``session_id`` tags them with a session
        (``delete(session_id=...)`` removes them); with ``replace_session=True`` they replace
        everything that session stored before, in any scope (no entries then just removes it)."""
        validate_id("app", app)  # (no entries to store is no reason to take bad ids)
        validate_id("user_id", user_id)
        validate_optional_id("session_id", session_id)
        project = None if project_id is None else validate_project_id(project_id)
        if replace_session and session_id is None:
            raise ValidationError(
                "session_id", None, "is needed with replace_session=True", "pass the session whose entries to replace"
            )
        parsed = coerce_entries(entries)
        if not parsed and not replace_session:
            return []
        rows = [entry_to_row(app, user_id, e, session_id, project) for e in parsed]
        ids = [e.id for e in parsed]
        async with self.user_lock(app, user_id):
            before = await self._scopes_before(app, user_id, ids, session_id if replace_session else None)
            replaced = (app, user_id, session_id) if replace_session and session_id is not None else None
            removed = await self._store.put_entries(rows, replaced)
            if removed:  # old versions: their vectors are gone from the store; take them out of the shards
                await self._pipeline.wait_idle(self._index_timeout_s)
                refs = [(entry_namespace(app, user_id, before.get(i, project)), i) for i in removed]
                self._pipeline.forget_items(refs)
                await self._router.delete(refs)
            ns = entry_namespace(app, user_id, project)
            self._pipeline.submit(
                [
                    PendingItem(
                        ns,
                        e.id,
                        e.text,
                        e.timestamp,
                        entry_payload(e, session_id, project),
                        columns_of(e.timestamp, e.sim_time, e.importance),
                    )
                    for e in parsed
                    if e.text
                ]
            )
            await self._pipeline.wait_idle(self._index_timeout_s)
        return list(dict.fromkeys(ids))

    async def _scopes_before(
        self, app: str, user_id: str, ids: list[str], session_id: str | None
    ) -> dict[str, str | None]:
        """Project of each entry a write may replace (same id, or same session), read first so
        the replaced versions can be removed from the right namespace."""
        calls = [self._store.get_entries(app, user_id, ids)]
        if session_id is not None:
            calls.append(self._store.list_entries(app, user_id, None, session_id, True, None))
        found: list[list[EntryRow]] = list(await asyncio.gather(*calls))
        return {r.id: r.project_id for rows in found for r in rows}

    # -- deletes ----------------------------------------------------------------------------
    async def delete(
        self,
        app: str,
        user_id: str,
        query: str | None = None,
        *,
        ids: Sequence[str] | None = None,
        session_id: str | None = None,
        everything: bool = False,
        project_id: str | None = None,
    ) -> dict[str, int]:
        """Delete entries, with their vectors, named by exactly one of: ``query`` (the scope's
        entries containing every word of it: :mod:`memray.service.entries`), ``ids`` (these
        entries; unknown ids are ignored), ``session_id`` (every entry the session stored) or
        ``everything=True``. The scope is ``project_id``'s, or without one: the global entries
        for ``query``, every scope for the others (the module docstring's table). Returns
        ``{"entries": n, "vectors": m}``."""
        given = [name for name, v in (("query", query), ("ids", ids), ("session_id", session_id)) if v is not None]
        if everything:
            given.append("everything")
        if len(given) != 1:
            raise ValidationError(
                given[1] if given else "query",
                None,
                "name what to delete with exactly one of query, ids=, session_id= or everything=True"
                + (f" (got {' and '.join(given)})" if given else ""),
                "e.g. svc.delete_entries(app, user_id, 'coffee') or svc.delete_entries(app, user_id, ids=[...])",
            )
        validate_id("app", app)
        validate_id("user_id", user_id)
        project = None if project_id is None else validate_project_id(project_id)
        if query is not None:
            return await self._delete_matching(app, user_id, project, query)
        if ids is not None:
            wanted = [validate_id("entry.id", i) for i in ids]
            async with self.user_lock(app, user_id):
                rows = await self._store.get_entries(app, user_id, wanted) if wanted else []
                return await self._delete_rows(app, user_id, _in_project(rows, project))
        if session_id is not None:
            validate_id("session_id", session_id)
            async with self.user_lock(app, user_id):
                rows = await self._store.list_entries(app, user_id, None, session_id, True, None)
                return await self._delete_rows(app, user_id, _in_project(rows, project))
        async with self.user_lock(app, user_id):
            if project is None:  # every scope: no queued work of the user may index anything again
                await self.evict_user(app, user_id)
            rows = await self._store.list_entries(app, user_id, project, None, project is None, None)
            counts = await self._delete_rows(app, user_id, rows)
            counts["vectors"] += await self._router.drop(app, user_id, "entry", project)
            return counts

    async def _delete_matching(self, app: str, user_id: str, project_id: str | None, query: str) -> dict[str, int]:
        wanted = set(tokenize(check_query(query)))
        if not wanted:
            raise ValidationError(
                "query",
                query,
                "has no words to match, so it would match nothing or everything",
                "to delete a whole project use svc.for_project(P).delete_entries(app, user_id, everything=True); "
                "to erase a user, mem.delete_user(...)",
            )
        async with self.user_lock(app, user_id):
            rows: list[EntryRow] = await self._store.list_entries(app, user_id, project_id, None, False, None)
            return await self._delete_rows(app, user_id, [r for r in rows if entry_matches(wanted, r.text)])

    async def _delete_rows(self, app: str, user_id: str, rows: list[EntryRow]) -> dict[str, int]:
        """Store rows first (the truth), then the shards' items. Queued work for them is dropped
        and an in-flight batch allowed to land first, so nothing re-indexes them afterwards."""
        if not rows:
            return {"entries": 0, "vectors": 0}
        refs = [(entry_namespace(app, user_id, r.project_id), r.id) for r in rows]
        self._pipeline.forget_items(refs)
        await self._pipeline.wait_idle(self._index_timeout_s)
        entries: int = await self._store.delete_entries(app, user_id, [r.id for r in rows])
        vectors = await self._router.delete(refs)
        return {"entries": entries, "vectors": vectors}

    # -- erasure support and lifecycle ------------------------------------------------------
    async def evict_user(self, app: str, user_id: str) -> int:
        """Drop the user's queued embedding work and let an in-flight batch land (the first step
        of an erasure). Returns the items dropped."""
        dropped = self._pipeline.forget(lambda ns: ns.app == app and ns.user_id == user_id)
        await self._pipeline.wait_idle(self._index_timeout_s)
        return dropped

    def count_user(self, app: str, user_id: str) -> int:
        """The user's items queued here for embedding (0 after :meth:`evict_user`)."""
        return self._pipeline.count(lambda ns: ns.app == app and ns.user_id == user_id)

    async def wait_indexed(self, timeout_s: float | None = None) -> bool:
        """Wait until nothing is queued for embedding (failed items awaiting a retry aside)."""
        return await self._pipeline.wait_idle(timeout_s)

    async def close(self) -> None:
        """Let queued work finish (bounded), then stop. Entries still unembedded are durable and
        picked up by the next start's sweep or the backfill job."""
        await self._pipeline.wait_idle(self._index_timeout_s)
        await self._pipeline.close()


def _in_project(rows: list[EntryRow], project_id: str | None) -> list[EntryRow]:
    """``rows`` of ``project_id`` (None: all of them)."""
    return rows if project_id is None else [r for r in rows if r.project_id == project_id]
