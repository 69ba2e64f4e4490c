"""One DuckDB file, one connection, one writer: transactions, the change counter, and the
rewrite that makes erasure physical."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from memray.errors import ClosedError, MemrayError, StoreError
from memray.files import atomic_write
from memray.store.schema import DDL, MIGRATIONS

__all__ = ["Database", "Holder", "lock_holder", "check_not_in_use", "in_use_message", "read_owner"]


class Database:
    """The connection of a :class:`~memray.store.history.HistoryStore`.

    ``version`` counts committed write transactions; every row a transaction writes carries it
    as ``changed_version`` (the Parquet export's watermark). It is persisted in the ``meta`` table
    inside the same transaction, so it never goes backwards, even when rows are deleted.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._con: duckdb.DuckDBPyConnection | None = None
        self.version = 0
        #: False while ``dead_letters`` is known empty (checked at open, set by every insert):
        #: a commit then skips clearing the dead letters of the ids it stores.
        self.dead_letters_possible = False

    # -- lifecycle ------------------------------------------------------------------------
    def open(self, owner: dict[str, Any] | None = None) -> None:
        """Open (creating if needed) the file and its tables, add the columns of later releases
        (:data:`~memray.store.schema.MIGRATIONS`), and finish an interrupted rewrite. ``owner``
        (how to reach this process: mode, Ray address...) is recorded next to the file with this
        process's pid and host, so a process that finds the file locked can say by whom. A file
        locked by another process raises StoreError at once, naming that process."""
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        try:
            self._con = duckdb.connect(self.path)
        except duckdb.Error as exc:
            if "lock" in str(exc).lower():
                raise StoreError(in_use_message(self.path, Holder.of(self.path, str(exc)))) from None
            raise StoreError(f"cannot open history store {self.path!r}: {exc}") from exc
        _remove(self._rewrite_path)
        _write_owner(self.path + ".owner", owner)
        for stmt in (*DDL, *MIGRATIONS):
            self._con.execute(stmt)
        rows = self.sql("SELECT key, value FROM meta").fetchall()
        meta = {str(k): int(v) for k, v in rows}
        if "version" not in meta:
            self.con.execute("INSERT INTO meta VALUES ('version', 0), ('rewrite_pending', 0)")
        self.version = meta.get("version", 0)
        self.dead_letters_possible = bool(self.sql("SELECT EXISTS (SELECT 1 FROM dead_letters)").fetchall()[0][0])
        if meta.get("rewrite_pending", 0):
            self.rewrite()  # a delete_user committed but its rewrite did not finish

    def close(self) -> None:
        """Checkpoint (fold the WAL into the file) and close. Idempotent."""
        if self._con is not None:
            try:
                self._con.execute("CHECKPOINT")
            finally:
                self._con.close()
                self._con = None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            raise ClosedError(f"history store {self.path!r} is not open; call open()")
        return self._con

    @property
    def is_open(self) -> bool:
        return self._con is not None

    # -- statements -----------------------------------------------------------------------
    def sql(self, query: str, params: list[Any] | tuple[Any, ...] | None = None) -> duckdb.DuckDBPyConnection:
        """Execute one statement; translate DuckDB failures into :class:`StoreError`."""
        try:
            return self.con.execute(query, params) if params is not None else self.con.execute(query)
        except duckdb.Error as exc:
            raise StoreError(f"history store query failed: {exc}") from exc

    def count(self, query: str, params: list[Any] | tuple[Any, ...] | None = None) -> int:
        """Run a DELETE/UPDATE/INSERT and return the number of rows it touched."""
        rows = self.sql(query, params).fetchall()
        return int(rows[0][0]) if rows else 0

    def arrow(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """Run a query and return its result as one Arrow table (no DB-API copy)."""
        try:
            return self.con.sql(query, params=params).to_arrow_table()
        except duckdb.Error as exc:
            raise StoreError(f"history store query failed: {exc}") from exc

    @contextlib.contextmanager
    def transaction(self, bump: bool = True, **tables: pa.Table) -> Iterator[int]:
        """One transaction, whole or nothing. Yields the version its rows carry; commits on exit,
        rolls back on any error. ``tables`` are registered as views for its statements.

        Durability: when the block exits normally the transaction is committed to the WAL and
        survives a crash (SIGKILL) of the process."""
        con = self.con
        version = self.version + 1 if bump else self.version
        for name, table in tables.items():
            con.register(name, table)
        self.sql("BEGIN TRANSACTION")
        try:
            yield version
            if bump:
                self.sql("UPDATE meta SET value = ? WHERE key = 'version'", [version])
            self.sql("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            if isinstance(exc, (MemrayError, KeyboardInterrupt, SystemExit)):
                raise
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"history store write failed, nothing written: {exc}") from exc
            raise
        finally:
            for name in tables:
                with contextlib.suppress(duckdb.Error):
                    con.unregister(name)
        if bump:
            self.version = version

    # -- physical erasure -----------------------------------------------------------------
    @property
    def _rewrite_path(self) -> str:
        return self.path + ".rewrite"

    def mark_rewrite_pending(self) -> None:
        """Inside a transaction: record that the file must be rewritten (crash-safe erasure)."""
        self.sql("UPDATE meta SET value = 1 WHERE key = 'rewrite_pending'")

    def rewrite(self) -> None:
        """Copy every live row into a fresh file and swap it in, so no freed block of the old file
        (DuckDB keeps deleted rows' bytes in free blocks) survives, and no WAL is left.

        Durability: the new file is fsynced, then atomically renamed over the old one and the
        directory fsynced; a crash at any point leaves either the old file (with the pending mark,
        so :meth:`open` redoes the rewrite) or the new one. Cost: a full copy of the database."""
        con = self.con
        tmp = self._rewrite_path
        _remove(tmp)
        current = str(self.sql("SELECT current_database()").fetchall()[0][0])
        self.sql("CHECKPOINT")
        self.sql(f"ATTACH {_literal(tmp)} AS memray_fresh")
        try:
            self.sql(f"COPY FROM DATABASE {_ident(current)} TO memray_fresh")
            self.sql("UPDATE memray_fresh.meta SET value = 0 WHERE key = 'rewrite_pending'")
        finally:
            self.sql("DETACH memray_fresh")
        con.close()
        self._con = None
        _fsync(tmp)
        os.replace(tmp, self.path)
        _remove(self.path + ".wal")
        _fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        self._con = duckdb.connect(self.path)


@dataclass(frozen=True)
class Holder:
    """The process that holds a history file's lock: its pid (DuckDB names it in the lock error,
    None if it does not), the error's text, and the record it wrote next to the file when that
    record is its own (``{}`` otherwise): mode, Ray address, namespace... (see :meth:`Database.open`)."""

    pid: int | None
    error: str
    owner: dict[str, Any]

    @classmethod
    def of(cls, path: str, error: str) -> Holder:
        pid = re.search(r"\(PID (\d+)\)", error)
        holder = int(pid.group(1)) if pid else None
        owner = read_owner(path)
        return cls(holder, error, owner if owner and (holder is None or owner.get("pid") == holder) else {})

    def describe(self) -> str:
        """Who it is, for messages: "memray store actor pid 4242 on node-1 (mode=ray, since ..., Ray at ...)"."""
        info = self.owner
        if not info:
            return f"process {self.pid}" if self.pid is not None else "another process"
        who = (
            f"memray {info.get('role', 'store')} pid {info.get('pid')} on {info.get('host')} "
            f"(mode={info.get('mode', '?')}, since {info.get('since')}"
        )
        if info.get("address"):
            return f"{who}, Ray at {info['address']}, namespace {info.get('namespace')!r})"
        return who + ")"


def lock_holder(path: str, wait_s: float = 2.0) -> Holder | None:
    """The process holding the history file at ``path``, or None if no other process does (no
    file, or this process holding it: the real open decides). A read-only probe that takes
    milliseconds. A holder that has just taken the lock writes its record right after: the
    probe waits for it (at most ``wait_s``), so a record left by an earlier holder is never
    taken for the current one's."""
    if not os.path.exists(path):
        return None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            duckdb.connect(path, read_only=True).close()
            return None
        except duckdb.Error as exc:
            if "lock" not in str(exc).lower():
                return None
            holder = Holder.of(path, str(exc))
        if holder.owner or holder.pid is None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.02)  # its record is being written


def check_not_in_use(path: str) -> None:
    """Raise StoreError (naming the holder, :func:`in_use_message`) if another process holds the
    history file at ``path`` (:func:`lock_holder`)."""
    holder = lock_holder(path)
    if holder is not None:
        raise StoreError(in_use_message(path, holder))


def read_owner(path: str) -> dict[str, Any]:
    """The record the last process to open the history file at ``path`` wrote next to it (``{}``
    if none can be read)."""
    try:
        with open(path + ".owner", encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _write_owner(path: str, owner: dict[str, Any] | None) -> None:
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        **(owner or {}),
    }
    with contextlib.suppress(OSError):
        atomic_write(path, lambda f: f.write(json.dumps(info).encode()))


def in_use_message(path: str, holder: Holder) -> str:
    """What to tell a process that finds the history file locked: by whom, and what to do."""
    info = holder.owner
    if info.get("mode") == "ray":
        hint = (
            f"to share it, open it with mode='ray' (the default) and no address (or address={info.get('address')!r}) "
            "on this machine: memray then joins that Ray and its actors; or close that memray first, or open "
            "another path"
        )
    elif info:
        hint = (
            "a memray in one process cannot be shared: close it first (or open it there with mode='ray', "
            "which others then join), or open another path"
        )
    else:
        hint = "stop that process first, or open another path"
    where = os.path.dirname(path)
    return f"the data directory {where!r} is in use by {holder.describe()}: its history store is locked; {hint}"


def _literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        _fsync(path)
