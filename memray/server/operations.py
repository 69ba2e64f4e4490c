"""The server's operations, each declared once (:mod:`memray.server.operation` says what a
declaration holds and what is derived from it): the REST routes under ``/v1`` and their bodies
(:mod:`memray.server.routes`), the MCP tools with their schemas and annotations
(:mod:`memray.server.mcp`) and the REST and MCP reference of ``docs/server.md``
(:mod:`memray.server.reference`).

Defaults are :mod:`memray.arguments`' or the facade's request records' (``memray.SearchCall``,
``memray.ContextCall``), read from them; caps are :mod:`memray.server.limits`'. Each ``run``
calls the facade a library user calls, so what an operation answers is what the library answers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal, get_args

from pydantic import create_model

from memray.arguments import CONVERSATIONS_LIMIT
from memray.errors import ValidationError
from memray.facade.conversation import ContextCall, SearchCall
from memray.facade.service import scope_of
from memray.ids import ConversationKey
from memray.models import (
    Context,
    ConversationOrder,
    DeletionReceipt,
    Merge,
    RetrievalMode,
    Role,
    Scope,
    SearchRequest,
)
from memray.server import models as m
from memray.server.limits import (
    MAX_BATCH_ITEMS,
    MAX_ENTRIES_PER_ADD,
    MAX_ID_CHARS,
    MAX_IDS_PER_DELETE,
    MAX_LIMIT,
    MAX_MESSAGES_PER_ADD,
    MAX_OFFSET,
    MAX_QUERY_CHARS,
    MAX_TEXT_CHARS,
)
from memray.server.operation import REQUIRED, Arg, ArgsModel, Branch, Operation, Target, Tool
from memray.service import DEFAULT_LIMIT as ENTRY_SEARCH_LIMIT

__all__ = ["OPERATIONS", "TOOLS", "BatchAddItem", "BatchSearchItem", "added", "search_out"]


def _default(record: type, name: str) -> Any:
    """The default of a facade request record's field (``ContextCall.limit``): written there once."""
    return next(f.default for f in dataclasses.fields(record) if f.name == name)


# -- the arguments several operations share -------------------------------------------------------
def _limit(default: int | None, doc: str) -> Arg:
    return Arg("limit", int if default is not None else int | None, default, doc, ge=1, le=MAX_LIMIT)


def _ids(doc: str) -> Arg:
    return Arg("ids", list[str], REQUIRED, doc, min_length=1, max_length=MAX_IDS_PER_DELETE)


QUERY = Arg("query", str, REQUIRED, "what to look for, in plain words (any text: there is no query syntax)",
            max_length=MAX_QUERY_CHARS)  # fmt: skip
MIN_SCORE = Arg("min_score", float | None, None, "only results scoring this or more (scores are in [0, 1])", ge=0, le=1)
MODE = Arg("mode", RetrievalMode | None, None, "vector, lexical or hybrid (default: the memray's)")
PROJECT_ID = Arg("project_id", str | None, None, "a project of the user's long-term memories (none: the global ones)",
                 min_length=1, max_length=MAX_ID_CHARS)  # fmt: skip
ACK = Arg("ack", m.Ack, "buffered", "buffered: answer once the messages hold seqs; durable: after the store commit")


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


def _messages(items: list[m.MessageIn]) -> list[dict[str, Any]]:
    return [x.model_dump(exclude_none=True) for x in items]


# -- a conversation's operations ------------------------------------------------------------------
async def _add_messages(t: Target, a: Any) -> m.MessagesAdded:
    seqs = await t.conversation().aadd(_messages(a.messages), durable=a.ack == "durable", block=False)
    return added(seqs, a.ack, t.replicas)


async def _list_messages(t: Target, a: Any) -> m.MessageList:
    roles = None if a.roles is None else list[str](a.roles)
    found = await t.conversation().amessages(a.limit, a.before_seq, a.after_seq, roles, _metadata_filter(a.metadata))
    return m.MessageList(messages=found)


async def _delete_messages(t: Target, a: Any) -> m.Counts:
    return m.Counts(counts=await t.conversation().adelete_messages(a.ids))


