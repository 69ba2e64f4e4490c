"""Google ADK: :class:`MemrayMemoryService`, a ``BaseMemoryService`` over memray's long-term
service (the ``[adk]`` extra)::

    from memray.integrations.adk import MemrayMemoryService

    memory_service = MemrayMemoryService(mem)            # mem = memray.open(...)
    runner = Runner(agent=agent, app_name="app", session_service=sessions, memory_service=memory_service)

ADK's ``load_memory`` and ``preload_memory`` tools then search memray.

Mapping
-------
* ``add_session_to_memory(session)`` stores the session as one memray session (re-adding it
  replaces what it stored before). Each event with text becomes one entry: id = event id,
  author = event author, timestamp = event time, the content's role in ``metadata["adk"]``.
  What the service's agent helpers skip is skipped here too: events that carry no text of their
  own — tool calls, tool results — thoughts, and streamed partial events.
* ``add_events_to_memory`` adds events as a delta (an event id already stored is replaced, the
  rest of the session stays); ``add_memory`` adds ADK ``MemoryEntry`` objects directly.
  ``custom_metadata`` is kept in ``metadata["custom"]``.
* ``search_memory(app_name=, user_id=, query=)`` runs memray's retrieval and answers ADK's
  ``SearchMemoryResponse`` in score order (best first); each memory's ``custom_metadata`` has
  its ``score``, ``session_id`` and ``project_id``. ``timestamp`` is ISO 8601 in UTC.
* ``delete_memory(memory_id=)`` deletes that entry (and its vectors) if it is in this service's
  scope. Re-adding the session it came from brings it back: a session is stored as it is now.

Projects (as an ADK ``MemoryServiceAdapter`` keeps them): ``with_project_id("P")`` returns a service
whose adds go to project P and whose searches see the global entries plus P's; the ad-hoc
``search_in_project`` / ``add_to_project`` reach another project from any service.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memray.errors import MissingExtraError
from memray.facade.memory import Memory
from memray.facade.service import MemoryServiceHandle, scope_of
from memray.ids import validate_id, validate_optional_id, validate_project_id
from memray.models import MemoryEntry, MemoryResult, SearchRequest

try:
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry as AdkMemoryEntry
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test in a subprocess
    raise MissingExtraError("google-adk", "adk") from exc

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session


__all__ = ["MemrayMemoryService", "events_to_entries"]

log = logging.getLogger(__name__)


class MemrayMemoryService(BaseMemoryService):
    """ADK's memory service backed by ``memory`` (a :class:`memray.Memory`, either mode).

    ``project_id``: the project adds go to and searches include (None: global entries only).
    ``limit`` and ``min_score``: what each search returns (see ``SearchRequest``).
    """

    def __init__(
        self, memory: Memory, project_id: str | None = None, limit: int = 10, min_score: float | None = None
    ) -> None:
        self._mem = memory
        self.project_id = None if project_id is None else validate_project_id(project_id)
        self.limit = limit
        self.min_score = min_score

    def with_project_id(self, project_id: str) -> MemrayMemoryService:
        """The same memory, scoped to ``project_id``: adds go there, searches see global + it."""
        return MemrayMemoryService(self._mem, validate_project_id(project_id), self.limit, self.min_score)

    @property
    def _svc(self) -> MemoryServiceHandle:
        return self._mem.memory_service

    # -- writes -----------------------------------------------------------------------------
    async def add_session_to_memory(self, session: Session) -> None:
        _scope(session.app_name, session.user_id)
        validate_id("session.id", session.id)
        entries = events_to_entries(session.events)
        scope = scope_of(self._svc, self.project_id)
        await scope.aadd_entries(
            session.app_name, session.user_id, entries, session_id=session.id, replace_session=True
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        _scope(app_name, user_id)
        validate_optional_id("session_id", session_id)
        entries = events_to_entries(events, custom_metadata)
        await scope_of(self._svc, self.project_id).aadd_entries(app_name, user_id, entries, session_id=session_id)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[AdkMemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await self.add_to_project(
            app_name=app_name,
            user_id=user_id,
            project_id=self.project_id,
            memories=memories,
            custom_metadata=custom_metadata,
        )

    async def add_to_project(
        self,
        *,
        app_name: str,
        user_id: str,
        project_id: str | None,
        memories: Sequence[AdkMemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Add ADK memories to ``project_id`` (None: global), whatever this service's project."""
        _scope(app_name, user_id)
        validate_optional_id("project_id", project_id)
        entries = [_from_adk(m, custom_metadata) for m in memories]
        await scope_of(self._svc, project_id).aadd_entries(app_name, user_id, entries)

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        _scope(app_name, user_id)
        if memory_id is None or memory_id == "":  # no memory named: nothing to delete
            return
        found = await self._svc.aget_entries(app_name, user_id, [validate_id("memory_id", memory_id)])
        if found and found[0].project_id == self.project_id:
            await self._svc.adelete_entries(app_name, user_id, ids=[memory_id])

    # -- reads ------------------------------------------------------------------------------
    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        return await self.search_in_project(app_name=app_name, user_id=user_id, query=query, project_id=self.project_id)

    async def search_in_project(
        self, *, app_name: str, user_id: str, query: str, project_id: str | None
    ) -> SearchMemoryResponse:
        """Search global entries plus ``project_id``'s (None: global only), best first."""
        _scope(app_name, user_id)
        validate_optional_id("project_id", project_id)
        request = SearchRequest(
            query=query,
            user_id=user_id,
            app_name=app_name,
            limit=self.limit,
            min_score=self.min_score,
            project_id=project_id,
        )
        response = await self._svc.asearch(request)
        if response.degraded:
            log.warning("memray search degraded: %s", response.reason)
        return SearchMemoryResponse(memories=[_to_adk(r) for r in response.memories])


