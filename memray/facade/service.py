"""`MemoryServiceHandle`: the long-term service as the facade offers it (``mem.memory_service``),
and :class:`EntryScope`, what it shares with a project's view
(:class:`ProjectView`, ``svc.for_project("P")``).

One way to do each thing:

=====================================================  =======================================
``add_entry`` / ``add_entries``                        store one / several entries (same id
                                                       replaces); ``session_id=`` tags them,
                                                       ``replace_session=True`` replaces what
                                                       the session stored before
``delete_entries(query)``                              the scope's entries matching ``query``
``delete_entries(ids=[...])``                          these entries
``delete_entries(session_id=...)``                     every entry the session stored
``for_project(P).delete_entries(everything=True)``     every entry of project P
``search`` / ``list_recent`` / ``list_entries``        in the scope
``mem.delete_user`` / ``mem.verify_deleted``           erase a user everywhere / prove it
=====================================================  =======================================

The scope is the service's (global entries) or a project view's (project P; searches and
``list_recent`` see the global entries too, as the service's table in
:mod:`memray.service.longterm` says). ``ids=`` and ``session_id=`` name entries exactly: on the
service they reach entries of every scope, in a view only the project's.

The older names (``add_session``, ``*_to_project``, ``*_in_project``, ``delete_entries_by_id``,
``delete_project``, ``delete_session``, the service's ``delete_user`` / ``verify_deleted``, and a
``project_id`` argument where ``for_project`` is the way) still work and warn
(:mod:`memray.facade.deprecation`), naming their replacement. Every call is written once, as the
``a``-prefixed coroutine; its sync twin is derived by :func:`~memray.facade.runner.blocking`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memray.errors import ValidationError
from memray.facade.deprecation import deprecated, deprecated_argument
from memray.facade.runner import Internals, blocking
from memray.ids import validate_project_id
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
from memray.service.reader import _parse_request
from memray.sim_time import SimTime, window

__all__ = ["EntryScope", "MemoryServiceHandle", "ProjectView", "scope_of"]


class EntryScope:
    """Adds, deletes, searches and listings of long-term entries in one scope: the global
    entries (``project_id`` None) or one project's (see the module docstring)."""

    def __init__(self, runner: Internals, project_id: str | None) -> None:
        self._runner = runner
        self._project_id = project_id

    @property
    def _core(self) -> MemoryService:
        return self._runner.session.service

    def _project(self, project_id: str | None) -> str | None:
        """The project a call acts on: this scope's, or a (deprecated) ``project_id`` argument,
        which in a view must be the view's."""
        if project_id is None:
            return self._project_id
        if self._project_id is not None and project_id != self._project_id:
            raise ValidationError(
                "project_id",
                project_id,
                f"conflicts with this view's project {self._project_id!r}",
                "leave project_id unset, or call it through svc.for_project(...) of that project",
            )
        return project_id

    # -- writes -----------------------------------------------------------------------------
    async def aadd_entry(self, app: str, user_id: str, entry: EntryInput) -> str:
        """Store one entry in this scope (an entry with the same id is replaced). Returns its id."""
        [entry_id] = await self._runner.arun(self._core.add(app, user_id, [entry], project_id=self._project_id))
        return entry_id

    add_entry = blocking(aadd_entry)

    @deprecated_argument("project_id", "for_project(project_id).add_entries(...)")
    async def aadd_entries(
        self,
        app: str,
        user_id: str,
        entries: Iterable[EntryInput],
        project_id: str | None = None,
        session_id: str | None = None,
        *,
        replace_session: bool = False,
    ) -> list[str]:
        """Store several entries in this scope, each replacing a stored entry with the same id;
        returns their ids. ``session_id`` tags them with a session (``delete_entries(session_id=...)``
        removes them); with ``replace_session=True`` they replace everything that session stored
        before, in any scope (an empty list then just removes it). ``project_id`` is deprecated:
        use ``for_project(project_id).add_entries(...)``."""
        add = self._core.add(
            app,
            user_id,
            list(entries),
            project_id=self._project(project_id),
            session_id=session_id,
            replace_session=replace_session,
        )
        return await self._runner.arun(add)

    add_entries = blocking(aadd_entries)

    # -- deletes ----------------------------------------------------------------------------
    async def adelete_entries(
        self,
        app: str,
        user_id: str,
        query: str | None = None,
        *,
        ids: Sequence[str] | None = None,
        session_id: str | None = None,
        everything: bool = False,
    ) -> dict[str, int]:
        """Delete entries, with their vectors, named by exactly one of: ``query`` (this scope's
        entries containing every word of it: :mod:`memray.service.entries`), ``ids`` (these
        entries; unknown ids are ignored), ``session_id`` (every entry the session stored), or
        ``everything=True`` (every entry of a project: only in a ``for_project`` view; to erase
        a user use ``mem.delete_user``). On the service, ``ids`` and ``session_id`` reach entries
        of every scope; in a view, only the project's. Returns ``{"entries": n, "vectors": m}``."""
        if everything and self._project_id is None and (query, ids, session_id) == (None, None, None):
            raise ValidationError(
                "everything",
                True,
                "deletes a whole project and needs one",
                "use svc.for_project(P).delete_entries(app, user_id, everything=True); "
                "to erase a user everywhere use mem.delete_user(user_id=..., app=...)",
            )
        delete = self._core.delete(
            app, user_id, query, ids=ids, session_id=session_id, everything=everything, project_id=self._project_id
        )
        return await self._runner.arun(delete)

    delete_entries = blocking(adelete_entries)

    # deprecated
    @deprecated("add_entries(app, user_id, entries, session_id=session_id, replace_session=True)")
    async def aadd_session(self, app: str, user_id: str, session_id: str, entries: Iterable[EntryInput]) -> list[str]:
        return await self.aadd_entries(app, user_id, entries, session_id=session_id, replace_session=True)

    add_session = blocking(aadd_session)

    # -- reads ------------------------------------------------------------------------------
    async def asearch(self, request: SearchRequest | dict[str, Any]) -> SearchMemoryResponse:
        """Entries relevant to ``request.query``, ranked (:mod:`memray.service.longterm`):
        ``project_id=None``: the global entries only; ``P``: global plus P's (in a project view
        the view's project, which ``request.project_id`` must then be unset or equal to).
        ``limit`` None → 10."""
        if self._project_id is not None:
            req = request if isinstance(request, SearchRequest) else _parse_request(request)
            request = req.model_copy(update={"project_id": self._project(req.project_id)})
        return await self._runner.arun(self._core.search(request))

    search = blocking(asearch)

    @deprecated_argument("project_id", "for_project(project_id).list_recent(...)")
    async def alist_recent(
        self, app: str, user_id: str, limit: int | None = None, project_id: str | None = None
    ) -> list[MemoryResult]:
        """The newest entries in this scope's search scope (global; in a view global plus the
        project's), newest first; ``score`` is 0.0. ``project_id`` is deprecated: use
        ``for_project(project_id).list_recent(...)``."""
        project = self._project(project_id)
        return await self._runner.arun(self._core.list_recent(app, user_id, limit, project))

    list_recent = blocking(alist_recent)

    @deprecated_argument("project_id", "for_project(project_id).list_entries(...)")
    async def alist_entries(
        self, app: str, user_id: str, project_id: str | None = None, limit: int | None = None
    ) -> list[MemoryResult]:
        """Every entry of exactly this scope (global, or the view's project alone), newest
        first. ``project_id`` is deprecated: use ``for_project(project_id).list_entries(...)``."""
        project = self._project(project_id)
        return await self._runner.arun(self._core.list_entries(app, user_id, project, limit))

    list_entries = blocking(alist_entries)