async def _search(t: Target, a: Any) -> m.SearchOut:
    return search_out(await t.conversation().asearch(a.query, a.limit, a.min_score, a.mode, a.scope))


async def _context(t: Target, a: Any) -> Context:
    return await t.conversation().acontext(**a.model_dump())


async def _get_working_memory(t: Target, a: Any) -> dict[str, Any]:
    return (await t.conversation().working_memory.aget()).model_dump()


async def _update_working_memory(t: Target, a: Any) -> dict[str, Any]:
    value = await t.conversation().working_memory.aupdate(a.content, a.mode, a.expected_version)
    return value.model_dump()


async def _clear_working_memory(t: Target, a: Any) -> dict[str, Any]:
    return (await t.conversation().working_memory.aclear()).model_dump()


async def _summary(t: Target, a: Any) -> m.SummaryOut:
    return m.SummaryOut(summary=await t.conversation().asummary())


async def _clear(t: Target, a: Any) -> m.Counts:
    return m.Counts(counts=await t.conversation().aclear())


async def _delete_conversation(t: Target, a: Any) -> m.Counts:
    return m.Counts(counts=await t.conversation().adelete())


ADD_MESSAGES = Operation(
    "add_messages",
    "Add messages; ``ack``: ``buffered`` answers once they hold seqs, ``durable`` after the store commit. "
    "A full write buffer answers 429 rather than waiting.",
    "conversation", "write", "POST", "/messages", _add_messages,
    args=(
        Arg("messages", list[m.MessageIn], REQUIRED, "the messages, in order",
            min_length=1, max_length=MAX_MESSAGES_PER_ADD),
        ACK,
    ),
    body="AddMessages",
    response=m.MessagesAdded,
)  # fmt: skip
LIST_MESSAGES = Operation(
    "list_messages",
    "Messages by seq: ``limit`` = the most recent N that match, oldest first.",
    "conversation", "read", "GET", "/messages", _list_messages,
    args=(
        _limit(None, "the most recent N messages that match (none: all)"),
        Arg("before_seq", int | None, None, "only messages before this seq", ge=0),
        Arg("after_seq", int | None, None, "only messages after this seq", ge=0),
        Arg("roles", list[Role] | None, None, "only messages of these roles", max_length=len(get_args(Role))),
        Arg("metadata", str | None, None, "a JSON object every message's metadata matches",
            max_length=MAX_QUERY_CHARS),
    ),
    response=m.MessageList,
)  # fmt: skip
DELETE_MESSAGES = Operation(
    "delete_messages",
    "Delete these messages from every store (their seqs are never reused).",
    "conversation", "delete", "DELETE", "/messages", _delete_messages,
    args=(_ids("the ids of the messages"),),
    response=m.Counts,
)  # fmt: skip
SEARCH = Operation(
    "search",
    "Messages relevant to ``query`` (``score`` in [0, 1]; ``scope=user``: all the user's conversations).",
    "conversation", "read", "POST", "/search", _search,
    args=(
        QUERY,
        _limit(_default(SearchCall, "limit"), f"at most this many results (1-{MAX_LIMIT})"),
        MIN_SCORE,
        MODE,
        Arg("scope", Scope, _default(SearchCall, "scope"), "this conversation, or all the user's (user)"),
    ),
    body="SearchIn",
    response=m.SearchOut,
)  # fmt: skip
CONTEXT = Operation(
    "context",
    "Recent + recalled messages, the summary and the working memory, for the next prompt.",
    "conversation", "read", "POST", "/context", _context,
    args=(
        Arg("query", str | None, _default(ContextCall, "query"),
            "the next question, to recall older messages about it", max_length=MAX_QUERY_CHARS),
        _limit(_default(ContextCall, "limit"), "recent messages to include"),
        Arg("semantic_limit", int, _default(ContextCall, "semantic_limit"), "older relevant messages to recall",
            ge=0, le=MAX_LIMIT),
        Arg("merge", Merge, _default(ContextCall, "merge"), "recalled messages: append, prepend or interleave"),
        Arg("scope", Scope, _default(ContextCall, "scope"), "recall from this conversation, or all the user's (user)"),
        Arg("token_budget", int | None, _default(ContextCall, "token_budget"), "at most this many tokens (none: all)",
            ge=1),
        Arg("mode", RetrievalMode | None, _default(ContextCall, "mode"), MODE.doc),
        Arg("min_score", float | None, _default(ContextCall, "min_score"), MIN_SCORE.doc, ge=0, le=1),
    ),
    body="ContextIn",
    response=Context,
)  # fmt: skip
GET_WORKING_MEMORY = Operation(
    "get_working_memory",
    "The conversation's working memory (text) and its version.",
    "conversation", "read", "GET", "/working-memory", _get_working_memory,
)  # fmt: skip
UPDATE_WORKING_MEMORY = Operation(
    "update_working_memory",
    "Append to (default) or replace the working memory; a stale ``expected_version`` is a 409.",
    "conversation", "write", "PUT", "/working-memory", _update_working_memory,
    args=(
        Arg("content", str, REQUIRED, "the text", max_length=MAX_TEXT_CHARS),
        Arg("mode", Literal["append", "replace"], "append", "append (safe) or replace (destructive)"),
        Arg("expected_version", int | None, None, "refuse (409) unless the note is at this version"),
    ),
    body="WorkingMemoryIn",
)  # fmt: skip
CLEAR_WORKING_MEMORY = Operation(
    "clear_working_memory",
    "Empty the working memory (a new version).",
    "conversation", "delete", "DELETE", "/working-memory", _clear_working_memory,
)  # fmt: skip
SUMMARY = Operation(
    "summary",
    "The summary of the older history, or null.",
    "conversation", "read", "GET", "/summary", _summary,
    response=m.SummaryOut,
)  # fmt: skip
CLEAR = Operation(
    "clear",
    "Delete every message so far (the conversation, its working memory and its seqs stay).",
    "conversation", "delete", "POST", "/clear", _clear,
    response=m.Counts,
)  # fmt: skip
DELETE_CONVERSATION = Operation(
    "delete_conversation",
    "Delete the conversation: messages, vectors, working memory, summary.",
    "conversation", "delete", "DELETE", "", _delete_conversation,
    response=m.Counts,
)  # fmt: skip


