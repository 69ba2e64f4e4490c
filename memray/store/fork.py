"""The store's part of a fork: a copy of the database file at one transaction boundary.

The store actor runs one call at a time, so while :func:`fork_database` runs no transaction can
commit: ``CHECKPOINT`` folds the WAL into the file, and the file copied then holds exactly the
transactions committed before the call (a copy-on-write clone where the filesystem offers one,
else a kernel copy). The copy forgets the source's Parquet export roots (``export_state``): they
are the source's files, and a fork that purged them on an erasure would delete the source's data.
"""

from __future__ import annotations

import os

import duckdb

from memray.errors import StoreError, ValidationError
from memray.files import clone_file, fsync_dir
from memray.store.database import Database

__all__ = ["fork_database"]


def fork_database(db: Database, dst: str) -> dict[str, int]:
    """Copy ``db`` to the new file ``dst`` (see the module docstring). Returns ``bytes`` copied,
    ``cloned`` (1 when copy-on-write) and ``version``, the last transaction the copy holds (what
    changed after it: :func:`memray.store.refs.changed_refs`). Durability: fsynced (file and
    folder) on return."""
    if os.path.exists(dst):
        raise ValidationError("dst", dst, "already exists", "fork into a new path")
    db.sql("CHECKPOINT")
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    cloned = clone_file(db.path, dst)
    wal = db.path + ".wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:  # CHECKPOINT normally leaves none
        clone_file(wal, dst + ".wal")
    try:
        con = duckdb.connect(dst)
        try:
            con.execute("DELETE FROM export_state")
            con.execute("CHECKPOINT")
        finally:
            con.close()
    except duckdb.Error as exc:
        raise StoreError(f"the fork's copy of the history store {dst!r} does not open: {exc}") from exc
    fsync_dir(os.path.dirname(os.path.abspath(dst)))
    return {"bytes": os.path.getsize(dst), "cloned": int(cloned), "version": db.version}
