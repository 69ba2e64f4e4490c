"""The REST API under ``/v1``: every route calls the facade a library user calls (``memray.Memory``
and its handles), through :class:`UserScope`, after :func:`~memray.server.auth.authorize` let it in.

Paths name what a call acts on — ``/v1/apps/{app}/users/{user_id}/...`` — and the key must
reach it (its app; its user if it is bound to one; writes only if it may write). Batches carry a
user per item: each one is checked. Writes answer with their seqs or ids, whether they are
durable and whether they are searchable yet (:class:`~memray.server.models.MessagesAdded`).
"""

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Depends, Query, Request

from memray.errors import ValidationError
from memray.facade.conversation import ConversationHandle, SearchCall
from memray.facade.memory import Memory
from memray.facade.service import MemoryServiceHandle, scope_of
from memray.ids import ConversationKey
from memray.models import ConversationOrder, DeletionReceipt, Role, SearchRequest
from memray.server import models as m
from memray.server.auth import KeyCache, Principal, authorize
from memray.server.limits import MAX_IDS_PER_DELETE, MAX_LIMIT, MAX_OFFSET, MAX_QUERY_CHARS

__all__ = ["build_router", "UserScope"]


@dataclass(frozen=True)
class UserScope:
    """One user of one app, as a route reaches it (after the key was checked)."""

    mem: Memory
    app: str
    user_id: str
    principal: Principal

    def conversation(self, conversation_id: str) -> ConversationHandle:
        return self.mem.conversation(self.user_id, conversation_id, self.app)

    @property
    def service(self) -> MemoryServiceHandle:
        return self.mem.memory_service


def added(seqs: list[int], ack: m.Ack, replicas: int) -> m.MessagesAdded:
    """What an add guarantees (docs/architecture.md, "Read-your-writes"): context() finds the messages at once
    from any process; search() at once only in the process that added them (this replica)."""
    return m.MessagesAdded(seqs=seqs, durable=ack == "durable", searchable=replicas == 1)


def search_out(results: Any) -> m.SearchOut:
    return m.SearchOut(hits=list(results), degraded=results.degraded, reason=results.reason)