# -- a user's operations --------------------------------------------------------------------------
async def _list_conversations(t: Target, a: Any) -> m.ConversationsOut:
    page = await t.mem.alist_conversations(t.user, t.app, a.order, a.limit, a.offset)
    return m.ConversationsOut(conversations=list(page), total=page.total)


async def _add_entries(t: Target, a: Any) -> m.EntriesAdded:
    entries = [x.model_dump(exclude_none=True) for x in a.entries]
    ids = await scope_of(t.service, a.project_id).aadd_entries(t.app, t.user, entries, session_id=a.session_id)
    return m.EntriesAdded(ids=ids)


async def _search_entries(t: Target, a: Any) -> m.EntrySearchOut:
    found = await t.service.asearch(SearchRequest(user_id=t.user, app_name=t.app, **a.model_dump()))
    return m.EntrySearchOut(memories=found.memories, degraded=found.degraded, reason=found.reason)


async def _list_entries(t: Target, a: Any) -> m.EntryList:
    return m.EntryList(memories=await scope_of(t.service, a.project_id).alist_entries(t.app, t.user, limit=a.limit))


async def _delete_entries(t: Target, a: Any) -> m.Counts:
    return m.Counts(counts=await t.service.adelete_entries(t.app, t.user, ids=a.ids))


async def _delete_matching_entries(t: Target, a: Any) -> m.Counts:
    return m.Counts(counts=await scope_of(t.service, a.project_id).adelete_entries(t.app, t.user, a.query))


async def _delete_project(t: Target, a: Any) -> m.Counts:
    project = t.service.for_project(a.project_id)
    return m.Counts(counts=await project.adelete_entries(t.app, t.user, everything=True))


async def _delete_session(t: Target, a: Any) -> m.Counts:
    return m.Counts(counts=await t.service.adelete_entries(t.app, t.user, session_id=a.session_id))


async def _delete_user(t: Target, a: Any) -> DeletionReceipt:
    return await t.mem.adelete_user(app=t.app, user_id=t.user)


