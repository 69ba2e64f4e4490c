"""`EntryReader`: the reads of the long-term service — ranked search in a scope, listings and
lookups by id. :class:`~memray.service.longterm.MemoryService` adds the writes; what scopes,
scores and the ranking mean is in its module docstring.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from memray.arguments import check_limit, check_min_score, check_mode, check_query
from memray.embedding.query import QueryEncoder
from memray.errors import ValidationError
from memray.ids import Namespace, entry_namespace, validate_id, validate_project_id
from memray.index.base import ShardHit
from memray.index.router import ShardRouter
from memray.models import MemoryEntry, MemoryResult, RetrievalMode, SearchMemoryResponse, SearchRequest
from memray.ranking import Scoring, Stream, stream_of
from memray.service.entries import unscored
from memray.sim_time import Window, window
from memray.store.partitions import StorePartitions
from memray.store.rows import EntryRow, row_to_entry
from memray.text import tokenize

__all__ = ["EntryReader", "DEFAULT_LIMIT"]

#: Results a search returns when ``limit`` is None.
DEFAULT_LIMIT = 10


class EntryReader:
    """Reads of long-term entries (see the module docstring). All methods are coroutines."""

    def __init__(
        self, store: StorePartitions, router: ShardRouter, encoder: QueryEncoder, default_mode: RetrievalMode = "hybrid"
    ) -> None:
        self._store = store
        self._router = router
        self._encoder = encoder
        self._mode = default_mode
        #: Called before each search (the facade checks for a re-embedding cutover there).
        self.before_search: Callable[[], None] | None = None

    # -- reads ------------------------------------------------------------------------------
    async def search(self, request: SearchRequest | dict[str, Any]) -> SearchMemoryResponse:
        """Ranked entries relevant to ``request.query`` in the request's scope (module docstring)."""
        req = request if isinstance(request, SearchRequest) else _parse_request(request)
        app, user_id = validate_id("app_name", req.app_name), validate_id("user_id", req.user_id)
        project_id = None if req.project_id is None else validate_project_id(req.project_id)
        limit = check_limit(req.limit, DEFAULT_LIMIT)
        min_score = check_min_score(req.min_score)
        scopes: list[str | None] = [None] if project_id is None else [None, project_id]
        bounds = window(req.after, req.before, req.created_after, req.created_before)
        return await self._search(
            app, user_id, req.query, scopes, limit, min_score, check_mode(req.mode), stream_of(req.scoring), bounds
        )

    async def search_projects(
        self,
        app: str,
        user_id: str,
        query: str,
        project_ids: Sequence[str | None],
        limit: int | None = None,
        min_score: float | None = None,
        mode: RetrievalMode | None = None,
        scoring: Scoring | None = None,
        bounds: Window | None = None,
    ) -> SearchMemoryResponse:
        """Like :meth:`search`, over exactly the scopes listed (``None``: the global entries):
        ``search`` always includes the global entries, this includes only what is asked for.
        Ranked and scored as ``search``; no scopes, no results. ``scoring`` and ``bounds`` (a
        :class:`~memray.sim_time.Window`) as the request fields of :meth:`search`."""
        validate_id("app", app)
        validate_id("user_id", user_id)
        scopes = [None if p is None else validate_project_id(p) for p in dict.fromkeys(project_ids)]
        return await self._search(
            app,
            user_id,
            query,
            scopes,
            check_limit(limit, DEFAULT_LIMIT),
            check_min_score(min_score),
            check_mode(mode),
            stream_of(scoring),
            bounds,
        )

    async def _search(
        self,
        app: str,
        user_id: str,
        query: str,
        scopes: list[str | None],
        limit: int,
        min_score: float | None,
        mode: RetrievalMode | None,
        stream: Stream | None = None,
        bounds: Window | None = None,
    ) -> SearchMemoryResponse:
        check_query(query)
        if not tokenize(query) or not scopes:
            return SearchMemoryResponse(memories=[])
        namespaces = [entry_namespace(app, user_id, p) for p in scopes]
        if self.before_search is not None:
            self.before_search()
        encoded = await self._encoder.encode(query, mode or self._mode)
        result = await self._router.search(namespaces, encoded.query(query, limit, min_score, (), stream, bounds))
        memories = await self._hydrate(app, user_id, [h for h in result.hits if Namespace(*h.namespace) in namespaces])
        reasons = [r for r in (encoded.failed, result.reason) if r]
        return SearchMemoryResponse(memories=memories, degraded=bool(reasons), reason="; ".join(reasons) or None)

    async def _hydrate(self, app: str, user_id: str, hits: Sequence[ShardHit]) -> list[MemoryResult]:
        """Hits as results: from the shard's payload, or from the store where it has none."""
        missing = [h.doc_id for h in hits if not h.payload]
        rows: list[EntryRow] = await self._store.get_entries(app, user_id, missing) if missing else []
        by_id = {r.id: r for r in rows}
        out = []
        for h in hits:
            if h.payload:
                data = json.loads(h.payload)
                out.append(
                    MemoryResult(
                        entry=MemoryEntry.model_validate(data["entry"]),
                        score=h.score,
                        session_id=data.get("session_id"),
                        project_id=data.get("project_id"),
                    )
                )
            elif (row := by_id.get(h.doc_id)) is not None and (row.project_id or "") == h.namespace[3]:
                out.append(
                    MemoryResult(
                        entry=row_to_entry(row), score=h.score, session_id=row.session_id, project_id=row.project_id
                    )
                )
        return out

    async def list_recent(
        self, app: str, user_id: str, limit: int | None = None, project_id: str | None = None
    ) -> list[MemoryResult]:
        """The newest entries (timestamp, then id, descending) in the search scope of
        ``project_id`` (None: global only; P: global plus P). ``score`` is 0.0: not a search."""
        validate_id("app", app)
        validate_id("user_id", user_id)
        n = check_limit(limit, DEFAULT_LIMIT)
        project = None if project_id is None else validate_project_id(project_id)  # (before a call is made)
        calls = [self._store.list_entries(app, user_id, None, None, False, n)]
        if project is not None:
            calls.append(self._store.list_entries(app, user_id, project, None, False, n))
        rows = [r for part in await asyncio.gather(*calls) for r in part]
        rows.sort(key=lambda r: (r.timestamp, r.id), reverse=True)
        return [unscored(r) for r in rows[:n]]

    async def list_entries(
        self, app: str, user_id: str, project_id: str | None = None, limit: int | None = None
    ) -> list[MemoryResult]:
        """Every entry of exactly one scope, newest first: the global entries (``project_id=None``)
        or P's alone (unlike :meth:`list_recent`, which adds the global ones). ``limit`` None: all."""
        validate_id("app", app)
        validate_id("user_id", user_id)
        n = check_limit(limit, None, none_means="every entry")
        project = None if project_id is None else validate_project_id(project_id)
        rows: list[EntryRow] = await self._store.list_entries(app, user_id, project, None, False, n)
        return [unscored(r) for r in rows]

    async def get_entries(self, app: str, user_id: str, ids: Sequence[str]) -> list[MemoryResult]:
        """Entries by id, in the order of ``ids``; ids not stored are skipped. ``score`` is 0.0."""
        validate_id("app", app)
        validate_id("user_id", user_id)
        wanted = [validate_id("entry.id", i) for i in ids]
        rows: list[EntryRow] = await self._store.get_entries(app, user_id, wanted) if wanted else []
        return [unscored(r) for r in rows]

    async def list_projects(self, app: str, user_id: str | None = None) -> list[tuple[str, str]]:
        """(user_id, project_id) of every project holding entries in ``app`` — of one user when
        ``user_id`` is given — sorted. An explicit app-wide read when ``user_id`` is None."""
        validate_id("app", app)
        if user_id is not None:
            validate_id("user_id", user_id)
        projects: list[tuple[str, str]] = await self._store.entry_projects(app, user_id)
        return projects


def _parse_request(data: Any) -> SearchRequest:
    if not isinstance(data, dict):
        raise ValidationError("request", data, f"must be a SearchRequest or a dict, got {type(data).__name__}")
    # the shared rules first: pydantic would coerce True to 1 and "5" to 5, and word its errors its own way
    check_limit(data.get("limit"), DEFAULT_LIMIT)
    check_min_score(data.get("min_score"))
    check_mode(data.get("mode"))
    try:
        return SearchRequest.model_validate(data)
    except Exception as exc:
        errors = getattr(exc, "errors", None)
        if callable(errors):
            first = errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "request"
            raise ValidationError(loc, first.get("input", data), first.get("msg", str(exc))) from exc
        raise ValidationError("request", data, str(exc)) from exc
