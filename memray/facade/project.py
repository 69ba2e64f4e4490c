"""`ProjectView`: the long-term service bound to one project (the seed's
``MemoryServiceAdapter::with_project_id``).

``svc.for_project("P")`` returns a view whose ``add_session``, ``add_entry``, ``search`` and
``delete_entries`` act on project P exactly as ``add_session_to_project``,
``add_entry_to_project``, ``search(SearchRequest(project_id="P"))`` (global entries plus P's) and
``delete_entries_in_project`` do: code written for the unscoped service works on one project
without passing it along. Every call has an ``a``-prefixed async twin.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from memray.errors import ValidationError
from memray.ids import validate_project_id
from memray.models import SearchMemoryResponse, SearchRequest
from memray.service.entries import EntryInput
from memray.service.reader import _parse_request

if TYPE_CHECKING:
    from memray.facade.service import MemoryServiceHandle

__all__ = ["ProjectView"]


class ProjectView:
    def __init__(self, service: MemoryServiceHandle, project_id: str) -> None:
        self.service = service
        self.project_id = validate_project_id(project_id)

    def __repr__(self) -> str:
        return f"ProjectView({self.project_id!r})"

    def add_session(self, app: str, user_id: str, session_id: str, entries: Iterable[EntryInput]) -> list[str]:
        """Store a session's entries in the project (re-adding the session replaces them)."""
        return self.service.add_session_to_project(app, user_id, session_id, self.project_id, entries)

    async def aadd_session(self, app: str, user_id: str, session_id: str, entries: Iterable[EntryInput]) -> list[str]:
        return await self.service.aadd_session_to_project(app, user_id, session_id, self.project_id, entries)

    def add_entry(self, app: str, user_id: str, entry: EntryInput) -> str:
        return self.service.add_entry_to_project(app, user_id, self.project_id, entry)

    async def aadd_entry(self, app: str, user_id: str, entry: EntryInput) -> str:
        return await self.service.aadd_entry_to_project(app, user_id, self.project_id, entry)

    def search(self, request: SearchRequest | dict[str, Any]) -> SearchMemoryResponse:
        """The global entries plus the project's; ``request.project_id`` must be unset or this one."""
        return self.service.search(self._bind(request))

    async def asearch(self, request: SearchRequest | dict[str, Any]) -> SearchMemoryResponse:
        return await self.service.asearch(self._bind(request))

    def delete_entries(self, app: str, user_id: str, query: str) -> dict[str, int]:
        """The project's entries matching ``query``; global entries and other projects untouched."""
        return self.service.delete_entries_in_project(app, user_id, self.project_id, query)

    async def adelete_entries(self, app: str, user_id: str, query: str) -> dict[str, int]:
        return await self.service.adelete_entries_in_project(app, user_id, self.project_id, query)

    def _bind(self, request: SearchRequest | dict[str, Any]) -> SearchRequest:
        req = request if isinstance(request, SearchRequest) else _parse_request(request)
        if req.project_id not in (None, self.project_id):
            raise ValidationError(
                "project_id",
                req.project_id,
                f"conflicts with this view's project {self.project_id!r}",
                "leave project_id unset, or search through svc.for_project(...) of that project",
            )
        return req.model_copy(update={"project_id": self.project_id})