LIST_CONVERSATIONS = Operation(
    "list_conversations",
    "A page of the user's conversations.",
    "user", "read", "GET", "/conversations", _list_conversations,
    args=(
        Arg("order", ConversationOrder, "updated_desc", "updated_*, created_* or title_* (_asc or _desc)"),
        _limit(CONVERSATIONS_LIMIT, "at most this many conversations"),
        Arg("offset", int, 0, "from this one on (0: the first)", ge=0, le=MAX_OFFSET),
    ),
    response=m.ConversationsOut,
)  # fmt: skip
ADD_ENTRIES = Operation(
    "add_entries",
    "Store entries (global, or in ``project_id``); the same id replaces an entry.",
    "user", "write", "POST", "/entries", _add_entries,
    args=(
        Arg("entries", list[m.EntryIn], REQUIRED, "the entries", min_length=1, max_length=MAX_ENTRIES_PER_ADD),
        PROJECT_ID,
        Arg("session_id", str | None, None, "tag them with a session (delete it as one)", min_length=1,
            max_length=MAX_ID_CHARS),
    ),
    body="AddEntries",
    response=m.EntriesAdded,
    tag="entries",
)  # fmt: skip
SEARCH_ENTRIES = Operation(
    "search_entries",
    f"``project_id`` null: the global entries; ``P``: global plus P's. ``limit`` null means {ENTRY_SEARCH_LIMIT}.",
    "user", "read", "POST", "/entries/search", _search_entries,
    args=(
        QUERY,
        _limit(None, f"at most this many results (1-{MAX_LIMIT}; none: {ENTRY_SEARCH_LIMIT})"),
        MIN_SCORE,
        Arg("project_id", str | None, None, "none: global entries only; P: global plus P's", min_length=1,
            max_length=MAX_ID_CHARS),
        MODE,
    ),
    body="EntrySearchIn",
    response=m.EntrySearchOut,
    tag="entries",
)  # fmt: skip
LIST_ENTRIES = Operation(
    "list_entries",
    "Every entry of one scope (global, or P's alone), newest first.",
    "user", "read", "GET", "/entries", _list_entries,
    args=(
        Arg("project_id", str | None, None, "none: the global entries; P: P's alone", max_length=MAX_ID_CHARS),
        _limit(None, "at most this many, the newest (none: all)"),
    ),
    response=m.EntryList,
    tag="entries",
)  # fmt: skip
DELETE_ENTRIES = Operation(
    "delete_entries",
    "Delete these entries, whatever their scope.",
    "user", "delete", "DELETE", "/entries", _delete_entries,
    args=(_ids("the ids of the entries"),),
    response=m.Counts,
    tag="entries",
)  # fmt: skip
DELETE_MATCHING_ENTRIES = Operation(
    "delete_matching_entries",
    "Entries containing every word of ``query``: global ones, or ``project_id``'s only.",
    "user", "delete", "POST", "/entries/delete", _delete_matching_entries,
    args=(QUERY, PROJECT_ID),
    body="EntryDeleteIn",
    response=m.Counts,
    tag="entries",
)  # fmt: skip
DELETE_PROJECT = Operation(
    "delete_project",
    "Every long-term entry of the project.",
    "user", "delete", "DELETE", "/projects/{project_id}", _delete_project,
    args=(Arg("project_id", str, REQUIRED, "the project", max_length=MAX_ID_CHARS),),
    response=m.Counts,
    tag="entries",
)  # fmt: skip
DELETE_SESSION = Operation(
    "delete_session",
    "Every long-term entry of the session.",
    "user", "delete", "DELETE", "/sessions/{session_id}", _delete_session,
    args=(Arg("session_id", str, REQUIRED, "the session", max_length=MAX_ID_CHARS),),
    response=m.Counts,
    tag="entries",
)  # fmt: skip
DELETE_USER = Operation(
    "delete_user",
    "Erase the user everywhere (conversations, entries, vectors, exports, caches, the keys bound to them): "
    "the receipt.",
    "user", "delete", "DELETE", "", _delete_user,
    response=DeletionReceipt,
    tag="users",
)  # fmt: skip


