"""A shard's part of a fork: its snapshot, linked into the fork, and made exact on first open.

:func:`copy_snapshot` recreates a committed snapshot folder under the fork's shard path with hard
links (snapshot files are never modified after they are written, so sharing them is safe and
costs no data copy; where links are not supported, files are copied) and commits it there with
its own ``CURRENT``. The snapshot was taken a moment after the fork's copy of the store while
agents kept writing, so it may hold items the fork's store does not, lack some it does, or hold
another version of a few. A :data:`MARKER` file says so, listing the items written around the
fork (:func:`write_marker`; which ones and why that suffices: :mod:`memray.runtime.fork`); the
fork's shards are made exact on their first open:

- in-process, :func:`~memray.index.keeper.reconcile_marked` compares the shard's items (and which have vectors) with
  the fork store's (two set differences, no text read), re-indexes the missing ones and the
  listed ones from the fork's store, and deletes those the store lacks: the cost of the changes,
  not of the data;
- a Ray shard always reconciles fully with its store when it starts (:mod:`memray.index.recovery`).

The marker goes once the shard is exact. Indexes are derived data: after that they match the
store copy, which is the fork's one point in time.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from memray.ids import Namespace
from memray.index.base import atomic_write_json, fsync_dir

__all__ = [
    "MARKER",
    "copy_snapshot",
    "write_marker",
    "read_marker",
    "needs_reconcile",
    "clear_marker",
]

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
    (target / MARKER).write_bytes(b"")  # until write_marker lists the changes: reconcile fully
    fsync_dir(target)
    return files


def write_marker(path: str, changed: list[tuple[Namespace, str]]) -> None:
    """Mark the shard folder ``path`` for reconciliation, listing the items its snapshot may hold
    in another version than the store copy. Durable on return."""
    atomic_write_json(Path(path) / MARKER, {"changed": [[*ns, doc] for ns, doc in changed]})


def read_marker(path: str) -> list[tuple[Namespace, str]] | None:
    """The items a marker lists; None when it lists none (reconcile fully)."""
    try:
        with open(os.path.join(path, MARKER), encoding="utf-8") as f:
            data = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        return None
    changed = data.get("changed") if isinstance(data, dict) else None
    return None if changed is None else [(Namespace(*row[:4]), str(row[4])) for row in changed]


def needs_reconcile(path: str) -> bool:
    return os.path.exists(os.path.join(path, MARKER))


def clear_marker(path: str) -> None:
    try:
        os.unlink(os.path.join(path, MARKER))
    except FileNotFoundError:
        return
    fsync_dir(path)
