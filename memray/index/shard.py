"""`VectorShard`: the vector and lexical indexes of many namespaces, as one actor's core.

Each namespace (a :class:`~memray.index.space.Space`) holds its own :class:`LexicalIndex` and its
own vector index: an :class:`ExactIndex` while it has fewer than ``IndexConfig.exact_threshold``
vectors, promoted to an :class:`HnswIndex` once it reaches it, and demoted back to exact when
deletes bring it under half the threshold (the hysteresis stops flapping). Searches are scored by
:mod:`memray.index.search` (what a score means: :mod:`memray.index.fusion`).

Vectors are L2-normalised here before indexing and before a query (a zero vector stays zero), so
similarities are cosines whatever the caller sent. Upserting an item with ``vector=None`` updates
its text (lexical index) and recency and leaves any vector it already has in place: the vector of
changed text arrives in a later upsert from the embedder, and until then the old one stays.

Everything in and out is plain picklable data: the conversation host and the service call a
shard through a :class:`~memray.index.client.ShardClient`. Calls are expected one at a time (one actor); ``HnswIndex`` locks
on its own anyway.

Snapshots (:meth:`VectorShard.snapshot`) are directories ``snap-<n>`` under ``path``, committed by
atomically rewriting ``CURRENT``; older snapshot folders are removed right after, so a dropped
user's data leaves the disk with the next snapshot. A snapshot packs every namespace's items into
one ``items.parquet`` and the vectors of all exact (small) namespaces into one ``vectors.npy``:
a shard holds thousands of small conversation namespaces, and a folder per namespace made a
snapshot of 10k conversations take seconds of fsyncs. HNSW namespaces keep their own folder,
hard-linked from the previous snapshot when unchanged.

Model versions (re-embedding, see ``jobs/backfill_embeddings.py``): a shard answers from exactly
one *active* model. :meth:`VectorShard.stage_begin` opens an empty *staged* vector index per
namespace for a new model next to the active one; :meth:`VectorShard.stage_upsert` (rows from the
store) and :meth:`VectorShard.upsert` with the staged model's id fill it while searches keep using
the active one; :meth:`VectorShard.cutover` swaps it in in one step (one actor call) and keeps the
old model's indexes as *retired*, so a query embedded with the old model (a driver that has not
switched yet) is answered from the old indexes, never from a mix; :meth:`VectorShard.retire_release`
frees them. Labels, texts, recency and payloads are shared by every model version of a namespace.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from memray.config import IndexConfig
from memray.errors import ModelMismatchError, ValidationError
from memray.index.base import IndexItem, atomic_save_npy, atomic_write_json, fsync_dir, read_json
from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex
from memray.index.lexical import Bm25Stats
from memray.index.search import (
    AppSearch, Mode, NamespaceSearch, Query, ShardReply, ShardSearch, UserSearch, search_spaces,
)
from memray.index.space import Space, normalise
from memray.store.base import IndexRow
from memray.ids import Namespace
from memray.text import index_terms

__all__ = ["VectorShard", "Mode", "LEXICAL_VERSION"]

log = logging.getLogger(__name__)

Ref = tuple[Namespace, str]
#: What the lexical indexes hold (2: stemmed content terms, memray.text.index_terms). A snapshot
#: of another version is discarded and rebuilt from the store, like one of another model.
LEXICAL_VERSION = 2
_CURRENT = "CURRENT"


def _link_tree(src: Path, dst: Path) -> None:
    """Recreate ``src`` at ``dst`` with hard links (copies where links are not supported).
    Safe because snapshot files are never modified after they are written."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(src):
        try:
            os.link(src / name, dst / name)
        except OSError:
            shutil.copy2(src / name, dst / name)


_ITEM_SCHEMA = pa.schema([
    ("uid", pa.int64()), ("doc_id", pa.string()), ("label", pa.int64()), ("recency", pa.float64()),
    ("payload", pa.string()), ("terms", pa.string()), ("vector_row", pa.int64()),
])


