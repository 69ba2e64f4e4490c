"""Durable file writes shared by every core that persists outside DuckDB (shard snapshots,
the active-model record): temp file in the same folder, fsync, ``os.replace``, fsync the folder;
and the file copy a fork makes (a copy-on-write clone where the filesystem has one); and the
``.npy`` read that threads of one process can share."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

__all__ = ["atomic_write", "fsync_dir", "clone_file", "load_npy"]

_FICLONE = 0x40049409  # ioctl: share the source's blocks (btrfs, XFS with reflink, bcachefs)


def fsync_dir(directory: str | Path) -> None:
    """Make a rename or a new entry in ``directory`` durable (no-op where unsupported)."""
    try:
        fd = os.open(str(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_NPY_READ = threading.Lock()


def load_npy(path: str | Path) -> npt.NDArray[Any]:
    """``np.load(path, allow_pickle=False)``, one thread at a time in this process.

    numpy reads an ``.npy`` header with ``ast.literal_eval``, and CPython 3.11 keeps the AST
    constructor's depth counter per interpreter, not per thread: two threads parsing at once
    can fail with ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905;
    it failed an in-process memray whose two shards opened their snapshots together)."""
    with _NPY_READ:
        return np.load(path, allow_pickle=False)  # type: ignore[no-any-return]


def atomic_write(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through ``write(file)``. Durable when it returns; a crash at any point
    leaves either the old file or the new one, never a torn one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def clone_file(src: str | Path, dst: str | Path) -> bool:
    """Copy ``src`` to a new file ``dst``: a copy-on-write clone where the filesystem supports one
    (then it costs no data copy), else a kernel copy. fsynced when it returns. True if cloned."""
    cloned = False
    try:
        import fcntl  # POSIX only: elsewhere the ImportError below falls back to a copy

        with open(src, "rb") as fin, open(dst, "xb") as fout:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
            os.fsync(fout.fileno())
        cloned = True
    except (OSError, ImportError):
        if os.path.exists(dst):
            os.unlink(dst)
        shutil.copyfile(src, dst)
        with open(dst, "rb+") as f:
            os.fsync(f.fileno())
    return cloned
