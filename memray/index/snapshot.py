"""Shard snapshots (:meth:`~memray.index.shard.VectorShard.snapshot`): directories ``snap-<n>``
under the shard's path, committed by atomically rewriting ``CURRENT``.

A snapshot packs the namespaces' items into **segments**, each one Parquet file of items and one
``.npy`` of the vectors of those items that live in exact (small) namespaces: a shard holds
thousands of small conversation namespaces, and a folder per namespace made a snapshot of 10k
conversations take seconds of fsyncs. HNSW namespaces keep their own folder, hard-linked from
the previous snapshot when unchanged. A full snapshot writes every item into one segment; a
delta links the previous snapshot's segments and writes one more of the items appended since
(when that is the whole state: :meth:`~memray.index.shard.VectorShard.snapshot` decides).
``shard.json`` lists the segments in order; a snapshot of an older memray, with none listed,
is one ``items.parquet`` and one ``vectors.npy``.

:func:`write` makes a snapshot and commits it, :func:`committed` finds the committed one and
:func:`unpack` loads its namespaces, :func:`remove_stale` removes every other snapshot folder
(older, unfinished or discarded), so a dropped user's data leaves the disk with the next full
snapshot, which anything but appends makes.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from memray.files import load_npy
from memray.ids import Namespace
from memray.index.base import atomic_save_rows, atomic_write_json, fsync_dir, read_json
from memray.index.columns import COLUMN_NAMES, snapshot_columns
from memray.index.hnsw import HnswIndex
from memray.index.space import Space

__all__ = ["CURRENT", "MAX_SEGMENTS", "Segment", "committed", "segments", "uncommit", "write", "unpack", "remove_stale"]

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


class Segment(NamedTuple):
    """One part of a snapshot's items: ``items`` (a Parquet file) and the exact namespaces'
    vectors of those items (``vectors``, an ``.npy`` file), in the snapshot folder."""

    items: str
    vectors: str
    rows: int


#: A snapshot written before segments existed: one of each file, by these names.
LEGACY = [Segment("items.parquet", "vectors.npy", -1)]
#: A delta after this many segments is a full snapshot instead (files per folder, and per restore).
MAX_SEGMENTS = 16


def segments(meta: dict[str, Any]) -> list[Segment]:
    """The segments of a snapshot, from its ``shard.json``, oldest first."""
    listed = meta.get("segments")
    return list(LEGACY) if listed is None else [Segment(*s) for s in listed]


def write(
    root: Path,
    seq: int,
    previous: str | None,
    spaces: list[Space],
    meta: dict[str, Any],
    kept: list[Segment] | None = None,
) -> tuple[str, list[Segment]]:
    """Write snapshot ``seq`` of ``spaces`` (``meta``, the namespace table and the segments in its
    ``shard.json``), then commit it; returns its folder name and segments. ``previous`` is the
    committed one, whose unchanged HNSW folders are hard-linked.

    ``kept``: a **delta** — the segments of ``previous`` to keep (hard-linked), and one new
    segment holding only each namespace's items appended since (:meth:`Space.appended`). The caller
    makes sure that is the whole state (nothing changed in place, nothing dropped). None: a full
    snapshot, every item in one segment.

    Durability: the folder is complete and fsynced before it is renamed into place, and
    ``CURRENT`` is replaced atomically after that, so a crash at any point leaves the previous
    snapshot or the new one committed."""
    root.mkdir(parents=True, exist_ok=True)
    name = f"snap-{seq:08d}"
    tmp = root / f".{name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    before = root / previous if previous else None
    for segment in kept or ():
        assert before is not None, "a delta snapshot needs the one it follows"
        for file in segment[:2]:
            _link(before / file, tmp / file)
    new = Segment(f"items-{seq:08d}.parquet", f"vectors-{seq:08d}.npy", 0)
    table, rows = _pack(spaces, tmp, before, int(meta["dim"]), new, appended_only=kept is not None)
    listed = [*(kept or ()), new._replace(rows=rows)]
    atomic_write_json(tmp / "shard.json", {**meta, "spaces": table, "segments": [list(s) for s in listed]})
    fsync_dir(tmp)
    os.replace(tmp, root / name)
    fsync_dir(root)
    atomic_write_json(root / CURRENT, {"snapshot": name})
    return name, listed


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


def _link(src: Path, dst: Path) -> None:
    """``src`` at ``dst`` as a hard link (a copy where links are not supported). Safe because
    snapshot files are never modified after they are written."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _link_tree(src: Path, dst: Path) -> None:
    """Recreate ``src`` at ``dst`` with hard links (:func:`_link`)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(src):
        _link(src / name, dst / name)


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
        ("text_id", pa.int64()),
    ]
)
#: An item's index terms as the snapshot keeps them (``json.dumps(terms, ensure_ascii=False)``,
#: without building an encoder per item).
_terms_json = json.JSONEncoder(ensure_ascii=False).encode


def _pack(
    spaces: list[Space], directory: Path, previous: Path | None, dim: int, segment: Segment, appended_only: bool
) -> tuple[list[list[Any]], int]:
    """Write the namespaces' items into ``directory`` as ``segment``: one row per item in its
    Parquet file, the vectors of exact namespaces in its ``.npy``, and each HNSW namespace in
    ``hnsw-<uid>/`` (hard-linked from ``previous`` when unchanged); with ``appended_only``, only
    the items appended since the last snapshot. Returns the namespace table for ``shard.json``
    (every namespace) and the rows written. Thousands of small namespaces cost two files, not
    thousands of folders; the columns are gathered a namespace at a time (120,000 items took
    ~1.1 s item by item, ``python -m benchmarks.snapshot_micro``)."""
    parts: dict[str, Any] = {name: [] for name in _ITEM_SCHEMA.names}
    blocks: list[np.ndarray] = []
    columns: list[np.ndarray] = []
    text_ids: list[np.ndarray] = []
    rows = 0
    table = []
    for space in spaces:
        kind = "hnsw" if isinstance(space.vectors, HnswIndex) else "exact"
        table.append([*space.namespace, space.uid, space.next_label, kind])
        docs = space.appended() if appended_only else list(space.labels)
        labels = list(map(space.labels.__getitem__, docs))
        vector_row: Any = itertools.repeat(-1, len(docs))
        if kind == "hnsw":
            sub = f"hnsw-{space.uid}"
            if not space.dirty and previous is not None and (previous / sub).is_dir():
                _link_tree(previous / sub, directory / sub)
            else:
                space.vectors.save(str(directory / sub))
        else:
            held, vectors = _exact_vectors(space, labels, appended_only)
            if held:
                blocks.append(vectors)
                where = {label: rows + i for i, label in enumerate(held)}
                vector_row = map(where.get, labels, itertools.repeat(-1))
                rows += len(held)
        if not docs:
            continue
        parts["uid"].extend(itertools.repeat(space.uid, len(docs)))
        parts["doc_id"].extend(docs)
        parts["label"].extend(labels)
        parts["recency"].extend(map(space.recency.__getitem__, docs))
        parts["payload"].extend(map(space.payload.get, docs, itertools.repeat("")))
        parts["terms"].extend(_terms_json(space.lexical.terms(doc) or {}) for doc in docs)
        parts["vector_row"].extend(vector_row)
        columns.append(space.columns.rows(labels))
        text_ids.append(space.text_ids(np.array(labels, dtype=np.int64)))
    parts["text_id"] = np.concatenate(text_ids) if text_ids else np.zeros(0, dtype=np.int64)
    by_item = np.concatenate(columns) if columns else np.zeros((0, len(COLUMN_NAMES)))
    for n, name in enumerate(COLUMN_NAMES):
        parts[name] = by_item[:, n]
    # Plain encoding: a raw byte scan of the snapshot (erasure verification) sees every id and text.
    items = directory / segment.items
    pq.write_table(pa.table(parts, schema=_ITEM_SCHEMA), items, compression="none", use_dictionary=False)
    atomic_save_rows(directory / segment.vectors, blocks, dim)
    with open(items, "rb+") as f:
        os.fsync(f.fileno())
    return table, len(parts["doc_id"])


def _exact_vectors(space: Space, labels: list[int], appended_only: bool) -> tuple[list[int], np.ndarray]:
    """The labels with a vector in an exact namespace, and those vectors: of ``labels`` only (the
    appended items) or all of them."""
    if appended_only:
        held = [label for label in labels if label in space.vectors]
        return held, space.vectors.get(held) if held else np.zeros((0, space.vectors.dim), np.float32)
    every, vectors = space.vectors.items()
    return every.tolist(), vectors


def unpack(directory: Path, meta: dict[str, Any], num_threads: int) -> list[Space]:
    """The namespaces of the snapshot in ``directory`` (its ``shard.json`` is ``meta``), every
    segment read in order, each marked unchanged since it."""
    dim = int(meta["dim"])
    spaces: dict[int, Space] = {}
    for app, user_id, kind_, scope, uid, next_label, kind in meta["spaces"]:
        space = Space(Namespace(app, user_id, kind_, scope), int(uid), dim)
        space.next_label = int(next_label)
        if kind == "hnsw":
            space.vectors = HnswIndex.load(str(directory / f"hnsw-{uid}"), num_threads=num_threads)
        spaces[int(uid)] = space
    for segment in segments(meta):
        _unpack_segment(directory, segment, spaces)
    for space in spaces.values():
        space.snapshotted()
    return list(spaces.values())


def _unpack_segment(directory: Path, segment: Segment, spaces: dict[int, Space]) -> None:
    items = pq.read_table(directory / segment.items).to_pydict()
    matrix = load_npy(directory / segment.vectors)
    exact: dict[int, tuple[list[int], list[int]]] = {}
    columns = snapshot_columns(items)  # a snapshot of an older memray has none: from the payloads
    text_ids = items.get("text_id") or itertools.repeat(0)  # an older memray's: unknown (0)
    for uid, doc, label, recency, payload, terms, row, cols, tid in zip(
        items["uid"],
        items["doc_id"],
        items["label"],
        items["recency"],
        items["payload"],
        items["terms"],
        items["vector_row"],
        columns,
        text_ids,
    ):
        space = spaces[uid]
        space.labels[doc] = label
        space.docs[label] = doc
        space.set_recency(doc, recency)
        space.columns.set(label, cols)
        if payload:
            space.payload[doc] = payload
        space.lexical.add_terms(doc, json.loads(terms))
        space.set_text_id(label, tid)
        if row >= 0:
            pair = exact.setdefault(uid, ([], []))
            pair[0].append(label)
            pair[1].append(row)
    for uid, (labels, rows) in exact.items():
        spaces[uid].vectors.add(np.array(labels, dtype=np.int64), matrix[rows])
