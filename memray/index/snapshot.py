"""Shard snapshots (:meth:`~memray.index.shard.VectorShard.snapshot`): directories ``snap-<n>``
under the shard's path, committed by atomically rewriting ``CURRENT``.

A snapshot packs every namespace's items into
one ``items.parquet`` and the vectors of all exact (small) namespaces into one ``vectors.npy``:
a shard holds thousands of small conversation namespaces, and a folder per namespace made a
snapshot of 10k conversations take seconds of fsyncs. HNSW namespaces keep their own folder,
hard-linked from the previous snapshot when unchanged.

:func:`write` makes a snapshot and commits it, :func:`committed` finds the committed one and
:func:`unpack` loads its namespaces, :func:`remove_stale` removes every other snapshot folder
(older, unfinished or discarded), so a dropped user's data leaves the disk with the next snapshot.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from memray.files import load_npy
from memray.ids import Namespace
from memray.index.base import atomic_save_rows, atomic_write_json, fsync_dir, read_json
from memray.index.columns import COLUMN_NAMES, snapshot_columns
from memray.index.hnsw import HnswIndex
from memray.index.space import Space

__all__ = ["CURRENT", "committed", "uncommit", "write", "unpack", "remove_stale"]

CURRENT = "CURRENT"


def committed(root: Path) -> tuple[str, dict[str, Any]] | None:
    """The committed snapshot under ``root``: its folder name and its ``shard.json``; None if none."""
    current = root / CURRENT
    if not current.exists():
        return None
    name = str(read_json(current)["snapshot"])
    return name, read_json(root / name / "shard.json")


def uncommit(root: Path) -> None:
    """Forget the committed snapshot (its folder goes with the next :func:`remove_stale`)."""
    (root / CURRENT).unlink()


def write(root: Path, seq: int, previous: str | None, spaces: list[Space], meta: dict[str, Any]) -> str:
    """Write snapshot ``seq`` of ``spaces`` (``meta`` and the namespace table in its
    ``shard.json``), then commit it; returns its folder name. ``previous`` is the committed one,
    whose unchanged HNSW folders are hard-linked. Durability: the folder is complete and fsynced
    before it is renamed into place, and ``CURRENT`` is replaced atomically after that, so a crash
    at any point leaves the previous snapshot or the new one committed."""
    root.mkdir(parents=True, exist_ok=True)
    name = f"snap-{seq:08d}"
    tmp = root / f".{name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    table = _pack(spaces, tmp, root / previous if previous else None, int(meta["dim"]))
    atomic_write_json(tmp / "shard.json", {**meta, "spaces": table})
    fsync_dir(tmp)
    os.replace(tmp, root / name)
    fsync_dir(root)
    atomic_write_json(root / CURRENT, {"snapshot": name})
    return name


def remove_stale(root: Path, keep: str | None) -> None:
    """Remove every snapshot folder but ``keep`` (and leftovers of interrupted commits)."""
    for entry in root.iterdir():
        if entry.name == CURRENT or entry.name == keep:
            continue
        if entry.is_dir() and (entry.name.startswith("snap-") or entry.name.startswith(".snap-")):
            shutil.rmtree(entry)
        elif entry.is_file() and entry.name.startswith(f".{CURRENT}."):
            entry.unlink()
    fsync_dir(root)


def _link_tree(src: Path, dst: Path) -> None:
    """Recreate ``src`` at ``dst`` with hard links (copies where links are not supported).
    Safe because snapshot files are never modified after they are written."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(src):
        try:
            os.link(src / name, dst / name)
        except OSError:
            shutil.copy2(src / name, dst / name)


_ITEM_SCHEMA = pa.schema(
    [
        ("uid", pa.int64()),
        ("doc_id", pa.string()),
        ("label", pa.int64()),
        ("recency", pa.float64()),
        ("payload", pa.string()),
        ("terms", pa.string()),
        ("vector_row", pa.int64()),
        ("created_at", pa.float64()),
        ("sim_time", pa.float64()),
        ("importance", pa.float64()),
    ]
)
#: An item's index terms as the snapshot keeps them (``json.dumps(terms, ensure_ascii=False)``,
#: without building an encoder per item).
_terms_json = json.JSONEncoder(ensure_ascii=False).encode


