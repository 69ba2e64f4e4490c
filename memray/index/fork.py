"""A shard's part of a fork: its snapshot, linked into the fork, and made exact on first open.

:func:`copy_snapshot` recreates a committed snapshot folder under the fork's shard path with hard
links (snapshot files are never modified after they are written, so sharing them is safe and
costs no data copy; where links are not supported, files are copied) and commits it there with
its own ``CURRENT``. It also leaves a :data:`MARKER`: the snapshot was taken a moment after the
fork's copy of the store, and agents kept writing, so it may hold a few items the fork's store
does not, or lack a few it does. The fork's shards reconcile with the fork's store on their first
open (:func:`reconcile_shard`; a Ray shard always does, see :mod:`memray.index.recovery`), and
the marker goes once they have. Indexes are derived data: after that they match the store copy
exactly, which is the fork's one point in time.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from memray.index.base import atomic_write_json, fsync_dir
from memray.runtime.ref import ActorRef
from memray.store.base import IndexRow
from memray.store.rows import Namespace

__all__ = ["MARKER", "copy_snapshot", "needs_reconcile", "clear_marker", "reconcile_shard"]

#: A file in a shard folder: reconcile with the store before serving (a fork's first open).
MARKER = "RECONCILE"
_CURRENT = "CURRENT"


def _link(src: Path, dst: Path) -> int:
    dst.mkdir(parents=True, exist_ok=True)
    files = 0
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_dir():
            files += _link(Path(entry.path), target)
            continue
        try:
            os.link(entry.path, target)
        except OSError:
            shutil.copy2(entry.path, target)
        files += 1
    fsync_dir(dst)
    return files


def copy_snapshot(root: str, name: str | None, dst: str) -> int:
    """Link snapshot ``name`` of the shard at ``root`` into the new shard folder ``dst``, commit
    it there, and mark ``dst`` for reconciliation. Returns the files linked. Durable on return."""
    target = Path(dst)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{dst} is not empty")
    target.mkdir(parents=True, exist_ok=True)
    files = 0
    if name is not None:
        files = _link(Path(root) / name, target / name)
        atomic_write_json(target / _CURRENT, {"snapshot": name})
    (target / MARKER).write_bytes(b"")
    fsync_dir(target)
    return files


def needs_reconcile(path: str) -> bool:
    return os.path.exists(os.path.join(path, MARKER))


def clear_marker(path: str) -> None:
    try:
        os.unlink(os.path.join(path, MARKER))
    except FileNotFoundError:
        return
    fsync_dir(path)


async def reconcile_shard(shard: ActorRef, store: ActorRef, shard_id: int, shards: int, model_id: str,
                          page_size: int = 2_000) -> tuple[int, int, int]:
    """One reconcile pass of ``shard`` against ``store`` (what a Ray shard's keeper does on every
    start): missing or stale items upserted, items the store lacks deleted. Returns (rows read,
    upserted, deleted)."""
    await shard.call("begin_reconcile")
    rows = upserted = 0
    after: tuple[Namespace, str] | None = None
    while True:
        page: list[IndexRow] = await store.call("scan_index_rows", shard_id, shards, model_id, after, page_size, True)
        if not page:
            break
        rows += len(page)
        upserted += int(await shard.call("reconcile", page))
        after = (Namespace(*page[-1].namespace), page[-1].doc_id)
    deleted: Any = await shard.call("end_reconcile")
    return rows, upserted, int(deleted)
