"""`ProjectView`: the long-term service bound to one project (``svc.for_project("P")``; the
seed's ``MemoryServiceAdapter::with_project_id``).

Every call of :class:`~memray.facade.service.EntryScope` (``add_entry``, ``add_entries``,
``delete_entries``, ``search``, ``list_recent``, ``list_entries``, with their ``a``-prefixed
twins) acts on project P: searches and ``list_recent`` see the global entries plus P's, the
rest P's alone. Code written for the unscoped service works on one project without passing it
along.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memray.facade.service import EntryScope
from memray.ids import validate_project_id

if TYPE_CHECKING:
    from memray.facade.service import MemoryServiceHandle

__all__ = ["ProjectView"]


class ProjectView(EntryScope):
    def __init__(self, service: MemoryServiceHandle, project_id: str) -> None:
        self.service = service
        self.project_id = validate_project_id(project_id)
        super().__init__(service._runner, self.project_id)

    def __repr__(self) -> str:
        return f"ProjectView({self.project_id!r})"