def _pack(spaces: list[Space], directory: Path, previous: Path | None, dim: int) -> list[list[Any]]:
    """Write every namespace into ``directory``: one ``items.parquet`` row per item, the vectors
    of exact namespaces in one ``vectors.npy``, each HNSW namespace in ``hnsw-<uid>/`` (hard-linked
    from ``previous`` when unchanged). Returns the namespace table for ``shard.json``.
    Thousands of small namespaces cost two files, not thousands of folders; the columns are
    gathered a namespace at a time (a snapshot rewrites every item: 120,000 items took ~1.1 s
    item by item, ``python -m benchmarks.snapshot_micro``)."""
    parts: dict[str, Any] = {name: [] for name in _ITEM_SCHEMA.names}
    blocks: list[np.ndarray] = []
    columns: list[np.ndarray] = []
    rows = 0
    table = []
    for space in spaces:
        kind = "hnsw" if isinstance(space.vectors, HnswIndex) else "exact"
        table.append([*space.namespace, space.uid, space.next_label, kind])
        docs = list(space.labels)
        labels = list(space.labels.values())
        vector_row: Any = itertools.repeat(-1, len(docs))
        if kind == "hnsw":
            sub = f"hnsw-{space.uid}"
            if not space.dirty and previous is not None and (previous / sub).is_dir():
                _link_tree(previous / sub, directory / sub)
            else:
                space.vectors.save(str(directory / sub))
        else:
            held, vectors = space.vectors.items()
            if len(held):
                blocks.append(vectors)
                where = {label: rows + i for i, label in enumerate(held.tolist())}
                vector_row = map(where.get, labels, itertools.repeat(-1))
                rows += len(held)
        parts["uid"].extend(itertools.repeat(space.uid, len(docs)))
        parts["doc_id"].extend(docs)
        parts["label"].extend(labels)
        parts["recency"].extend(map(space.recency.__getitem__, docs))
        parts["payload"].extend(map(space.payload.get, docs, itertools.repeat("")))
        parts["terms"].extend(_terms_json(space.lexical.terms(doc) or {}) for doc in docs)
        parts["vector_row"].extend(vector_row)
        columns.append(space.columns.rows(labels))
    by_item = np.concatenate(columns) if columns else np.zeros((0, len(COLUMN_NAMES)))
    for n, name in enumerate(COLUMN_NAMES):
        parts[name] = by_item[:, n]
    # Plain encoding: a raw byte scan of the snapshot (erasure verification) sees every id and text.
    pq.write_table(
        pa.table(parts, schema=_ITEM_SCHEMA), directory / "items.parquet", compression="none", use_dictionary=False
    )
    atomic_save_rows(directory / "vectors.npy", blocks, dim)
    with open(directory / "items.parquet", "rb+") as f:
        os.fsync(f.fileno())
    return table


def unpack(directory: Path, table: list[list[Any]], dim: int, num_threads: int) -> list[Space]:
    spaces: dict[int, Space] = {}
    for app, user_id, kind_, scope, uid, next_label, kind in table:
        space = Space(Namespace(app, user_id, kind_, scope), int(uid), dim)
        space.next_label = int(next_label)
        if kind == "hnsw":
            space.vectors = HnswIndex.load(str(directory / f"hnsw-{uid}"), num_threads=num_threads)
        spaces[int(uid)] = space
    items = pq.read_table(directory / "items.parquet").to_pydict()
    matrix = load_npy(directory / "vectors.npy")
    exact: dict[int, tuple[list[int], list[int]]] = {}
    columns = snapshot_columns(items)  # a snapshot of an older memray has none: from the payloads
    for uid, doc, label, recency, payload, terms, row, cols in zip(
        items["uid"],
        items["doc_id"],
        items["label"],
        items["recency"],
        items["payload"],
        items["terms"],
        items["vector_row"],
        columns,
    ):
        space = spaces[uid]
        space.labels[doc] = label
        space.docs[label] = doc
        space.set_recency(doc, recency)
        space.columns.set(label, cols)
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