class MemoryServiceHandle(EntryScope):
    """Sync + async access to the memory's :class:`MemoryService` (see its docs for semantics):
    the global scope's calls of :class:`EntryScope`, the reads across scopes, and
    :meth:`for_project`."""

    def __init__(self, internals: Internals) -> None:
        super().__init__(internals, None)

    def for_project(self, project_id: str) -> ProjectView:
        """This service bound to project ``project_id``: every call of :class:`EntryScope` acts
        on it (:class:`ProjectView`)."""
        return ProjectView(self, project_id)

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
        """Search exactly the listed scopes (``None``: global entries) of one user; ``scoring`` and
        the time bounds as in ``SearchRequest``."""
        bounds = window(after, before, created_after, created_before)
        search = self._core.search_projects(app, user_id, query, project_ids, limit, min_score, mode, scoring, bounds)
        return await self._runner.arun(search)

    search_projects = blocking(asearch_projects)

    async def aget_entries(self, app: str, user_id: str, ids: Sequence[str]) -> list[MemoryResult]:
        """Entries by id, in the order asked; ids not stored are skipped."""
        return await self._runner.arun(self._core.get_entries(app, user_id, ids))

    get_entries = blocking(aget_entries)

    async def alist_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """(user_id, project_id) of every project holding entries in ``app`` (or of one user)."""
        return await self._runner.arun(self._core.list_projects(app, user_id))

    list_projects = blocking(alist_projects)

    async def await_indexed(self, timeout_s: float | None = 60.0) -> bool:
        """Wait until every added entry is indexed (failed embeddings awaiting a retry aside)."""
        return await self._runner.arun(self._core.wait_indexed(timeout_s))

    wait_indexed = blocking(await_indexed)

    # -- deprecated: each says what replaces it ---------------------------------------------
    @deprecated("for_project(project_id).add_entries(app, user_id, entries, session_id=..., replace_session=True)")
    async def aadd_session_to_project(
        self, app: str, user_id: str, session_id: str, project_id: str, entries: Iterable[EntryInput]
    ) -> list[str]:
        scope = self.for_project(project_id)
        return await scope.aadd_entries(app, user_id, entries, session_id=session_id, replace_session=True)

    add_session_to_project = blocking(aadd_session_to_project)

    @deprecated("for_project(project_id).add_entry(app, user_id, entry)")
    async def aadd_entry_to_project(self, app: str, user_id: str, project_id: str, entry: EntryInput) -> str:
        return await self.for_project(project_id).aadd_entry(app, user_id, entry)

    add_entry_to_project = blocking(aadd_entry_to_project)

    @deprecated("delete_entries(app, user_id, ids=ids)")
    async def adelete_entries_by_id(self, app: str, user_id: str, ids: Sequence[str]) -> dict[str, int]:
        return await self.adelete_entries(app, user_id, ids=ids)

    delete_entries_by_id = blocking(adelete_entries_by_id)

    @deprecated("for_project(project_id).delete_entries(app, user_id, query)")
    async def adelete_entries_in_project(self, app: str, user_id: str, project_id: str, query: str) -> dict[str, int]:
        return await self.for_project(project_id).adelete_entries(app, user_id, query)

    delete_entries_in_project = blocking(adelete_entries_in_project)

    @deprecated("for_project(project_id).delete_entries(app, user_id, everything=True)")
    async def adelete_project(self, app: str, user_id: str, project_id: str) -> dict[str, int]:
        return await self.for_project(project_id).adelete_entries(app, user_id, everything=True)

    delete_project = blocking(adelete_project)

    @deprecated("delete_entries(app, user_id, session_id=session_id)")
    async def adelete_session(self, app: str, user_id: str, session_id: str) -> dict[str, int]:
        return await self.adelete_entries(app, user_id, session_id=session_id)

    delete_session = blocking(adelete_session)

    @deprecated("mem.delete_user(user_id=..., app=...), the same erasure")
    async def adelete_user(self, *, user_id: str, app: str = "default") -> DeletionReceipt:
        return await self._runner.arun(self._runner.session.erase(app, user_id))

    delete_user = blocking(adelete_user)

    @deprecated("mem.verify_deleted(user_id=..., app=...), the same scan")
    async def averify_deleted(self, *, user_id: str, app: str = "default") -> DeletionProof:
        return await self._runner.arun(self._runner.session.verify(app, user_id))

    verify_deleted = blocking(averify_deleted)


def scope_of(service: MemoryServiceHandle, project_id: str | None) -> EntryScope:
    """The service itself (``project_id`` None) or its view of that project: for callers that
    take an optional project from outside (the server's routes, the integrations)."""
    return service if project_id is None else service.for_project(project_id)


class ProjectView(EntryScope):
    """The long-term service bound to one project (``svc.for_project("P")``). Every call of
    :class:`EntryScope` (``add_entry``, ``add_entries``, ``delete_entries``, ``search``,
    ``list_recent``, ``list_entries``, with their ``a``-prefixed twins) acts on project P: searches
    and ``list_recent`` see the global entries plus P's, the rest P's alone. Code written for the
    unscoped service works on one project without passing it along."""

    def __init__(self, service: MemoryServiceHandle, project_id: str) -> None:
        self.service = service
        self.project_id = validate_project_id(project_id)
        super().__init__(service._runner, self.project_id)

    def __repr__(self) -> str:
        return f"ProjectView({self.project_id!r})"
