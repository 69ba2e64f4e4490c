"""`MemoryServiceHandle`: the long-term service as the facade offers it (``mem.memory_service``).

Each method of :class:`~memray.service.longterm.MemoryService` in a sync form and an
``a``-prefixed asyncio twin, run on the memory's event loop like the conversation handles.
``delete_user`` here is the full erasure of :meth:`memray.Memory.delete_user` (conversations,
entries, vectors, exports, caches), with its receipt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memray.models import (
    DeletionProof,
    DeletionReceipt,
    MemoryResult,
    RetrievalMode,
    SearchMemoryResponse,
    SearchRequest,
)
from memray.ranking import Scoring
from memray.service.entries import EntryInput
from memray.service.longterm import MemoryService
from memray.sim_time import SimTime, window

if TYPE_CHECKING:
    from memray.facade.memory import Memory
    from memray.facade.project import ProjectView

__all__ = ["MemoryServiceHandle"]


class MemoryServiceHandle:
    """Sync + async access to the memory's :class:`MemoryService` (see its docs for semantics)."""

    def __init__(self, memory: Memory) -> None:
        self._mem = memory

    @property
    def _core(self) -> MemoryService:
        return self._mem._service_core

    def for_project(self, project_id: str) -> ProjectView:
        """This service bound to project ``project_id``: ``add_session``, ``add_entry``, ``search``
        and ``delete_entries`` act on it (:class:`~memray.facade.project.ProjectView`)."""
        from memray.facade.project import ProjectView

        return ProjectView(self, project_id)

    # -- writes -----------------------------------------------------------------------------
    def add_session(self, app: str, user_id: str, session_id: str, entries: Iterable[EntryInput]) -> list[str]:
        """Store a session's entries (global); re-adding the session replaces them."""
        return self._mem._run(self._core.add_session(app, user_id, session_id, list(entries)))

    async def aadd_session(self, app: str, user_id: str, session_id: str, entries: Iterable[EntryInput]) -> list[str]:
        return await self._mem._arun(self._core.add_session(app, user_id, session_id, list(entries)))

    def add_session_to_project(
        self, app: str, user_id: str, session_id: str, project_id: str, entries: Iterable[EntryInput]
    ) -> list[str]:
        return self._mem._run(self._core.add_session_to_project(app, user_id, session_id, project_id, list(entries)))

    async def aadd_session_to_project(
        self, app: str, user_id: str, session_id: str, project_id: str, entries: Iterable[EntryInput]
    ) -> list[str]:
        return await self._mem._arun(
            self._core.add_session_to_project(app, user_id, session_id, project_id, list(entries))
        )

    def add_entry(self, app: str, user_id: str, entry: EntryInput) -> str:
        return self._mem._run(self._core.add_entry(app, user_id, entry))

    async def aadd_entry(self, app: str, user_id: str, entry: EntryInput) -> str:
        return await self._mem._arun(self._core.add_entry(app, user_id, entry))

    def add_entry_to_project(self, app: str, user_id: str, project_id: str, entry: EntryInput) -> str:
        return self._mem._run(self._core.add_entry_to_project(app, user_id, project_id, entry))

    async def aadd_entry_to_project(self, app: str, user_id: str, project_id: str, entry: EntryInput) -> str:
        return await self._mem._arun(self._core.add_entry_to_project(app, user_id, project_id, entry))

    def add_entries(
        self,
        app: str,
        user_id: str,
        entries: Iterable[EntryInput],
        project_id: str | None = None,
        session_id: str | None = None,
    ) -> list[str]:
        """Store several entries (global, or in ``project_id``); same ids replace; returns ids."""
        return self._mem._run(self._core.add_entries(app, user_id, list(entries), project_id, session_id))

    async def aadd_entries(
        self,
        app: str,
        user_id: str,
        entries: Iterable[EntryInput],
        project_id: str | None = None,
        session_id: str | None = None,
    ) -> list[str]:
        return await self._mem._arun(self._core.add_entries(app, user_id, list(entries), project_id, session_id))

    # -- reads ------------------------------------------------------------------------------
    def search(self, request: SearchRequest | dict[str, Any]) -> SearchMemoryResponse:
        """``project_id=None``: global entries only; ``P``: global plus P's. ``limit`` None → 10."""
        return self._mem._run(self._core.search(request))

    async def asearch(self, request: SearchRequest | dict[str, Any]) -> SearchMemoryResponse:
        return await self._mem._arun(self._core.search(request))

    def list_recent(
        self, app: str, user_id: str, limit: int | None = None, project_id: str | None = None
    ) -> list[MemoryResult]:
        return self._mem._run(self._core.list_recent(app, user_id, limit, project_id))

    async def alist_recent(
        self, app: str, user_id: str, limit: int | None = None, project_id: str | None = None
    ) -> list[MemoryResult]:
        return await self._mem._arun(self._core.list_recent(app, user_id, limit, project_id))

    def search_projects(
        self,
        app: str,
        user_id: str,
        query: str,
        project_ids: Sequence[str | None],
        limit: int | None = None,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        *,
        scoring: Scoring | None = None,
        after: SimTime | None = None,
        before: SimTime | None = None,
        created_after: SimTime | None = None,
        created_before: SimTime | None = None,
    ) -> SearchMemoryResponse:
        """Search exactly the listed scopes (``None``: global entries) of one user; ``scoring`` and
        the time bounds as in ``SearchRequest``."""
        bounds = window(after, before, created_after, created_before)
        return self._mem._run(
            self._core.search_projects(app, user_id, query, project_ids, limit, min_score, mode, scoring, bounds)
        )

    async def asearch_projects(
        self,
        app: str,
        user_id: str,
        query: str,
        project_ids: Sequence[str | None],
        limit: int | None = None,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        *,
        scoring: Scoring | None = None,
        after: SimTime | None = None,
        before: SimTime | None = None,
        created_after: SimTime | None = None,
        created_before: SimTime | None = None,
    ) -> SearchMemoryResponse:
        bounds = window(after, before, created_after, created_before)
        return await self._mem._arun(
            self._core.search_projects(app, user_id, query, project_ids, limit, min_score, mode, scoring, bounds)
        )

    def get_entries(self, app: str, user_id: str, ids: Sequence[str]) -> list[MemoryResult]:
        """Entries by id, in the order asked; ids not stored are skipped."""
        return self._mem._run(self._core.get_entries(app, user_id, ids))

    async def aget_entries(self, app: str, user_id: str, ids: Sequence[str]) -> list[MemoryResult]:
        return await self._mem._arun(self._core.get_entries(app, user_id, ids))

    def list_entries(
        self, app: str, user_id: str, project_id: str | None = None, limit: int | None = None
    ) -> list[MemoryResult]:
        """Every entry of exactly one scope (global, or P's alone), newest first."""
        return self._mem._run(self._core.list_entries(app, user_id, project_id, limit))

    async def alist_entries(
        self, app: str, user_id: str, project_id: str | None = None, limit: int | None = None
    ) -> list[MemoryResult]:
        return await self._mem._arun(self._core.list_entries(app, user_id, project_id, limit))

    def list_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """(user_id, project_id) of every project holding entries in ``app`` (or of one user)."""
        return self._mem._run(self._core.list_projects(app, user_id))

    async def alist_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        return await self._mem._arun(self._core.list_projects(app, user_id))

    # -- deletes ----------------------------------------------------------------------------
    def delete_entries_by_id(self, app: str, user_id: str, ids: Sequence[str]) -> dict[str, int]:
        """Delete these entries, whatever their scope; unknown ids are ignored."""
        return self._mem._run(self._core.delete_entries_by_id(app, user_id, ids))

    async def adelete_entries_by_id(self, app: str, user_id: str, ids: Sequence[str]) -> dict[str, int]:
        return await self._mem._arun(self._core.delete_entries_by_id(app, user_id, ids))

    def delete_entries(self, app: str, user_id: str, query: str) -> dict[str, int]:
        """Global entries containing every word of ``query``; projects untouched."""
        return self._mem._run(self._core.delete_entries(app, user_id, query))

    async def adelete_entries(self, app: str, user_id: str, query: str) -> dict[str, int]:
        return await self._mem._arun(self._core.delete_entries(app, user_id, query))

    def delete_entries_in_project(self, app: str, user_id: str, project_id: str, query: str) -> dict[str, int]:
        return self._mem._run(self._core.delete_entries_in_project(app, user_id, project_id, query))

    async def adelete_entries_in_project(self, app: str, user_id: str, project_id: str, query: str) -> dict[str, int]:
        return await self._mem._arun(self._core.delete_entries_in_project(app, user_id, project_id, query))

    def delete_project(self, app: str, user_id: str, project_id: str) -> dict[str, int]:
        return self._mem._run(self._core.delete_project(app, user_id, project_id))

    async def adelete_project(self, app: str, user_id: str, project_id: str) -> dict[str, int]:
        return await self._mem._arun(self._core.delete_project(app, user_id, project_id))

    def delete_session(self, app: str, user_id: str, session_id: str) -> dict[str, int]:
        return self._mem._run(self._core.delete_session(app, user_id, session_id))

    async def adelete_session(self, app: str, user_id: str, session_id: str) -> dict[str, int]:
        return await self._mem._arun(self._core.delete_session(app, user_id, session_id))

    def delete_user(self, *, user_id: str, app: str = "default") -> DeletionReceipt:
        """Erase the user everywhere (the same as ``mem.delete_user``, keyword-only as there);
        returns the receipt."""
        return self._mem.delete_user(app=app, user_id=user_id)

    async def adelete_user(self, *, user_id: str, app: str = "default") -> DeletionReceipt:
        return await self._mem.adelete_user(app=app, user_id=user_id)

    def verify_deleted(self, *, user_id: str, app: str = "default") -> DeletionProof:
        """Scan every store for the user (the same as ``mem.verify_deleted``)."""
        return self._mem.verify_deleted(app=app, user_id=user_id)

    async def averify_deleted(self, *, user_id: str, app: str = "default") -> DeletionProof:
        return await self._mem.averify_deleted(app=app, user_id=user_id)

    def wait_indexed(self, timeout_s: float | None = 60.0) -> bool:
        """Wait until every added entry is indexed (failed embeddings awaiting a retry aside)."""
        return self._mem._run(self._core.wait_indexed(timeout_s))

    async def await_indexed(self, timeout_s: float | None = 60.0) -> bool:
        return await self._mem._arun(self._core.wait_indexed(timeout_s))
