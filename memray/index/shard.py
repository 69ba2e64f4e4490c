"""`VectorShard`: the vector and lexical indexes of many namespaces, as one actor's core.

Each namespace (a :class:`~memray.index.space.Space`, kept by :class:`~memray.index.spaces.Spaces`)
holds its own :class:`LexicalIndex` and its own vector index, exact while small and HNSW once
large. Every search, alone or in a batch, is scored by :func:`memray.index.scorer.score` (what a
score means: its module docstring and ``docs/scoring.md``).

Vectors are L2-normalised here before indexing and before a query (a zero vector stays zero), so
similarities are cosines whatever the caller sent. Upserting an item with ``vector=None`` updates
its text (lexical index) and recency and leaves any vector it already has in place: the vector of
changed text arrives in a later upsert from the embedder, and until then the old one stays.

Everything in and out is plain picklable data: the conversation host and the service call a
shard through a :class:`~memray.index.client.ShardClient`. Calls are expected one at a time (one
actor); ``HnswIndex`` locks on its own anyway.

Snapshots (:meth:`VectorShard.snapshot`, written and read by :mod:`memray.index.snapshot`) make
a restart cheap; older ones are removed right after, so a dropped user's data leaves the disk
with the next snapshot.

Model versions (re-embedding): a shard answers from exactly one *active* model, while a *staged*
one is built next to it and the *retired* one stays until released (:mod:`memray.index.spaces`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from memray.config import IndexConfig
from memray.errors import ModelMismatchError, ValidationError
from memray.ids import Namespace, as_namespace
from memray.index import snapshot
from memray.index.base import IndexItem, checked_items
from memray.index.fork import copy_snapshot
from memray.index.hnsw import HnswIndex
from memray.index.recompute import Recompute, fill_vectors
from memray.index.scorer import Search, Source, score
from memray.index.search import AppSearch, Mode, NamespaceSearch, Query, ShardReply, ShardSearch, UserSearch
from memray.index.space import Space
from memray.index.spaces import Spaces
from memray.index.wire import ReplyBatch
from memray.models.wire import RefList
from memray.rpc.client import short_read
from memray.store.base import IndexRow
from memray.text import forget_texts

__all__ = ["VectorShard", "Mode", "LEXICAL_VERSION"]

log = logging.getLogger(__name__)

Ref = tuple[Namespace, str]
#: What the lexical indexes hold (2: stemmed content terms, memray.text.index_terms). A snapshot
#: of another version is discarded and rebuilt from the store, like one of another model.
LEXICAL_VERSION = 2


class _Work:
    """Calls, items and thread CPU seconds of one kind of a shard's work (:meth:`VectorShard.work_stats`)."""

    __slots__ = ("calls", "items", "cpu_s")

    def __init__(self) -> None:
        self.calls = self.items = 0
        self.cpu_s = 0.0

    def add(self, items: int, started: float) -> None:
        """One call of ``items``, begun at ``started`` (:func:`time.thread_time`)."""
        self.calls += 1
        self.items += items
        self.cpu_s += time.thread_time() - started