def _pack(spaces: list[Space], directory: Path, previous: Path | None, dim: int) -> list[list[Any]]:
    """Write every namespace into ``directory``: one ``items.parquet`` row per item, the vectors
    of exact namespaces in one ``vectors.npy``, each HNSW namespace in ``hnsw-<uid>/`` (hard-linked
    from ``previous`` when unchanged). Returns the namespace table for ``shard.json``.
    Thousands of small namespaces cost two files, not thousands of folders."""
    cols: dict[str, list[Any]] = {name: [] for name in _ITEM_SCHEMA.names}
    blocks: list[np.ndarray] = []
    rows = 0
    table = []
    for space in spaces:
        kind = "hnsw" if isinstance(space.vectors, HnswIndex) else "exact"
        table.append([*space.namespace, space.uid, space.next_label, kind])
        where: dict[int, int] = {}
        if kind == "hnsw":
            sub = f"hnsw-{space.uid}"
            if not space.dirty and previous is not None and (previous / sub).is_dir():
                _link_tree(previous / sub, directory / sub)
            else:
                space.vectors.save(str(directory / sub))
        else:
            labels, vectors = space.vectors.items()
            if len(labels):
                blocks.append(vectors)
                where = {int(label): rows + i for i, label in enumerate(labels.tolist())}
                rows += len(labels)
        for doc, label in space.labels.items():
            cols["uid"].append(space.uid)
            cols["doc_id"].append(doc)
            cols["label"].append(label)
            cols["recency"].append(space.recency[doc])
            cols["payload"].append(space.payload.get(doc, ""))
            cols["terms"].append(json.dumps(space.lexical.terms(doc) or {}, ensure_ascii=False))
            cols["vector_row"].append(where.get(label, -1))
    # Plain encoding: a raw byte scan of the snapshot (erasure verification) sees every id and text.
    pq.write_table(pa.table(cols, schema=_ITEM_SCHEMA), directory / "items.parquet", compression="none", use_dictionary=False)
    matrix = np.concatenate(blocks) if blocks else np.zeros((0, dim), dtype=np.float32)
    atomic_save_npy(directory / "vectors.npy", matrix)
    with open(directory / "items.parquet", "rb+") as f:
        os.fsync(f.fileno())
    return table


def _unpack(directory: Path, table: list[list[Any]], dim: int, num_threads: int) -> list[Space]:
    spaces: dict[int, Space] = {}
    for app, user_id, kind_, scope, uid, next_label, kind in table:
        space = Space(Namespace(app, user_id, kind_, scope), int(uid), dim)
        space.next_label = int(next_label)
        if kind == "hnsw":
            space.vectors = HnswIndex.load(str(directory / f"hnsw-{uid}"), num_threads=num_threads)
        spaces[int(uid)] = space
    items = pq.read_table(directory / "items.parquet").to_pydict()
    matrix = np.load(directory / "vectors.npy", allow_pickle=False)
    exact: dict[int, tuple[list[int], list[int]]] = {}
    for uid, doc, label, recency, payload, terms, row in zip(
        items["uid"], items["doc_id"], items["label"], items["recency"], items["payload"], items["terms"], items["vector_row"]
    ):
        space = spaces[uid]
        space.labels[doc] = label
        space.docs[label] = doc
        space.set_recency(doc, recency)
        if payload:
            space.payload[doc] = payload
        space.lexical.add_terms(doc, json.loads(terms))
        if row >= 0:
            pair = exact.setdefault(uid, ([], []))
            pair[0].append(label)
            pair[1].append(row)
    for uid, (labels, rows) in exact.items():
        spaces[uid].vectors.add(np.array(labels, dtype=np.int64), matrix[rows])
    for space in spaces.values():
        space.dirty = False
    return list(spaces.values())