# -- an app's batches: the single operations' arguments, per item ---------------------------------
def _item(name: str, single: Operation, *, leave_out: tuple[str, ...] = ()) -> type[ArgsModel]:
    """One item of a batch of ``single``: the user and conversation it acts on, and ``single``'s
    arguments (less ``leave_out``, given once for the batch)."""
    fields: dict[str, Any] = {
        "user_id": (m.Id, REQUIRED),
        "conversation_id": (m.Id, REQUIRED),
        **{a.name: (a.type, a.field()) for a in single.args if a.name not in leave_out},
    }
    return create_model(name, __base__=ArgsModel, **fields)


BatchAddItem = _item("BatchAddItem", ADD_MESSAGES, leave_out=("ack",))
BatchSearchItem = _item("BatchSearchItem", SEARCH)


async def _add_batch(t: Target, a: Any) -> m.BatchAdded:
    batch = [(ConversationKey.of(t.app, i.user_id, i.conversation_id), _messages(i.messages)) for i in a.items]
    results = await t.mem.aadd_many(batch, durable=a.ack == "durable", block=False)
    return m.BatchAdded(results=[added(seqs, a.ack, t.replicas) for seqs in results])


async def _search_batch(t: Target, a: Any) -> m.BatchSearchOut:
    calls = [
        SearchCall(t.mem.conversation(q.user_id, q.conversation_id, t.app), q.query, q.limit, q.min_score, q.mode,
                   q.scope)
        for q in a.searches
    ]  # fmt: skip
    return m.BatchSearchOut(results=[search_out(r) for r in await t.mem.asearch_many(calls)])


ADD_BATCH = Operation(
    "add_batch",
    "Add to many conversations at once (one call per host); each item as one add of messages.",
    "app", "write", "POST", "/messages/batch", _add_batch,
    args=(
        Arg("items", list[BatchAddItem], REQUIRED, "the conversations and their messages",  # type: ignore[valid-type]
            min_length=1, max_length=MAX_BATCH_ITEMS),
        ACK,
    ),
    body="BatchAdd",
    response=m.BatchAdded,
    users=lambda a: [i.user_id for i in a.items],
    tag="batches",
)  # fmt: skip
SEARCH_BATCH = Operation(
    "search_batch",
    "Many searches in one request, each answered as its single search would be.",
    "app", "read", "POST", "/search/batch", _search_batch,
    args=(
        Arg("searches", list[BatchSearchItem], REQUIRED, "the searches, each with its user and conversation",  # type: ignore[valid-type]
            min_length=1, max_length=MAX_BATCH_ITEMS),
    ),
    body="BatchSearch",
    response=m.BatchSearchOut,
    users=lambda a: [q.user_id for q in a.searches],
    tag="batches",
)  # fmt: skip

#: Every operation the server exposes over REST, in the order of the reference.
OPERATIONS: tuple[Operation, ...] = (
    ADD_MESSAGES, LIST_MESSAGES, DELETE_MESSAGES, SEARCH, CONTEXT, GET_WORKING_MEMORY, UPDATE_WORKING_MEMORY,
    CLEAR_WORKING_MEMORY, SUMMARY, CLEAR, DELETE_CONVERSATION, LIST_CONVERSATIONS,
    ADD_ENTRIES, SEARCH_ENTRIES, LIST_ENTRIES, DELETE_ENTRIES, DELETE_MATCHING_ENTRIES, DELETE_PROJECT, DELETE_SESSION,
    DELETE_USER, ADD_BATCH, SEARCH_BATCH,
)  # fmt: skip


# -- the MCP tools: each over one or more of the operations above ---------------------------------
def _hits(out: m.SearchOut) -> dict[str, Any]:
    found = [
        {"id": h.message.id, "seq": h.message.seq, "text": h.message.text, "score": h.score,
         "conversation_id": h.conversation_id}
        for h in out.hits
    ]  # fmt: skip
    return {"results": found, "degraded": out.degraded}


def _memories(out: m.EntrySearchOut) -> dict[str, Any]:
    return {"results": [{"id": r.entry.id, "text": r.entry.text, "score": r.score} for r in out.memories],
            "degraded": out.degraded}  # fmt: skip


