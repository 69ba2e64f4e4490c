"""What a shard's snapshot costs as its conversations grow, beside the raw writes of the same
data, one JSON line.

    python -m benchmarks.snapshot_micro --namespaces 5000 --ticks 12

A shard snapshots every ``IndexConfig.snapshot_every_s`` (30 s) from a thread of its actor, so
while it packs, the shard's searches and upserts wait for the GIL. In a simulation every
conversation changes between two snapshots. The shard here holds ``namespaces`` conversations of
``2 * ticks`` messages each (the shape of ``examples/tick.py``, 384-dim vectors of the default
embedder):

- ``snapshot_ms``: a full :meth:`~memray.index.shard.VectorShard.snapshot` (every item
  written: every namespace marked changed in place before each), best of ``--repeat``;
- ``floor_ms``: the raw writes of the same data: one ``pyarrow.parquet.write_table`` of the
  items' columns (already gathered) and one ``np.save`` of their vectors (already one matrix),
  each fsynced;
- ``delta_snapshot_ms``: one more tick upserted (2 messages per conversation), then a snapshot:
  a delta, writing only that tick's items (``segments`` lists the rows of each segment);
  ``delta_floor_ms``: the raw writes of that tick's items.

What decided the way a snapshot packs (5,000 namespaces, 12 ticks: 120,000 items, quiet
machine): item by item, with the vectors concatenated into one matrix before ``np.save``, a
snapshot took 865 ms at best (2.0 s the first in a process, then 0.86-1.26 s), 6.0x the floor;
gathered a namespace at a time and the vectors written block by block
(:func:`memray.index.base.atomic_save_rows`), 674 ms (0.94 s first, then 0.67-0.74 s), 3.9x.
What decided deltas: the full snapshot grows with the history (970 ms at 120,000 items, 1,689
ms at 240,000, ``--ticks 24``), a delta of one tick does not (244 and 248 ms).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks._harness import emit, ratio, scratch
from memray.config import IndexConfig
from memray.embedding.static import StaticEmbedder
from memray.ids import Namespace
from memray.index import IndexItem, VectorShard

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from tick import reply, said  # noqa: E402  (examples/tick.py: what its agents say)


def run(namespaces: int, ticks: int, repeat: int) -> dict[str, Any]:
    embedder = StaticEmbedder()
    dim = len(embedder.embed(["x"])[0])
    root = scratch("memray-snapshot-micro-")
    shard = VectorShard(0, os.path.join(root, "shard"), dim, embedder.model_id, IndexConfig())
    spaces = [Namespace("default", f"agent-{i}", "conv", "main") for i in range(namespaces)]

    def tick(t: int) -> tuple[list[str], np.ndarray]:
        """Tick ``t`` of every conversation upserted: what was said and replied, and its vectors."""
        said_now = [said(i, t) for i in range(namespaces)] + [reply(i, t) for i in range(namespaces)]
        vectors = np.asarray(embedder.embed(said_now), dtype=np.float32)
        shard.upsert(
            [
                IndexItem(spaces[i % namespaces], f"m{t}-{i}", vectors[i], text, float(2 * t + 1 + i // namespaces))
                for i, text in enumerate(said_now)
            ],
            embedder.model_id,
        )
        return said_now, vectors

    texts: list[str] = []
    for t in range(ticks):
        texts += tick(t)[0]
    full: list[float] = []
    for _ in range(repeat):
        for space in shard._spaces.values():
            space.dirty = space.rewritten = True  # (as if every item had changed: every one is written)
        full.append(_timed(shard.snapshot))
    delta: list[float] = []
    delta_floor: list[float] = []
    for r in range(repeat):
        said_now, vectors = tick(ticks + r)
        delta.append(_timed(shard.snapshot))
        delta_floor.append(_timed(_raw_write, root, said_now, vectors))
    items = len(texts)
    matrix = np.asarray(embedder.embed(texts[: min(items, 20_000)]), dtype=np.float32)
    matrix = np.resize(matrix, (items, dim))  # the bytes of every item's vector, as one matrix
    floor = [_timed(_raw_write, root, texts, matrix) for _ in range(repeat)]
    best, raw = min(full) * 1000, min(floor) * 1000
    best_delta, raw_delta = min(delta) * 1000, min(delta_floor) * 1000
    return {
        "items": items,
        "dim": dim,
        "snapshot_ms": round(best, 1),
        "snapshot_all_ms": [round(x * 1000, 1) for x in full],
        "floor_ms": round(raw, 1),
        "snapshot_to_floor": ratio(best, raw),
        "tick_items": 2 * namespaces,
        "delta_snapshot_ms": round(best_delta, 1),
        "delta_snapshot_all_ms": [round(x * 1000, 1) for x in delta],
        "delta_floor_ms": round(raw_delta, 1),
        "delta_to_floor": ratio(best_delta, raw_delta),
        "delta_to_full": ratio(best_delta, best),
        "segments": [s.rows for s in shard._segments],
    }


def _timed(fn: Any, *args: Any) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _raw_write(root: str, texts: list[str], matrix: np.ndarray) -> None:
    """The items' columns as one Parquet file and their vectors as one ``.npy``, each fsynced."""
    n = len(texts)
    columns = {"doc_id": [f"m{i}" for i in range(n)], "text": texts, "recency": [float(i) for i in range(n)]}
    pq.write_table(pa.table(columns), Path(root) / "raw.parquet", compression="none", use_dictionary=False)
    np.save(Path(root) / "raw.npy", matrix, allow_pickle=False)
    for name in ("raw.parquet", "raw.npy"):
        with open(Path(root) / name, "rb+") as f:
            os.fsync(f.fileno())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--namespaces", type=int, default=5000)
    p.add_argument("--ticks", type=int, default=12)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=None, help="also write the JSON line here (a recorded run)")
    args = p.parse_args(argv)
    params = {k: v for k, v in vars(args).items() if k != "out"}
    return emit("snapshot_micro", params, run(args.namespaces, args.ticks, args.repeat), args.out)


if __name__ == "__main__":
    main()
