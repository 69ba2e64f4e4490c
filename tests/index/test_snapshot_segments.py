"""Delta snapshots: a shard whose namespaces only grew since its last snapshot writes just the
items appended since, beside the earlier segments (linked, not copied); anything else — an item
replaced or deleted, a namespace dropped, a promotion to HNSW, too many segments — writes every
item again, so a deleted item's data leaves the disk with the next snapshot. Either way, a shard
opened from the snapshot holds exactly what the shard that wrote it held."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memray.config import IndexConfig
from memray.ids import Namespace
from memray.index import IndexItem, VectorShard
from memray.index import snapshot as snapshots
from memray.service.erasure import scan_snapshot_items, scan_snapshots

DIM = 8
NAMESPACES = [Namespace("app", f"u{i % 2}", "conv", f"c{i}") for i in range(3)]
CONFIG = IndexConfig(exact_threshold=6)  # a namespace of 6 items is promoted to HNSW


def item(ns: Namespace, doc: int, version: int = 0) -> IndexItem:
    rng = np.random.default_rng(1000 * doc + version)
    payload = json.dumps({"id": f"d{doc}", "created_at": 100.0 + doc, "seq": doc, "v": f"v{version}-of-d{doc}"})
    return IndexItem(ns, f"d{doc}", rng.standard_normal(DIM), f"text {doc} version {version}", float(doc), payload)


def held(shard: VectorShard) -> dict[Any, Any]:
    """Everything a shard holds, per namespace and item (NaN as None, vectors rounded)."""
    out: dict[Any, Any] = {}
    for ns, space in shard._spaces.items():
        labels, vectors = space.vectors.items()
        vector = {int(label): tuple(np.round(v, 5).tolist()) for label, v in zip(labels, vectors)}
        out[tuple(ns)] = {
            doc: (
                label,
                space.recency[doc],
                space.payload.get(doc, ""),
                space.lexical.terms(doc),
                int(space.text_ids(np.array([label]))[0]),  # what a search for distinct texts merges by
                tuple(None if math.isnan(c) else c for c in space.columns.get(label)),
                vector.get(label),
            )
            for doc, label in space.labels.items()
        }
    return out


def reopened(shard: VectorShard) -> VectorShard:
    again = VectorShard(0, shard.path, DIM, "m", CONFIG)
    again.open()
    return again


def segment_rows(shard: VectorShard) -> list[int]:
    return [s.rows for s in shard._segments]


def test_a_snapshot_after_appends_writes_only_them_and_links_the_rest(tmp_path: Path):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", CONFIG)
    shard.open()
    shard.upsert([item(ns, d) for ns in NAMESPACES for d in range(3)], "m")
    shard.snapshot()
    first = Path(shard.path, str(shard._snap_name), shard._segments[0].items)
    inode = first.stat().st_ino
    shard.upsert([item(NAMESPACES[0], 3), item(NAMESPACES[1], 4), item(Namespace("app", "u9", "conv", "new"), 5)], "m")
    shard.snapshot()
    assert segment_rows(shard) == [9, 3]
    kept = Path(shard.path, str(shard._snap_name), shard._segments[0].items)
    assert kept.stat().st_ino == inode and not first.exists()  # linked into the new folder; the old one gone
    assert held(reopened(shard)) == held(shard)


def test_a_deleted_item_and_a_dropped_namespace_leave_the_disk_with_the_next_snapshot(tmp_path: Path):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", CONFIG)
    shard.open()
    shard.upsert([item(ns, d) for ns in NAMESPACES for d in range(3)], "m")
    shard.snapshot()
    shard.upsert([item(NAMESPACES[0], 7)], "m")
    shard.snapshot()  # a delta
    assert segment_rows(shard) == [9, 1]
    shard.delete([(NAMESPACES[0], "d1")])
    shard.snapshot()
    assert segment_rows(shard) == [9]
    shard.upsert([item(NAMESPACES[2], 8)], "m")
    shard.snapshot()  # a delta again
    assert segment_rows(shard) == [9, 1]
    shard.drop("app", "u1")  # NAMESPACES[1]
    shard.snapshot()
    assert segment_rows(shard) == [7]
    # what erasure verification scans: every snapshot folder under the shard, every segment
    assert scan_snapshot_items(shard.path, tuple(NAMESPACES[0]), ["d1"]) == 0
    assert scan_snapshot_items(shard.path, tuple(NAMESPACES[0]), ["d0", "d7"]) == 2
    assert scan_snapshots(shard.path, "app", "u1") == 0 and scan_snapshots(shard.path, "app", "u0") == 7
    assert held(reopened(shard)) == held(shard)


def test_a_replaced_item_is_a_full_snapshot_without_its_old_text(tmp_path: Path):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", CONFIG)
    shard.open()
    shard.upsert([item(NAMESPACES[0], d) for d in range(3)], "m")
    shard.snapshot()
    shard.upsert([item(NAMESPACES[0], 2, version=1)], "m")
    shard.snapshot()
    assert segment_rows(shard) == [3]
    on_disk = b"".join(p.read_bytes() for p in Path(shard.path).rglob("*") if p.is_file())
    assert b"v0-of-d2" not in on_disk and b"v1-of-d2" in on_disk and b"v0-of-d1" in on_disk
    assert held(reopened(shard)) == held(shard)


def test_segments_are_bounded(tmp_path: Path):
    shard = VectorShard(0, str(tmp_path / "s"), DIM, "m", CONFIG)
    shard.open()
    for n in range(snapshots.MAX_SEGMENTS + 1):
        shard.upsert([item(Namespace("app", "u", "conv", f"c{n}"), n)], "m")
        shard.snapshot()
    assert len(shard._segments) == 1 and segment_rows(shard) == [snapshots.MAX_SEGMENTS + 1]
    assert held(reopened(shard)) == held(shard)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 2), st.integers(0, 7)),
        st.tuples(st.just("delete"), st.integers(0, 2), st.integers(0, 7)),
        st.tuples(st.just("drop"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("snapshot"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(OPS)
@example([("add", 0, 1), ("add", 0, 2), ("snapshot", 0, 0), ("delete", 0, 1)])
@example([("add", 0, 1), ("snapshot", 0, 0), ("drop", 0, 0), ("add", 0, 2)])  # the namespace made again
@example([("add", 0, 1), ("snapshot", 0, 0), ("add", 0, 1)])  # replaced
def test_a_reopened_shard_holds_what_the_shard_held_at_every_snapshot(ops: list[tuple[str, int, int]]):
    """Adds (new items, and replacements), deletes, drops and snapshots in any order: after each
    snapshot, a shard opened from it holds exactly what the live shard holds."""
    with tempfile.TemporaryDirectory() as tmp:
        shard = VectorShard(0, os.path.join(tmp, "s"), DIM, "m", CONFIG)
        shard.open()
        versions: dict[tuple[int, int], int] = {}
        for op, n, doc in [*ops, ("snapshot", 0, 0)]:
            ns = NAMESPACES[n]
            if op == "add":
                versions[n, doc] = versions.get((n, doc), -1) + 1
                shard.upsert([item(ns, doc, versions[n, doc])], "m")
            elif op == "delete":
                shard.delete([(ns, f"d{doc}")])
            elif op == "drop":
                shard.drop(ns.app, ns.user_id, ns.kind, ns.scope)
            else:
                shard.snapshot()
                assert held(reopened(shard)) == held(shard)