def _metadata_filter(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValidationError("metadata", raw, "must be a JSON object", 'pass e.g. metadata={"topic": "travel"}')
    return parsed


#: Ids of a delete by ids (a query parameter, repeated).
Ids = Annotated[list[str], Query(min_length=1, max_length=MAX_IDS_PER_DELETE)]

#: Declared on every route that writes or deletes (``x-memray-write`` in the OpenAPI schema): a
#: read-only key is refused there; the security tests take the list from the schema.
WRITE: dict[str, Any] = {"openapi_extra": {"x-memray-write": True}}


def build_router(mem: Memory, keys: KeyCache | None, replicas: int) -> APIRouter:
    """The ``/v1`` routes over ``mem``; ``keys`` None: no auth (``--no-auth``)."""

    def scope(write: bool) -> Callable[..., Awaitable[UserScope]]:
        async def dependency(request: Request, app: str, user_id: str) -> UserScope:  # async: no thread hop
            principal = authorize(keys, request.headers, app, [user_id], write)
            return UserScope(mem, app, user_id, principal)

        return dependency

    Read = Annotated[UserScope, Depends(scope(False))]
    Write = Annotated[UserScope, Depends(scope(True))]

    router = APIRouter(prefix="/v1")
    user = "/apps/{app}/users/{user_id}"
    conv = user + "/conversations/{conversation_id}"

    # -- conversations ------------------------------------------------------------------------
    @router.post(conv + "/messages", tags=["conversations"], response_model=m.MessagesAdded, **WRITE)
    async def add_messages(s: Write, conversation_id: str, body: m.AddMessages) -> m.MessagesAdded:
        """Add messages; ``ack``: ``buffered`` answers once they hold seqs, ``durable`` after the store commit."""
        messages = [x.model_dump(exclude_none=True) for x in body.messages]
        seqs = await s.conversation(conversation_id).aadd(messages, durable=body.ack == "durable", block=False)
        return added(seqs, body.ack, replicas)

    @router.get(conv + "/messages", tags=["conversations"], response_model=m.MessageList)
    async def list_messages(
        s: Read,
        conversation_id: str,
        limit: Annotated[int | None, Query(ge=1, le=MAX_LIMIT)] = None,
        before_seq: int | None = None,
        after_seq: int | None = None,
        roles: Annotated[list[Role] | None, Query(max_length=len(get_args(Role)))] = None,
        metadata: Annotated[
            str | None,
            Query(max_length=MAX_QUERY_CHARS, description="a JSON object every message's metadata matches"),
        ] = None,
    ) -> m.MessageList:
        """Messages by seq: ``limit`` = the most recent N that match, oldest first."""
        found = await s.conversation(conversation_id).amessages(
            limit, before_seq, after_seq, None if roles is None else list[str](roles), _metadata_filter(metadata)
        )
        return m.MessageList(messages=found)

    @router.delete(conv + "/messages", tags=["conversations"], response_model=m.Counts, **WRITE)
    async def delete_messages(s: Write, conversation_id: str, ids: Ids) -> m.Counts:
        """Delete these messages from every store (their seqs are never reused)."""
        return m.Counts(counts=await s.conversation(conversation_id).adelete_messages(ids))

    @router.post(conv + "/search", tags=["conversations"], response_model=m.SearchOut)
    async def search(s: Read, conversation_id: str, body: m.SearchIn) -> m.SearchOut:
        """Messages relevant to ``query`` (``score`` in [0, 1]; ``scope=user``: all the user's conversations)."""
        handle = s.conversation(conversation_id)
        return search_out(await handle.asearch(body.query, body.limit, body.min_score, body.mode, body.scope))

    @router.post(conv + "/context", tags=["conversations"], response_model=m.ContextOut)
    async def context(s: Read, conversation_id: str, body: m.ContextIn) -> m.ContextOut:
        """Recent + recalled messages, the summary and the working memory, for the next prompt."""
        return await s.conversation(conversation_id).acontext(**body.model_dump())

    @router.get(conv + "/working-memory", tags=["conversations"])
    async def get_working_memory(s: Read, conversation_id: str) -> dict[str, Any]:
        """The conversation's working memory (text) and its version."""
        value = await s.conversation(conversation_id).working_memory.aget()
        return value.model_dump()

    @router.put(conv + "/working-memory", tags=["conversations"], **WRITE)
    async def update_working_memory(s: Write, conversation_id: str, body: m.WorkingMemoryIn) -> dict[str, Any]:
        """Append to (default) or replace the working memory; a stale ``expected_version`` is a 409."""
        wm = s.conversation(conversation_id).working_memory
        return (await wm.aupdate(body.content, body.mode, body.expected_version)).model_dump()

    @router.delete(conv + "/working-memory", tags=["conversations"], **WRITE)
    async def clear_working_memory(s: Write, conversation_id: str) -> dict[str, Any]:
        return (await s.conversation(conversation_id).working_memory.aclear()).model_dump()

    @router.get(conv + "/summary", tags=["conversations"], response_model=m.SummaryOut)
    async def summary(s: Read, conversation_id: str) -> m.SummaryOut:
        """The summary of the older history, or null."""
        return m.SummaryOut(summary=await s.conversation(conversation_id).asummary())

    @router.post(conv + "/clear", tags=["conversations"], response_model=m.Counts, **WRITE)
    async def clear(s: Write, conversation_id: str) -> m.Counts:
        """Delete every message so far (the conversation, its working memory and its seqs stay)."""
        return m.Counts(counts=await s.conversation(conversation_id).aclear())

    @router.delete(conv, tags=["conversations"], response_model=m.Counts, **WRITE)
    async def delete_conversation(s: Write, conversation_id: str) -> m.Counts:
        """Delete the conversation: messages, vectors, working memory, summary."""
        return m.Counts(counts=await s.conversation(conversation_id).adelete())

    @router.get(user + "/conversations", tags=["conversations"], response_model=m.ConversationsOut)
    async def list_conversations(
        s: Read,
        order: ConversationOrder = "updated_desc",
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> m.ConversationsOut:
        """A page of the user's conversations."""
        page = await s.mem.alist_conversations(s.user_id, s.app, order, limit, offset)
        return m.ConversationsOut(conversations=list(page), total=page.total)

    # -- long-term entries ----------------------------------------------------------------------
    @router.post(user + "/entries", tags=["entries"], response_model=m.EntriesAdded, **WRITE)
    async def add_entries(s: Write, body: m.AddEntries) -> m.EntriesAdded:
        """Store entries (global, or in ``project_id``); the same id replaces an entry."""
        entries = [x.model_dump(exclude_none=True) for x in body.entries]
        ids = await scope_of(s.service, body.project_id).aadd_entries(
            s.app, s.user_id, entries, session_id=body.session_id
        )
        return m.EntriesAdded(ids=ids)

    @router.post(user + "/entries/search", tags=["entries"], response_model=m.EntrySearchOut)
    async def search_entries(s: Read, body: m.EntrySearchIn) -> m.EntrySearchOut:
        """``project_id`` null: the global entries; ``P``: global plus P's. ``limit`` null means 10."""
        request = SearchRequest(user_id=s.user_id, app_name=s.app, **body.model_dump())
        found = await s.service.asearch(request)
        return m.EntrySearchOut(memories=found.memories, degraded=found.degraded, reason=found.reason)

    @router.get(user + "/entries", tags=["entries"], response_model=m.EntryList)
    async def list_entries(
        s: Read, project_id: str | None = None, limit: Annotated[int | None, Query(ge=1, le=MAX_LIMIT)] = None
    ) -> m.EntryList:
        """Every entry of one scope (global, or P's alone), newest first."""
        return m.EntryList(memories=await scope_of(s.service, project_id).alist_entries(s.app, s.user_id, limit=limit))

    @router.delete(user + "/entries", tags=["entries"], response_model=m.Counts, **WRITE)
    async def delete_entries(s: Write, ids: Ids) -> m.Counts:
        """Delete these entries, whatever their scope."""
        return m.Counts(counts=await s.service.adelete_entries(s.app, s.user_id, ids=ids))

    @router.post(user + "/entries/delete", tags=["entries"], response_model=m.Counts, **WRITE)
    async def delete_matching_entries(s: Write, body: m.EntryDeleteIn) -> m.Counts:
        """Entries containing every word of ``query``: global ones, or ``project_id``'s only."""
        counts = await scope_of(s.service, body.project_id).adelete_entries(s.app, s.user_id, body.query)
        return m.Counts(counts=counts)

    @router.delete(user + "/projects/{project_id}", tags=["entries"], response_model=m.Counts, **WRITE)
    async def delete_project(s: Write, project_id: str) -> m.Counts:
        return m.Counts(
            counts=await s.service.for_project(project_id).adelete_entries(s.app, s.user_id, everything=True)
        )

    @router.delete(user + "/sessions/{session_id}", tags=["entries"], response_model=m.Counts, **WRITE)
    async def delete_session(s: Write, session_id: str) -> m.Counts:
        return m.Counts(counts=await s.service.adelete_entries(s.app, s.user_id, session_id=session_id))

    @router.delete(user, tags=["users"], response_model=DeletionReceipt, **WRITE)
    async def delete_user(s: Write) -> DeletionReceipt:
        """Erase the user everywhere (conversations, entries, vectors, exports, caches): the receipt."""
        return await s.mem.adelete_user(app=s.app, user_id=s.user_id)

    # -- batches --------------------------------------------------------------------------------
    @router.post("/apps/{app}/messages/batch", tags=["batches"], response_model=m.BatchAdded, **WRITE)
    async def add_batch(request: Request, app: str, body: m.BatchAdd) -> m.BatchAdded:
        """Add to many conversations at once (one call per host)."""
        authorize(keys, request.headers, app, [item.user_id for item in body.items], write=True)
        batch = [
            (
                ConversationKey.of(app, item.user_id, item.conversation_id),
                [x.model_dump(exclude_none=True) for x in item.messages],
            )
            for item in body.items
        ]
        results = await mem.aadd_many(batch, durable=body.ack == "durable", block=False)
        return m.BatchAdded(results=[added(seqs, body.ack, replicas) for seqs in results])

    @router.post("/apps/{app}/search/batch", tags=["batches"], response_model=m.BatchSearchOut)
    async def search_batch(request: Request, app: str, body: m.BatchSearch) -> m.BatchSearchOut:
        """Many searches in one request, each answered as its single search would be."""
        authorize(keys, request.headers, app, [item.user_id for item in body.searches], write=False)
        calls = [
            SearchCall(
                mem.conversation(q.user_id, q.conversation_id, app), q.query, q.limit, q.min_score, q.mode, q.scope
            )
            for q in body.searches
        ]
        return m.BatchSearchOut(results=[search_out(r) for r in await mem.asearch_many(calls)])

    # -- the floor the load benchmark measures against --------------------------------------------
    @router.post("/apps/{app}/noop", tags=["server"])
    async def noop(request: Request, app: str, body: dict[str, Any]) -> dict[str, Any]:
        """Checks the key and parses the body like every route, then does nothing: the floor of
        ``benchmarks/serve_load.py`` (the same Serve app, the same payloads)."""
        authorize(keys, request.headers, app, None, write=False)
        return {}

    return router