def _scope(app_name: object, user_id: object) -> None:
    """ADK names memray's app ``app_name``: an error names the argument the caller passed."""
    validate_id("app_name", app_name)
    validate_id("user_id", user_id)


def events_to_entries(
    events: Iterable[Event], custom_metadata: Mapping[str, object] | None = None
) -> list[MemoryEntry]:
    """The events worth remembering as entries (see the module docstring for what is skipped)."""
    out = []
    for event in events:
        content = event.content
        if event.partial or content is None:
            continue
        text = _text(content)
        if not text.strip():
            continue
        metadata: dict[str, Any] = {
            "adk": {"event_id": event.id, "invocation_id": event.invocation_id, "role": content.role}
        }
        if custom_metadata:
            metadata["custom"] = dict(custom_metadata)
        out.append(
            MemoryEntry(
                id=event.id or _derived_id(event.author, event.timestamp, text),
                content=text,
                author=event.author or content.role or "user",
                timestamp=event.timestamp,
                metadata=metadata,
            )
        )
    return out


def _text(content: types.Content) -> str:
    """The content's own text: text parts that are not thoughts (tool calls and results have none)."""
    return "\n".join(p.text for p in content.parts or () if p.text and not p.thought)


def _derived_id(author: str, timestamp: float, text: str) -> str:
    return hashlib.sha256(f"{author}\x1f{timestamp!r}\x1f{text}".encode()).hexdigest()[:32]


def _from_adk(memory: AdkMemoryEntry, custom_metadata: Mapping[str, object] | None) -> MemoryEntry:
    text = _text(memory.content)
    timestamp = _parse_time(memory.timestamp)
    metadata: dict[str, Any] = {"adk": {"role": memory.content.role}}
    custom = {**memory.custom_metadata, **(custom_metadata or {})}
    if custom:
        metadata["custom"] = custom
    fields: dict[str, Any] = {
        "content": text,
        "author": memory.author or memory.content.role or "user",
        "metadata": metadata,
    }
    if memory.id:
        fields["id"] = memory.id
    if timestamp is not None:
        fields["timestamp"] = timestamp
    return MemoryEntry(**fields)


def _to_adk(result: MemoryResult) -> AdkMemoryEntry:
    entry = result.entry
    role = _section(entry.metadata, "adk").get("role") or ("user" if entry.author == "user" else "model")
    custom = _section(entry.metadata, "custom")
    return AdkMemoryEntry(
        id=entry.id,
        content=types.Content(role=role, parts=[types.Part(text=entry.text)]),
        author=entry.author,
        timestamp=datetime.fromtimestamp(entry.timestamp, tz=UTC).isoformat(),
        custom_metadata={
            **custom,
            "score": result.score,
            "session_id": result.session_id,
            "project_id": result.project_id,
        },
    )


def _section(metadata: dict[str, Any], name: str) -> dict[str, Any]:
    value = metadata.get(name)
    return value if isinstance(value, dict) else {}


def _parse_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
