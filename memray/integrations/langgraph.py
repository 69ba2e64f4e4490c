"""LangGraph: :class:`MemrayStore`, a ``BaseStore`` over memray's long-term service (the
``[langgraph]`` extra)::

    from memray.integrations.langgraph import MemrayStore

    store = MemrayStore(mem, user_label=1)       # namespaces like ("memories", user_id)
    graph = builder.compile(store=store)         # nodes get it as `store` / runtime.store

Scopes
------
A namespace tuple maps onto memray's scopes deterministically, with nothing built by joining
strings, so no two namespaces (or a namespace and a prefix of another) can meet:

* app: the store's ``app`` (default ``"langgraph"``; keep it apart from apps whose global
  entries you search elsewhere);
* user: the namespace label at position ``user_label`` (``("memories", "ada")`` with
  ``user_label=1`` is user ``"ada"``), or the fixed ``user_id`` when ``user_label`` is None. With
  a user label, ``mem.delete_user(app=..., user_id="ada")`` erases every item of Ada's
  namespaces, verifiably, and her items live on her shard. A namespace without that label is
  rejected (``InvalidNamespaceError``);
* project: the whole namespace as a compact JSON array (``["memories","ada"]``), at most 256
  characters;
* entry id: a SHA-256 of the JSON ``[namespace, key]``; the key, namespace, value and both
  timestamps are kept in the entry's ``metadata["langgraph"]``.

Operations
----------
``batch`` / ``abatch`` run the ops in order (consecutive reads together, consecutive writes as
one write per user and namespace, a repeated key in one run: the last put wins), so a read sees
every write before it in the batch.

* ``PutOp``: the value is stored with the text of its index fields (``index=`` of the op, else
  the store's ``fields``, default ``["$"]``: the whole value as JSON; fields are LangGraph paths,
  read with LangGraph's own ``get_text_at_path``) as the entry's content, which memray indexes
  lexically and by vector once it is durable. ``index=False`` stores the item unindexed
  (reachable by get, listing and filters, never by a query). ``value=None`` deletes the item and
  its vectors. ``created_at`` survives updates.
* ``GetOp``: the item, or None.
* ``SearchOp`` with a ``query`` (that has words): memray's retrieval (hybrid by default) over
  every namespace under the prefix, best first, ``score`` = memray's score; only relevant items
  come back (LangGraph's in-memory store ranks every item, relevant or not). ``filter`` (exact
  values, nested objects, ``$eq $ne $gt $gte $lt $lte``) applies to the ranked items, then
  ``offset``/``limit``. Without a query: the items under the prefix, newest update first (ties in
  a fixed order, so pages never overlap), filtered and paged; ``score`` None.
* ``ListNamespacesOp``: namespaces holding items, prefix/suffix conditions with ``"*"``
  wildcards, ``max_depth`` truncation, sorted, paged.

Not offered: TTL (``supports_ttl`` is False, so LangGraph refuses ``ttl=``): an item's expiry
refreshed on every read would rewrite and re-embed it here; delete items, or the user, instead.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from memray.errors import InvalidIdError, MissingExtraError
from memray.facade.memory import Memory
from memray.ids import validate_id
from memray.models import MemoryEntry, MemoryResult
from memray.service.longterm import MemoryService
from memray.text import tokenize

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
        tokenize_path,
        validate_op_namespace,
    )
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test in a subprocess
    raise MissingExtraError("langgraph", "langgraph") from exc

__all__ = ["MemrayStore"]

Namespace = tuple[str, ...]
_MAX_PROJECT_CHARS = 256


class MemrayStore(BaseStore):
    """LangGraph's ``BaseStore`` backed by ``memory`` (a :class:`memray.Memory`, either mode).

    ``app``: the memray app of every item. ``user_label``: the position of the namespace label
    that names the memray user (None: every item belongs to ``user_id``). ``fields``: the value
    paths indexed for search when a put does not say (LangGraph's ``IndexConfig["fields"]``).
    """

    supports_ttl: bool = False

    def __init__(
        self,
        memory: Memory,
        app: str = "langgraph",
        user_label: int | None = None,
        user_id: str = "langgraph",
        fields: Sequence[str] = ("$",),
    ) -> None:
        self._mem = memory
        self.app = validate_id("app", app)
        self.user_label = user_label
        self.user_id = validate_id("user_id", user_id)
        self.fields = list(fields)

    @property
    def _core(self) -> MemoryService:
        return self._mem.internals.service

    # -- the two entry points ---------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._mem.internals.run(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._mem.internals.arun(self._batch(list(ops)))

    async def _batch(self, ops: list[Op]) -> list[Result]:
        for op in ops:
            _check(op)
        results: list[Result] = [None] * len(ops)
        start = 0
        while start < len(ops):  # runs of reads or of writes, in order
            writing = isinstance(ops[start], PutOp)
            end = start
            while end < len(ops) and isinstance(ops[end], PutOp) == writing:
                end += 1
            if writing:
                await self._write([op for op in ops[start:end] if isinstance(op, PutOp)])
            else:
                done = await asyncio.gather(*(self._read(op) for op in ops[start:end]))
                results[start:end] = done
            start = end
        return results

    async def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return await self._get(op)
        if isinstance(op, SearchOp):
            return await self._search(op)
        if isinstance(op, ListNamespacesOp):
            return await self._list_namespaces(op)
        raise ValueError(f"unknown operation: {type(op).__name__}")

    # -- scopes -----------------------------------------------------------------------------
    def _user_of(self, namespace: Namespace) -> str:
        if self.user_label is None:
            return self.user_id
        if len(namespace) <= self.user_label:
            raise InvalidNamespaceError(
                f"namespace {namespace} has no label at position {self.user_label}, which names the memray "
                f"user of this store (user_label={self.user_label})"
            )
        return validate_id("user_id", namespace[self.user_label])

    async def _scopes(self, prefix: Namespace = ()) -> list[tuple[str, Namespace]]:
        """(user, namespace) of every namespace holding items under ``prefix``, sorted."""
        if self.user_label is None:
            user: str | None = self.user_id
        else:
            user = prefix[self.user_label] if len(prefix) > self.user_label else None
        found = await self._core.list_projects(self.app, user)
        scopes = [(u, ns) for u, p in found if (ns := _decode(p)) is not None and ns[: len(prefix)] == prefix]
        return sorted(scopes, key=lambda s: s[1])

    # -- writes -----------------------------------------------------------------------------
    async def _write(self, ops: list[PutOp]) -> None:
        last = {(op.namespace, op.key): op for op in ops}  # the last put of a key wins
        by_user: dict[str, list[PutOp]] = {}
        for op in last.values():
            by_user.setdefault(self._user_of(op.namespace), []).append(op)
        await asyncio.gather(*(self._write_user(user, user_ops) for user, user_ops in by_user.items()))

    async def _write_user(self, user: str, ops: list[PutOp]) -> None:
        ids = [_entry_id(op.namespace, op.key) for op in ops]
        before = {r.entry.id: r for r in await self._core.get_entries(self.app, user, ids)}
        gone = [i for op, i in zip(ops, ids) if op.value is None and i in before]
        if gone:
            await self._core.delete(self.app, user, ids=gone)
        now = datetime.now(UTC).timestamp()
        by_project: dict[str, list[MemoryEntry]] = {}
        for op, entry_id in zip(ops, ids):
            if op.value is None:
                continue
            old = before.get(entry_id)
            created = _meta(old)["created_at"] if old is not None else now
            by_project.setdefault(_encode(op.namespace), []).append(self._entry(op, entry_id, created, now))
        for project, entries in by_project.items():
            await self._core.add(self.app, user, entries, project_id=project)

    def _entry(self, op: PutOp, entry_id: str, created: float, updated: float) -> MemoryEntry:
        value = dict(op.value or {})
        fields = [] if op.index is False else (op.index if op.index is not None else self.fields)
        texts = [t for f in fields for t in get_text_at_path(value, f if f == "$" else tokenize_path(f))]
        meta = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": value,
            "created_at": created,
            "updated_at": updated,
        }
        return MemoryEntry(
            id=entry_id, content="\n".join(texts), author="langgraph", timestamp=updated, metadata={"langgraph": meta}
        )

    # -- reads ------------------------------------------------------------------------------
    async def _get(self, op: GetOp) -> Item | None:
        if self.user_label is not None and len(op.namespace) <= self.user_label:
            return None  # no item can live in a namespace without the user label
        found = await self._core.get_entries(self.app, self._user_of(op.namespace), [_entry_id(op.namespace, op.key)])
        items = [_item(r, Item) for r in found if _is(r, op.namespace, op.key)]
        return items[0] if items else None

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit <= 0:
            return []
        scopes = await self._scopes(op.namespace_prefix)
        if op.query and tokenize(op.query):
            return await self._ranked(op, scopes)
        per_scope = None if op.filter else op.offset + op.limit  # newest first per scope: enough to merge
        listed = await asyncio.gather(
            *(self._core.list_entries(self.app, u, _encode(ns), per_scope) for u, ns in scopes)
        )
        rows = [r for part in listed for r in part if _meta(r) and _passes(_meta(r)["value"], op.filter)]
        rows.sort(key=lambda r: (r.entry.timestamp, r.entry.id), reverse=True)  # the store's own order
        return [_item(r, SearchItem) for r in rows[op.offset : op.offset + op.limit]]

    async def _ranked(self, op: SearchOp, scopes: list[tuple[str, Namespace]]) -> list[SearchItem]:
        assert op.query is not None
        by_user: dict[str, list[str | None]] = {}
        for user, ns in scopes:
            by_user.setdefault(user, []).append(_encode(ns))
        want = op.offset + op.limit
        k = max(want, 1) * (4 if op.filter else 1)
        while True:  # widen the search until the filter leaves enough, or nothing more is found
            answers = await asyncio.gather(
                *(
                    self._core.search_projects(self.app, user, op.query, projects, limit=k)
                    for user, projects in by_user.items()
                )
            )
            hits = sorted((r for a in answers for r in a.memories), key=lambda r: -r.score)
            kept = [r for r in hits if _meta(r) and _passes(_meta(r)["value"], op.filter)]
            if len(kept) >= want or all(len(a.memories) < k for a in answers):
                break
            k *= 4
        return [_item(r, SearchItem, r.score) for r in kept[op.offset : want]]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        names = [ns for _, ns in await self._scopes()]
        names = [ns for ns in names if all(_matches(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            names = [ns[: op.max_depth] for ns in names]
        return sorted(set(names))[op.offset : op.offset + op.limit]


# -- encoding -------------------------------------------------------------------------------------
def _check(op: Op) -> None:
    validate_op_namespace(op)
    key = getattr(op, "key", "")  # a get's, put's or delete's item key (hashed into the entry id: any str)
    if not isinstance(key, str):
        raise InvalidIdError("key", key, f"must be a string, got {type(key).__name__}")
    if isinstance(op, PutOp):
        if not op.namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        if op.ttl is not None:
            raise NotImplementedError("TTL is not supported by MemrayStore; set ttl=None (delete items instead)")
        _encode(op.namespace)


def _encode(namespace: Namespace) -> str:
    """The namespace as a memray project id: a compact JSON array (injective, no control characters)."""
    encoded = json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))
    if len(encoded) > _MAX_PROJECT_CHARS:
        raise InvalidNamespaceError(
            f"namespace {namespace} encodes to {len(encoded)} characters; memray allows {_MAX_PROJECT_CHARS} "
            "(shorten its labels)"
        )
    return encoded


def _decode(project_id: str) -> Namespace | None:
    """The namespace a project id encodes; None for a project this store did not write."""
    try:
        labels = json.loads(project_id)
    except ValueError:
        return None
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        return None
    return tuple(labels)


def _entry_id(namespace: Namespace, key: str) -> str:
    digest = hashlib.sha256(json.dumps([list(namespace), key], ensure_ascii=False).encode("utf-8"))
    return "lg-" + digest.hexdigest()[:40]


def _meta(result: MemoryResult | None) -> dict[str, Any]:
    meta = result.entry.metadata.get("langgraph") if result is not None else None
    return meta if isinstance(meta, dict) else {}


def _is(result: MemoryResult, namespace: Namespace, key: str) -> bool:
    meta = _meta(result)
    return tuple(meta.get("namespace", ())) == namespace and meta.get("key") == key


def _item(result: MemoryResult, cls: type[Any], score: float | None = None) -> Any:
    meta = _meta(result)
    fields = dict(
        namespace=tuple(meta["namespace"]),
        key=meta["key"],
        value=meta["value"],
        created_at=datetime.fromtimestamp(meta["created_at"], tz=UTC),
        updated_at=datetime.fromtimestamp(meta["updated_at"], tz=UTC),
    )
    return cls(**fields, score=score) if cls is SearchItem else cls(**fields)


# -- filters and namespace conditions (LangGraph's documented semantics) ----------------------------
def _passes(value: Any, filter: dict[str, Any] | None) -> bool:  # noqa: A002 - LangGraph's name
    return not filter or (isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in filter.items()))


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted))
        )
    return bool(actual == wanted)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(actual == operand)
    if op == "$ne":
        return bool(actual != operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(actual), float(operand)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _matches(condition: MatchCondition, namespace: Namespace) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise ValueError(f"unsupported match type {condition.match_type!r}: use prefix or suffix")
    return all(p == "*" or n == p for n, p in pairs)