def _listed_messages(out: m.MessageList) -> dict[str, Any]:
    return {"memories": [{"id": x.id, "seq": x.seq, "role": x.role, "text": x.text} for x in out.messages]}


def _listed_entries(out: m.EntryList) -> dict[str, Any]:
    return {"memories": [{"id": r.entry.id, "text": r.entry.text, "project_id": r.project_id} for r in out.memories]}


def _deleted(out: m.Counts | DeletionReceipt) -> dict[str, Any]:
    return {"deleted": out.counts}


def _one_message(k: dict[str, Any]) -> dict[str, Any]:
    return {
        **k,
        "messages": [{"role": k["role"], "content": k["content"]}],
        "ack": "durable" if k["durable"] else "buffered",
    }


def _one_entry(k: dict[str, Any]) -> dict[str, Any]:
    return {**k, "entries": [{"content": k["content"]}]}


def _one_id(k: dict[str, Any]) -> dict[str, Any]:
    return {**k, "ids": [k["memory_id"]]}


ADD_MEMORY = Tool(
    "add_memory",
    "Remember something. With conversation_id, append it to that conversation as a message (returns its seq); "
    "without, store it as a long-term memory of the user (returns its id). A full write buffer refuses the add "
    "(429: retry shortly) rather than waiting.",
    (Branch(ADD_MESSAGES, "conversation_id", _one_message), Branch(ADD_ENTRIES, None, _one_entry)),
    extra=(
        Arg("content", str, REQUIRED, "the text to remember", min_length=1, max_length=MAX_TEXT_CHARS),
        Arg("role", Role, "user", "with conversation_id: who said it"),
        Arg("durable", bool, False, "with conversation_id: answer only once the store committed it"),
    ),
    hidden=frozenset({"messages", "ack", "entries"}),
)
SEARCH_MEMORIES = Tool(
    "search_memories",
    "Find the memories relevant to query, best first, each with a score in [0, 1]. With conversation_id, search "
    "that conversation's messages (scope=user: every conversation of the user); else the user's long-term memories "
    "(global ones, plus project_id's when given). Nothing relevant: an empty list.",
    (Branch(SEARCH, "conversation_id", answer=_hits), Branch(SEARCH_ENTRIES, answer=_memories)),
)
GET_CONTEXT = Tool(
    "get_context",
    "What the next prompt of a conversation needs: its recent messages, older ones relevant to query, its summary "
    "and its working memory.",
    (Branch(CONTEXT),),
)
LIST_MEMORIES = Tool(
    "list_memories",
    "List memories, newest last for a conversation's messages, newest first for long-term memories (global ones, "
    "or project_id's alone).",
    (Branch(LIST_MESSAGES, "conversation_id", answer=_listed_messages), Branch(LIST_ENTRIES, answer=_listed_entries)),
    defaults={"limit": 20},  # a glance for a model to read, not the whole history
)
DELETE_MEMORY = Tool(
    "delete_memory",
    "Delete one memory: a message of conversation_id, or a long-term memory of the user.",
    (Branch(DELETE_MESSAGES, "conversation_id", _one_id, _deleted), Branch(DELETE_ENTRIES, None, _one_id, _deleted)),
    extra=(
        Arg("memory_id", str, REQUIRED, "the id search_memories or list_memories gave", min_length=1,
            max_length=MAX_ID_CHARS),
    ),
    hidden=frozenset({"ids"}),
)  # fmt: skip
DELETE_ALL_MEMORIES = Tool(
    "delete_all_memories",
    "Delete many memories at once. With conversation_id: every message of that conversation; with project_id: "
    "every long-term memory of that project; with neither: EVERYTHING memray holds about the user, and the API "
    "keys bound to them (an erasure, with a receipt of what was removed). Cannot be undone.",
    (
        Branch(CLEAR, "conversation_id", answer=_deleted),
        Branch(DELETE_PROJECT, "project_id", answer=_deleted),
        Branch(DELETE_USER, answer=_deleted),
    ),
)

#: Every MCP tool.
TOOLS: tuple[Tool, ...] = (ADD_MEMORY, SEARCH_MEMORIES, GET_CONTEXT, LIST_MEMORIES, DELETE_MEMORY, DELETE_ALL_MEMORIES)