class VectorShard:
    """Many namespaces' indexes; see the module docstring."""

    def __init__(
        self, shard_id: int, path: str, dim: int, model_id: str, config: IndexConfig, recompute: Recompute | None = None
    ) -> None:
        self.shard_id = shard_id
        self.recompute = recompute  # a recomputable model's vectors, missing from the store (:mod:`.recompute`)
        self.path = path
        self.config = config
        self._spaces = Spaces(f"shard {shard_id}", model_id, dim, config)
        self._snap_seq = 0
        self._snap_name: str | None = None
        self._snapshotted: set[int] = set()  # the uids of the last snapshot's spaces
        self._segments: list[snapshot.Segment] = []  # and its segments
        self._snap_model: tuple[str, int] | None = None  # its model and dim
        self._seen: set[Ref] | None = None
        self.discarded_snapshot: str | None = None
        self._upserts, self._searches = _Work(), _Work()

    @property
    def model_id(self) -> str:
        """The active model (its vectors are what searches compare)."""
        return self._spaces.model_id

    @property
    def dim(self) -> int:
        return self._spaces.dim

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Load the latest committed snapshot, if any, and remove leftovers of unfinished or
        superseded ones. A snapshot of another model, dimension or lexical version is discarded
        (indexes are derived data: :meth:`reconcile` refills them from the store)."""
        root = Path(self.path)
        root.mkdir(parents=True, exist_ok=True)
        found = snapshot.committed(root)
        if found is not None:
            name, meta = found
            self._snap_seq = int(meta["seq"])
            lexical = meta.get("lexical", 1)
            if meta["dim"] != self.dim or meta["model_id"] != self.model_id or lexical != LEXICAL_VERSION:
                self.discarded_snapshot = f"{name}: model {meta['model_id']!r} dim {meta['dim']} lexical v{lexical}"
                log.warning("shard %d: discarding snapshot %s", self.shard_id, self.discarded_snapshot)
                snapshot.uncommit(root)
            else:
                self._snap_name, self._snap_model = name, (self.model_id, self.dim)
                self._spaces.next_uid = int(meta["next_uid"])
                for space in snapshot.unpack(root / name, meta, self._spaces.num_threads):
                    self._spaces.attach(space)
                self._segments = snapshot.segments(meta)
        self._snapshotted = self._uids()
        snapshot.remove_stale(root, self._snap_name)

    def close(self) -> None:
        """Snapshot if anything changed since the last one (:meth:`snapshot_if_changed`), so the
        next :meth:`open` starts from here; a shard that changed nothing writes nothing."""
        self.snapshot_if_changed()

    @short_read
    def ping(self) -> bool:
        return True

    def pid(self) -> int:
        """The id of the process holding this shard (the fault tests kill it)."""
        return os.getpid()

    # -- writes ---------------------------------------------------------------------------

    def upsert(self, items: list[IndexItem], model_id: str) -> int:
        """Insert or replace items (all are checked before any is written). Returns how many.
        Vectors of the staged model (see :meth:`stage_begin`) go to the staged indexes."""
        started = time.thread_time()
        try:
            return self._upsert(items, model_id)
        finally:
            self._upserts.add(len(items), started)

    def _upsert(self, items: list[IndexItem], model_id: str) -> int:
        checked = checked_items(items, self._spaces.dim_of(model_id), f"shard {self.shard_id}", model_id)
        staged = model_id != self.model_id
        groups: dict[Namespace, list[tuple[IndexItem, Any]]] = {}
        for item, vec in checked:
            groups.setdefault(item.namespace, []).append((item, vec))
        for ns, group in groups.items():
            self._spaces.upsert(self._spaces.make(ns), group, staged)
        if self._seen is not None:
            self._seen.update((item.namespace, item.doc_id) for item, _ in checked)
        return len(checked)

    def delete(self, refs: list[Ref]) -> int:
        """Remove items by (namespace, doc_id); unknown ones are ignored. Returns how many."""
        removed = 0
        touched: set[Namespace] = set()
        for ns_raw, doc_id in refs:
            ns = Namespace(*ns_raw)
            space = self._spaces.get(ns)
            if space is not None and self._spaces.remove(space, doc_id):
                removed += 1
                touched.add(ns)
        for ns in touched:
            space = self._spaces[ns]
            if not len(space):
                self._spaces.detach(ns)
            else:
                self._spaces.resize(space)
        return removed

    def drop(self, app: str, user_id: str, kind: str | None = None, scope: str | None = None) -> int:
        """Remove whole namespaces of a user (all of them, or those of ``kind`` / ``scope``).
        Returns the items removed. Their files leave the disk with the next :meth:`snapshot`;
        their texts leave this process's memos of texts now (``memray.text.forget_texts``)."""
        removed = 0
        for ns in self._spaces.of_user(app, user_id):
            if (kind is None or ns.kind == kind) and (scope is None or ns.scope == scope):
                removed += len(self._spaces[ns])
                self._spaces.detach(ns)
        if removed:
            forget_texts()
        return removed

    # -- reads ----------------------------------------------------------------------------

    @short_read
    def search(self, namespaces: list[Namespace], query: Query) -> ShardReply:
        """Search the given namespaces together (unknown ones are skipped). ``query.model_id``
        names the query vector's model: the active one (or None), or the one retired by the last
        cutover (answered from its indexes); any other raises ModelMismatchError."""
        return self._one(NamespaceSearch(namespaces, query))

    @short_read
    def search_user(self, app: str, user_id: str, kind: str, query: Query) -> ShardReply:
        """:meth:`search` over every namespace of one user and ``kind`` (all their conversations)."""
        return self._one(UserSearch(app, user_id, kind, query))

    def search_app(self, app: str, kind: str, query: Query) -> ShardReply:
        """:meth:`search` over every namespace of ``app`` and ``kind`` on this shard, through their
        flat view (:mod:`memray.index.flat`; a query of the retired model reads the namespaces)."""
        return self._one(AppSearch(app, kind, query))

    def _one(self, request: ShardSearch) -> ShardReply:
        reply = self.search_many([request])[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    @short_read
    def search_many(self, requests: list[ShardSearch]) -> list[ShardReply | Exception]:
        """Many searches in one call (callers batch the searches of many concurrent agents into
        one actor call), scored together by :func:`memray.index.scorer.score`; a failing one
        returns its error in its place."""
        started = time.thread_time()
        try:
            return self._search_many(requests)
        finally:
            self._searches.add(len(requests), started)

    def _search_many(self, requests: list[ShardSearch]) -> list[ShardReply | Exception]:
        out: list[ShardReply | Exception | None] = [None] * len(requests)
        todo: list[tuple[int, Search, tuple[dict[Namespace, int], dict[Namespace, list[int]]]]] = []
        for i, request in enumerate(requests):
            try:
                search = self._search_of(request)
                todo.append((i, search, self._spaces.watched(search.query.watch)))
            except Exception as exc:
                out[i] = exc
        scored = score([search for _, search, _ in todo], self.config.neighbour_weight)
        for (i, _, watched), (hits, stats) in zip(todo, scored):
            out[i] = ShardReply(hits, stats, *watched)
        return ReplyBatch(cast(list[ShardReply | Exception], out))

    def _search_of(self, request: ShardSearch) -> Search:
        """``request`` checked, with the sources it reads."""
        if not isinstance(request, (NamespaceSearch, UserSearch, AppSearch)):
            raise ValidationError("request", request, "must be a NamespaceSearch, UserSearch or AppSearch")
        query, retired = self._checked(request.query)
        spaces = self._spaces
        sources: list[Source]
        if isinstance(request, NamespaceSearch):
            wanted = dict.fromkeys(as_namespace(ns) for ns in request.namespaces)
            sources = [spaces[ns] for ns in wanted if ns in spaces]
        elif isinstance(request, UserSearch):
            sources = [spaces[ns] for ns in spaces.of_user(request.app, request.user_id) if ns.kind == request.kind]
        else:
            app, kind = request.app, request.kind
            mine = (space for ns, space in spaces.items() if ns.app == app and ns.kind == kind)
            sources = list(mine) if retired else [spaces.flats.view(app, kind, mine)]
        return Search(query, sources, retired)

    def _checked(self, query: Query) -> tuple[Query, bool]:
        """``query`` checked against the shard's model versions, with its vector as float32 (None
        in lexical mode), and whether it asks the retired model. Raises ValidationError for an
        unknown mode, ModelMismatchError for another model or dim."""
        query = query if type(query) is Query else Query(*query)
        if query.mode not in ("vector", "lexical", "hybrid"):
            raise ValidationError("mode", query.mode, "must be 'vector', 'lexical' or 'hybrid'")
        spaces = self._spaces
        retired = query.model_id is not None and query.model_id != spaces.model_id
        if retired and (spaces.retired is None or spaces.retired[0] != query.model_id):
            raise ModelMismatchError(
                f"query embedded with model {query.model_id!r} but shard {self.shard_id} indexes "
                f"{spaces.model_id!r}; embed the query with the index's model (reopen memray)"
            )
        if query.vector is None or query.mode == "lexical":
            return (query if query.vector is None else query._replace(vector=None)), retired
        model, dim = spaces.retired if retired and spaces.retired else (spaces.model_id, spaces.dim)
        vector = np.asarray(query.vector, dtype=np.float32)
        if vector.size != dim:
            raise ModelMismatchError(
                f"query vector of dim {vector.size} does not fit shard {self.shard_id} "
                f"(model {model!r}, dim {dim}); embed the query with the index's model"
            )
        return (query if vector is query.vector else query._replace(vector=vector)), retired

    def inventory(self) -> list[Ref]:
        """Every (namespace, doc_id) held."""
        return [(ns, doc) for ns, space in self._spaces.items() for doc in space.labels]

    def missing_from(self, refs: list[Ref], vectors: bool = False) -> list[Ref]:
        """The refs of ``refs`` this shard does not hold (with ``vectors``: holds no vector of the
        active model for)."""
        out = RefList()
        for ns_raw, doc in refs:
            ns = as_namespace(ns_raw)
            space = self._spaces.get(ns)
            label = None if space is None else space.labels.get(doc)
            if space is None or label is None or (vectors and label not in space.vectors):
                out.append((ns, doc))
        return out

    def count_items(self, namespace: Namespace, doc_ids: list[str] | None = None) -> int:
        """Items held in ``namespace`` (only those of ``doc_ids`` when given): a deletion check."""
        space = self._spaces.get(Namespace(*namespace))
        if space is None:
            return 0
        return len(space) if doc_ids is None else sum(1 for d in doc_ids if d in space.labels)

    def count_user(self, app: str, user_id: str) -> int:
        """Items of the user left on this shard (0 after :meth:`drop`)."""
        return sum(len(self._spaces[ns]) for ns in self._spaces.of_user(app, user_id))

    def work_stats(self) -> dict[str, float]:
        """Since the shard opened: ``upserts`` (calls), ``upserted`` (items) and ``upsert_cpu_s``,
        ``searches`` (calls), ``searched`` (requests) and ``search_cpu_s``; the CPU seconds of the
        thread that ran them (in Ray mode the actor's), which a busy machine's waiting for a
        core does not inflate. What a live shard costs an item or a query, from outside
        (``benchmarks/user_tick.py`` reports it)."""
        up, search = self._upserts, self._searches
        return {
            "upserts": up.calls,
            "upserted": up.items,
            "upsert_cpu_s": up.cpu_s,
            "searches": search.calls,
            "searched": search.items,
            "search_cpu_s": search.cpu_s,
        }

    def stats(self) -> dict[str, Any]:
        hnsw = [s.vectors for s in self._spaces.values() if isinstance(s.vectors, HnswIndex)]
        return {
            "shard_id": self.shard_id,
            "model_id": self.model_id,
            "dim": self.dim,
            "staged_model_id": self._spaces.stage[0] if self._spaces.stage else None,
            "staged_vectors": sum(len(s.staged) for s in self._spaces.values() if s.staged is not None),
            "retired_model_id": self._spaces.retired[0] if self._spaces.retired else None,
            "items": sum(len(s) for s in self._spaces.values()),
            "vectors": sum(len(s.vectors) for s in self._spaces.values()),
            "namespaces": len(self._spaces),
            "hnsw_namespaces": len(hnsw),
            "tombstones": sum(index.tombstones for index in hnsw),
            "compactions": sum(index.compactions for index in hnsw),
            "snapshot": self._snap_name,
        }

    # -- model versions (re-embedding) ----------------------------------------------------

    def stage_begin(self, model_id: str, dim: int) -> bool:
        """Open an empty staged index set for ``model_id`` (replacing any staged one). Returns
        False and does nothing if ``model_id`` is already active (a finished cutover)."""
        return self._spaces.stage_begin(model_id, dim)

    def stage_upsert(self, rows: list[IndexRow], model_id: str) -> int:
        """Add the staged model's vectors of ``rows`` (from ``store.scan_index_rows``). An item the
        shard does not hold yet is added with its text and recency. Returns how many."""
        return self._spaces.stage_rows(rows, model_id)

    def cutover(self, model_id: str) -> bool:
        """Make the staged ``model_id`` active in one step (searches see the old set or the new
        one, never a mix); the old set is kept as retired until :meth:`retire_release`. Returns
        False if already active. Pointer swaps only (no I/O: the caller snapshots afterwards).
        Durability: none until the next :meth:`snapshot`; a shard restarted before it rebuilds
        from the store with the recorded model (``<root>/model.json``)."""
        return self._spaces.cutover(model_id)

    def stage_abort(self) -> None:
        """Drop the staged index set, if any."""
        self._spaces.stage_abort()

    def retire_release(self) -> None:
        """Free the indexes of the model replaced by the last cutover."""
        self._spaces.retire_release()

    # -- recovery -------------------------------------------------------------------------

    def begin_reconcile(self) -> None:
        """Start a recovery pass: every item upserted or reconciled until :meth:`end_reconcile`
        is remembered as present in the store."""
        self._seen = set()

    def reconcile(self, rows: list[IndexRow], force: bool = False) -> int:
        """Upsert the rows (from ``store.scan_index_rows``) this shard lacks or holds stale: an
        unknown item, a missing vector, another recency, other columns or other text. (A changed
        vector with unchanged text and recency is not detected.) A stale item's kept JSON goes:
        it describes the other version (hits then read the item from the store). ``force``
        treats every row as stale (a fork's items written after its copy). Returns how many were
        upserted. A missing vector of a recomputable model is recomputed from the text."""
        todo = []
        recomputes = self.recompute is not None and self.recompute.model_id == self.model_id
        for row in rows:
            ns = Namespace(*row.namespace)
            if self._seen is not None:
                self._seen.add((ns, row.doc_id))
            if force or self._spaces.stale(ns, row, row.vector is not None or (recomputes and bool(row.text))):
                space = self._spaces.get(ns)
                if space is not None:
                    space.payload.pop(row.doc_id, None)
                todo.append(row)
        items = [
            IndexItem(Namespace(*r.namespace), r.doc_id, r.vector, r.text, r.recency, columns=r.columns)
            for r in fill_vectors(todo, self.recompute, self.model_id)
        ]
        return self.upsert(items, self.model_id) if items else 0

    def end_reconcile(self) -> int:
        """Finish a recovery pass: delete every item not seen since :meth:`begin_reconcile`
        (it is no longer in the store). Returns how many were deleted."""
        seen, self._seen = self._seen or set(), None
        return self.delete([ref for ref in self.inventory() if ref not in seen])

    # -- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> None:
        """Write a snapshot (see :func:`memray.index.snapshot.write`), then remove every older
        one. A **delta** when :meth:`_appends_only`: the last snapshot's files are linked and only
        the items appended since are written (in a simulation every conversation grows between
        two snapshots, and rewriting every item made each one cost the whole history: 120,000
        items 0.67 s, ``python -m benchmarks.snapshot_micro``); else every item. Durable when it
        returns; a crash at any point leaves the previous snapshot or the new one loadable."""
        root = Path(self.path)
        self._snap_seq += 1
        meta = {
            "shard_id": self.shard_id,
            "dim": self.dim,
            "model_id": self.model_id,
            "seq": self._snap_seq,
            "next_uid": self._spaces.next_uid,
            "lexical": LEXICAL_VERSION,
        }
        spaces = list(self._spaces.values())
        kept = self._segments if self._appends_only(spaces) else None
        self._snap_name, self._segments = snapshot.write(root, self._snap_seq, self._snap_name, spaces, meta, kept)
        self._snapshotted, self._snap_model = self._uids(), (self.model_id, self.dim)
        for space in spaces:
            space.snapshotted()
        snapshot.remove_stale(root, self._snap_name)

    def _appends_only(self, spaces: list[Space]) -> bool:
        """Whether the last snapshot plus the items appended since is the whole state: it is of
        this model and holds no legacy segment, every namespace it held is still here (a dropped
        one's data must leave the disk), none changed in place (a replaced or deleted item, a
        promotion, a cutover), and it has fewer than ``MAX_SEGMENTS`` segments."""
        return (
            self._snap_name is not None
            and self._snap_model == (self.model_id, self.dim)
            and len(self._segments) < snapshot.MAX_SEGMENTS
            and all(segment.rows >= 0 for segment in self._segments)
            and self._snapshotted <= self._uids()
            and not any(space.rewritten for space in spaces)
        )

    def _uids(self) -> set[int]:
        """The uids of the spaces held now (a namespace dropped and made again has a new one)."""
        return {space.uid for space in self._spaces.values()}

    def snapshot_if_changed(self) -> bool:
        """:meth:`snapshot` if a namespace changed, appeared or went since the last one (same
        durability guarantee); True if it wrote one."""
        same_model = self._snap_model in (None, (self.model_id, self.dim))  # (None: none was written)
        if same_model and self._uids() == self._snapshotted and not any(s.dirty for s in self._spaces.values()):
            return False
        self.snapshot()
        return True

    def fork_to(self, dst: str) -> int:
        """Snapshot (if anything changed since the last one), then link that snapshot into the new
        shard folder ``dst`` of a fork, marked for reconciliation (:mod:`memray.index.fork`).
        Returns the files linked."""
        self.snapshot_if_changed()
        return copy_snapshot(self.path, self._snap_name, dst)