class VectorShard:
    """Many namespaces' indexes; see the module docstring."""

    def __init__(self, shard_id: int, path: str, dim: int, model_id: str, config: IndexConfig) -> None:
        self.shard_id = shard_id
        self.path = path
        self.dim = dim
        self.model_id = model_id
        self.config = config
        self.num_threads = 1
        self._spaces: dict[Namespace, Space] = {}
        self._by_user: dict[tuple[str, str], set[Namespace]] = {}
        self._next_uid = 0
        self._snap_seq = 0
        self._snap_name: str | None = None
        self._seen: set[Ref] | None = None
        self.discarded_snapshot: str | None = None
        self._stage: tuple[str, int] | None = None  # (model_id, dim) being built
        self._retired: tuple[str, int] | None = None  # (model_id, dim) replaced by the last cutover

    # -- lifecycle ------------------------------------------------------------------------

    def open(self) -> None:
        """Load the latest committed snapshot, if any, and remove leftovers of unfinished or
        superseded ones. A snapshot of another model, dimension or lexical version is discarded
        (indexes are derived data: :meth:`reconcile` refills them from the store)."""
        root = Path(self.path)
        root.mkdir(parents=True, exist_ok=True)
        current = root / _CURRENT
        if current.exists():
            name = str(read_json(current)["snapshot"])
            meta = read_json(root / name / "shard.json")
            self._snap_seq = int(meta["seq"])
            lexical = meta.get("lexical", 1)
            if meta["dim"] != self.dim or meta["model_id"] != self.model_id or lexical != LEXICAL_VERSION:
                self.discarded_snapshot = f"{name}: model {meta['model_id']!r} dim {meta['dim']} lexical v{lexical}"
                log.warning("shard %d: discarding snapshot %s", self.shard_id, self.discarded_snapshot)
                current.unlink()
            else:
                self._snap_name = name
                self._next_uid = int(meta["next_uid"])
                for space in _unpack(root / name, meta["spaces"], self.dim, self.num_threads):
                    self._attach(space)
        self._remove_stale(root)

    def close(self) -> None:
        """Snapshot, so the next :meth:`open` starts from here."""
        self.snapshot()

    def ping(self) -> bool:
        return True

    def pid(self) -> int:
        """The id of the process holding this shard (the fault tests kill it)."""
        return os.getpid()

    def _attach(self, space: Space) -> None:
        self._spaces[space.namespace] = space
        ns = space.namespace
        self._by_user.setdefault((ns.app, ns.user_id), set()).add(ns)

    def _detach(self, ns: Namespace) -> None:
        del self._spaces[ns]
        user = self._by_user[(ns.app, ns.user_id)]
        user.discard(ns)
        if not user:
            del self._by_user[(ns.app, ns.user_id)]

    # -- writes ---------------------------------------------------------------------------

    def _check(self, items: list[IndexItem], model_id: str) -> list[tuple[IndexItem, Any]]:
        dim = self._target_dim(model_id)
        checked = []
        for item in items:
            ns = Namespace(*item.namespace)
            if not isinstance(item.doc_id, str) or not item.doc_id:
                raise ValidationError("doc_id", item.doc_id, "must be a non-empty string")
            vec = None
            if item.vector is not None:
                vec = np.asarray(item.vector, dtype=np.float32).reshape(-1)
                if vec.shape[0] != dim:
                    raise ModelMismatchError(
                        f"vector of dim {vec.shape[0]} for doc_id={item.doc_id!r} does not fit shard "
                        f"{self.shard_id} (model {model_id!r}, dim {dim}); re-embed with "
                        "the index's model (run the backfill job)"
                    )
            checked.append((IndexItem(ns, item.doc_id, vec, item.text, float(item.recency), item.payload, int(item.stamp)), vec))
        return checked

    def _target_dim(self, model_id: str) -> int:
        """The dim of ``model_id``'s index set here: the active one, or the staged one."""
        if model_id == self.model_id:
            return self.dim
        if self._stage is not None and model_id == self._stage[0]:
            return self._stage[1]
        raise ModelMismatchError(
            f"shard {self.shard_id} indexes model {self.model_id!r}, got vectors of {model_id!r}; "
            "re-embed with the index's model (run the backfill job)"
        )

    def _space(self, ns: Namespace) -> Space:
        space = self._spaces.get(ns)
        if space is None:
            space = Space(ns, self._next_uid, self.dim)
            if self._stage is not None:
                space.staged = ExactIndex(self._stage[1])
            self._next_uid += 1
            self._attach(space)
        return space

    def upsert(self, items: list[IndexItem], model_id: str) -> int:
        """Insert or replace items (all are checked before any is written). Returns how many.
        Vectors of the staged model (see :meth:`stage_begin`) go to the staged indexes."""
        checked = self._check(items, model_id)
        staged = model_id != self.model_id
        groups: dict[Namespace, list[tuple[IndexItem, Any]]] = {}
        for item, vec in checked:
            groups.setdefault(item.namespace, []).append((item, vec))
        for ns, group in groups.items():
            self._upsert_space(self._space(ns), group, staged)
        if self._seen is not None:
            self._seen.update((item.namespace, item.doc_id) for item, _ in checked)
        return len(checked)

    def _upsert_space(self, space: Space, group: list[tuple[IndexItem, Any]], staged: bool = False) -> None:
        labels: list[int] = []
        vectors: list[Any] = []
        for item, vec in group:
            label = space.label_of(item.doc_id)
            space.set_recency(item.doc_id, item.recency)
            space.stamp = max(space.stamp, item.stamp)
            if item.payload:
                space.payload[item.doc_id] = item.payload
            space.lexical.add(item.doc_id, item.text)
            if vec is not None:
                labels.append(label)
                vectors.append(vec)
        if labels and staged:
            assert space.staged is not None and self._stage is not None
            space.staged.add(np.array(labels, dtype=np.int64), normalise(np.stack(vectors), self._stage[1]))
            space.staged = self._fit(space.staged)
        elif labels:
            space.vectors.add(np.array(labels, dtype=np.int64), normalise(np.stack(vectors), self.dim))
        space.dirty = True
        self._resize(space)

    def _resize(self, space: Space) -> None:
        space.vectors = self._fit(space.vectors)

    def _fit(self, index: ExactIndex | HnswIndex) -> ExactIndex | HnswIndex:
        """Promote to HNSW at the threshold; demote to exact under half of it."""
        n, threshold, dim = len(index), self.config.exact_threshold, index.dim
        if isinstance(index, ExactIndex) and n >= threshold:
            return self._build(HnswIndex(
                dim, m=self.config.hnsw_m, ef_construction=self.config.hnsw_ef_construction,
                ef=self.config.hnsw_ef, compact_ratio=self.config.compact_ratio,
                num_threads=self.num_threads, capacity=2 * n,
            ), index)
        if isinstance(index, HnswIndex) and n < threshold // 2:
            return self._build(ExactIndex(dim, capacity=max(16, n)), index)
        return index

    @staticmethod
    def _build(target: ExactIndex | HnswIndex, source: ExactIndex | HnswIndex) -> ExactIndex | HnswIndex:
        labels, vectors = source.items()
        if len(labels):
            target.add(labels, vectors)
        return target

    def delete(self, refs: list[Ref]) -> int:
        """Remove items by (namespace, doc_id); unknown ones are ignored. Returns how many."""
        removed = 0
        touched: set[Namespace] = set()
        for ns_raw, doc_id in refs:
            ns = Namespace(*ns_raw)
            space = self._spaces.get(ns)
            if space is not None and space.remove(doc_id):
                removed += 1
                touched.add(ns)
        for ns in touched:
            space = self._spaces[ns]
            if not len(space):
                self._detach(ns)
            else:
                self._resize(space)
        return removed

    def drop(self, app: str, user_id: str, kind: str | None = None, scope: str | None = None) -> int:
        """Remove whole namespaces of a user (all of them, or those of ``kind`` / ``scope``).
        Returns the items removed. Their files leave the disk with the next :meth:`snapshot`."""
        removed = 0
        for ns in list(self._by_user.get((app, user_id), ())):
            if (kind is None or ns.kind == kind) and (scope is None or ns.scope == scope):
                removed += len(self._spaces[ns])
                self._detach(ns)
        return removed

    # -- reads ----------------------------------------------------------------------------

    def search(self, namespaces: list[Namespace], query: Query) -> ShardReply:
        """Search the given namespaces together; scores as in :mod:`memray.index.fusion`.
        Unknown namespaces are skipped; a query without a vector in vector mode finds nothing.
        ``query.model_id`` names the query vector's model: the active one (or None), or the one
        retired by the last cutover (answered from its indexes); any other raises
        ModelMismatchError."""
        query = Query(*query)
        if query.mode not in ("vector", "lexical", "hybrid"):
            raise ValidationError("mode", query.mode, "must be 'vector', 'lexical' or 'hybrid'")
        retired = query.model_id is not None and query.model_id != self.model_id
        if retired and (self._retired is None or self._retired[0] != query.model_id):
            raise ModelMismatchError(
                f"query embedded with model {query.model_id!r} but shard {self.shard_id} indexes "
                f"{self.model_id!r}; embed the query with the index's model (reopen memray)"
            )
        model, dim = self._retired if retired and self._retired else (self.model_id, self.dim)
        vector = None
        if query.vector is not None and query.mode != "lexical":
            vector = np.asarray(query.vector, dtype=np.float32).reshape(-1)
            if vector.shape[0] != dim:
                raise ModelMismatchError(
                    f"query vector of dim {vector.shape[0]} does not fit shard {self.shard_id} "
                    f"(model {model!r}, dim {dim}); embed the query with the index's model"
                )
            vector = normalise(vector, dim)[0]
        spaces = [self._spaces[ns] for ns in dict.fromkeys(Namespace(*n) for n in namespaces) if ns in self._spaces]
        stamps = {Namespace(*ns): self._spaces[Namespace(*ns)].stamp if Namespace(*ns) in self._spaces else 0
                  for ns in query.watch}
        if query.k <= 0 or not spaces or (query.mode == "vector" and vector is None):
            return ShardReply([], Bm25Stats(0, 0, {}), stamps)
        hits, stats = search_spaces(spaces, query, vector, retired, self.config)
        return ShardReply(hits, stats, stamps)

    def search_many(self, requests: list[ShardSearch]) -> list[ShardReply | Exception]:
        """Many searches in one call (callers batch the searches of many concurrent agents into
        one actor call); a failing one returns its error in its place."""
        out: list[ShardReply | Exception] = []
        for request in requests:
            try:
                out.append(self._search_one(request))
            except Exception as exc:
                out.append(exc)
        return out

    def _search_one(self, request: ShardSearch) -> ShardReply:
        if isinstance(request, NamespaceSearch):
            return self.search(request.namespaces, request.query)
        if isinstance(request, UserSearch):
            return self.search_user(request.app, request.user_id, request.kind, request.query)
        if isinstance(request, AppSearch):
            return self.search_app(request.app, request.kind, request.query)
        raise ValidationError("request", request, "must be a NamespaceSearch, UserSearch or AppSearch")

    def search_user(self, app: str, user_id: str, kind: str, query: Query) -> ShardReply:
        """:meth:`search` over every namespace of one user and ``kind`` (all their conversations)."""
        namespaces = [ns for ns in self._by_user.get((app, user_id), ()) if ns.kind == kind]
        return self.search(namespaces, query)

    def search_app(self, app: str, kind: str, query: Query) -> ShardReply:
        """:meth:`search` over every namespace of ``app`` and ``kind`` on this shard."""
        namespaces = [ns for ns in self._spaces if ns.app == app and ns.kind == kind]
        return self.search(namespaces, query)

    def inventory(self) -> list[Ref]:
        """Every (namespace, doc_id) held."""
        return [(ns, doc) for ns, space in self._spaces.items() for doc in space.labels]

    def missing_from(self, refs: list[Ref]) -> list[Ref]:
        """The refs of ``refs`` this shard does not hold."""
        out = []
        for ns_raw, doc in refs:
            space = self._spaces.get(Namespace(*ns_raw))
            if space is None or doc not in space.labels:
                out.append((Namespace(*ns_raw), doc))
        return out

    def count_user(self, app: str, user_id: str) -> int:
        """Items of the user left on this shard (0 after :meth:`drop`)."""
        return sum(len(self._spaces[ns]) for ns in self._by_user.get((app, user_id), ()))

    def stats(self) -> dict[str, Any]:
        hnsw = [s.vectors for s in self._spaces.values() if isinstance(s.vectors, HnswIndex)]
        return {
            "shard_id": self.shard_id,
            "model_id": self.model_id,
            "dim": self.dim,
            "staged_model_id": self._stage[0] if self._stage else None,
            "staged_vectors": sum(len(s.staged) for s in self._spaces.values() if s.staged is not None),
            "retired_model_id": self._retired[0] if self._retired else None,
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
        if model_id == self.model_id:
            return False
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise ValidationError("dim", dim, "must be a positive integer")
        self._stage = (model_id, dim)
        for space in self._spaces.values():
            space.staged = ExactIndex(dim)
        return True

    def stage_upsert(self, rows: list[IndexRow], model_id: str) -> int:
        """Add the staged model's vectors of ``rows`` (from ``store.scan_index_rows``). An item the
        shard does not hold yet is added with its text and recency. Returns how many."""
        if self._stage is None or self._stage[0] != model_id:
            raise ModelMismatchError(
                f"shard {self.shard_id} has no staged index for model {model_id!r}; call stage_begin first"
            )
        dim = self._stage[1]
        groups: dict[Namespace, list[IndexRow]] = {}
        for row in rows:
            groups.setdefault(Namespace(*row.namespace), []).append(row)
        for ns, group in groups.items():
            space = self._space(ns)
            for row in group:
                if row.doc_id not in space.labels:
                    space.label_of(row.doc_id)
                    space.set_recency(row.doc_id, float(row.recency))
                    space.lexical.add(row.doc_id, row.text)
            labels = np.array([space.labels[r.doc_id] for r in group], dtype=np.int64)
            vectors = normalise(np.stack([np.asarray(r.vector, dtype=np.float32).reshape(-1) for r in group]), dim)
            if vectors.shape[1] != dim:
                raise ModelMismatchError(
                    f"vectors of dim {vectors.shape[1]} do not fit the staged model {model_id!r} (dim {dim})"
                )
            assert space.staged is not None
            space.staged.add(labels, vectors)
            space.staged = self._fit(space.staged)
            space.dirty = True
        return len(rows)

    def cutover(self, model_id: str) -> bool:
        """Make the staged ``model_id`` active in one step (searches see the old set or the new
        one, never a mix); the old set is kept as retired until :meth:`retire_release`. Returns
        False if already active. Pointer swaps only (no I/O: the caller snapshots afterwards).
        Durability: none until the next :meth:`snapshot`; a shard restarted before it rebuilds
        from the store with the recorded model (``<root>/model.json``)."""
        if model_id == self.model_id:
            return False
        if self._stage is None or self._stage[0] != model_id:
            raise ModelMismatchError(
                f"shard {self.shard_id} has no staged index for model {model_id!r}; stage it first"
            )
        dim = self._stage[1]
        for space in self._spaces.values():
            space.retired, space.vectors = space.vectors, space.staged or ExactIndex(dim)
            space.staged = None
            space.dirty = True
        self._retired = (self.model_id, self.dim)
        self.model_id, self.dim = model_id, dim
        self._stage = None
        return True

    def stage_abort(self) -> None:
        """Drop the staged index set, if any."""
        self._stage = None
        for space in self._spaces.values():
            space.staged = None

    def retire_release(self) -> None:
        """Free the indexes of the model replaced by the last cutover."""
        self._retired = None
        for space in self._spaces.values():
            space.retired = None

    # -- recovery -------------------------------------------------------------------------

    def begin_reconcile(self) -> None:
        """Start a recovery pass: every item upserted or reconciled until :meth:`end_reconcile`
        is remembered as present in the store."""
        self._seen = set()

    def reconcile(self, rows: list[IndexRow]) -> int:
        """Upsert the rows (from ``store.scan_index_rows``) this shard lacks or holds stale: an
        unknown item, a missing vector, another recency, or other text. (A changed vector with
        unchanged text and recency is not detected.) Returns how many were upserted."""
        todo = []
        for row in rows:
            ns = Namespace(*row.namespace)
            if self._seen is not None:
                self._seen.add((ns, row.doc_id))
            if self._stale(ns, row):
                todo.append(IndexItem(ns, row.doc_id, row.vector, row.text, row.recency))
        return self.upsert(todo, self.model_id) if todo else 0

    def _stale(self, ns: Namespace, row: IndexRow) -> bool:
        space = self._spaces.get(ns)
        label = space.labels.get(row.doc_id) if space is not None else None
        if space is None or label is None:
            return True
        if space.recency[row.doc_id] != float(row.recency):
            return True
        if row.vector is not None and label not in space.vectors:
            return True
        return space.lexical.terms(row.doc_id) != dict(Counter(index_terms(row.text)))

    def end_reconcile(self) -> int:
        """Finish a recovery pass: delete every item not seen since :meth:`begin_reconcile`
        (it is no longer in the store). Returns how many were deleted."""
        seen, self._seen = self._seen or set(), None
        return self.delete([ref for ref in self.inventory() if ref not in seen])

    # -- snapshots ------------------------------------------------------------------------

    def snapshot(self) -> None:
        """Write a complete snapshot folder, fsync it, rename it into place, then commit by
        atomically replacing ``CURRENT``; finally remove every older snapshot. Durable when it
        returns; a crash at any point leaves the previous snapshot or the new one loadable."""
        root = Path(self.path)
        root.mkdir(parents=True, exist_ok=True)
        self._snap_seq += 1
        name = f"snap-{self._snap_seq:08d}"
        tmp = root / f".{name}.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        previous = root / self._snap_name if self._snap_name else None
        table = _pack(list(self._spaces.values()), tmp, previous, self.dim)
        atomic_write_json(tmp / "shard.json", {
            "shard_id": self.shard_id, "dim": self.dim, "model_id": self.model_id,
            "seq": self._snap_seq, "next_uid": self._next_uid, "spaces": table, "lexical": LEXICAL_VERSION,
        })
        fsync_dir(tmp)
        os.replace(tmp, root / name)
        fsync_dir(root)
        atomic_write_json(root / _CURRENT, {"snapshot": name})
        self._snap_name = name
        for space in self._spaces.values():
            space.dirty = False
        self._remove_stale(root)

    def _remove_stale(self, root: Path) -> None:
        for entry in root.iterdir():
            if entry.name == _CURRENT or entry.name == self._snap_name:
                continue
            if entry.is_dir() and (entry.name.startswith("snap-") or entry.name.startswith(".snap-")):
                shutil.rmtree(entry)
            elif entry.is_file() and entry.name.startswith(f".{_CURRENT}."):
                entry.unlink()
        fsync_dir(root)
