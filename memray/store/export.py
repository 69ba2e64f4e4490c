"""Parquet exports of messages and entries for the batch jobs and analytics.

Layout::

    <root>/messages/app_key=<key>/bucket=<b>/part-<version>-<i>.parquet
    <root>/entries/app_key=<key>/bucket=<b>/part-<version>-<i>.parquet

``bucket = user_hash(app, user_id) % EXPORT_BUCKETS``. Partitioning by user bucket, not by date,
keeps each user inside one partition per app: erasing a user rewrites one partition instead of
every date. Every file holds the real ``app`` column (read it from the files, with or without
hive partitioning). The folder name is derived from the app by :func:`app_key`: the app itself
(URI-encoded in the path) when short, else a readable prefix and a 128-bit hash — an app id may
be 256 characters (up to 2,304 bytes URI-encoded), and a folder name may not exceed 255 bytes.

Incremental: an export finds the partitions holding rows changed since the root's watermark
(``changed_version``) and rebuilds exactly those partitions from the store, so the export always
holds one row per key (no duplicates to reconcile) and a rerun after a crash is idempotent.
A partition is built in ``<root>/.staging`` and swapped in by rename; a crash mid-swap is
repaired by the next export or purge (``<root>/.trash`` names what to rebuild).

Deletes: the export never resurrects deleted rows, because every rewrite comes from the store.
``delete_conversation`` and ``delete_user`` purge every root this store has exported to (the
roots are remembered in ``export_state``), and :func:`purge_exports` does the same on demand.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import urllib.parse
import uuid
from typing import Any

import pyarrow as pa

from memray.ids import user_hash
from memray.store.database import Database
from memray.store.schema import ENTRY_COLUMNS, MESSAGE_COLUMNS

__all__ = [
    "EXPORT_BUCKETS",
    "export_parquet",
    "purge_exports",
    "purge_conversation",
    "export_roots",
    "app_key",
    "count_messages",
]

EXPORT_BUCKETS = 16
_EXTRA = ("embed_state", "model_id", "user_hash", "changed_version")
_COLUMNS = {"messages": MESSAGE_COLUMNS + _EXTRA, "entries": ENTRY_COLUMNS + _EXTRA}
_BUCKET = f"CAST(((user_hash % {EXPORT_BUCKETS}) + {EXPORT_BUCKETS}) % {EXPORT_BUCKETS} AS INTEGER)"
_PARTITION_SCHEMA = pa.schema([("app_key", pa.string()), ("bucket", pa.int32())])


def _dataset() -> Any:
    """``pyarrow.dataset``, imported on first use: it pulls in pandas (~0.3 s), and every actor
    process imports this module while only the store's exports need it (start-up time)."""
    import pyarrow.dataset as ds

    return ds


#: Longest URI-encoded app kept as its own folder name (``app_key=`` + this stays far below 255).
_READABLE_BYTES = 96

Partition = tuple[str, str, int]  # (table, app, bucket)


def app_key(app: str) -> str:
    """The folder key of ``app``'s partitions: ``app`` itself when its URI-encoded form is at
    most 96 bytes and holds no ``~``; otherwise a prefix of it, ``~`` and 32 hex digits of its
    BLAKE2b hash. Distinct apps get distinct keys (a plain key has no ``~``, a hashed one
    exactly one before the digest), and every key fits a folder name whatever the app."""
    if "~" not in app and len(urllib.parse.quote(app, safe="")) <= _READABLE_BYTES:
        return app
    prefix = app[:24].replace("~", "")
    while len(urllib.parse.quote(prefix, safe="")) > 48:
        prefix = prefix[:-1]
    return f"{prefix}~{hashlib.blake2b(app.encode('utf-8'), digest_size=16).hexdigest()}"


def bucket_of(app: str, user_id: str) -> int:
    return user_hash(app, user_id) % EXPORT_BUCKETS


def export_roots(db: Database) -> list[str]:
    return [str(r[0]) for r in db.sql("SELECT root FROM export_state ORDER BY root").fetchall()]


def export_parquet(db: Database, root: str) -> dict[str, Any]:
    """Rebuild the partitions changed since this root's last export; advance its watermark.

    Durability: files are fully written before they are renamed into place; the watermark is
    committed only after every partition is in place, so a crash means the next export redoes
    the work. Returns ``{"root", "watermark", "previous_watermark", "rows", "rows_written",
    "partitions", "files"}``: ``rows`` changed rows exported, ``rows_written`` rows in the
    rebuilt partitions, ``files`` the Parquet files written (empty when nothing changed)."""
    root = os.path.abspath(root)
    rows = db.sql("SELECT watermark FROM export_state WHERE root = ?", [root]).fetchall()
    previous = int(rows[0][0]) if rows else 0
    watermark = db.version
    todo = set(_recover(db, root))
    changed = 0
    for table in _COLUMNS:
        found = db.sql(
            f"SELECT app, {_BUCKET} AS bucket, count(*) FROM {table} WHERE changed_version > ? GROUP BY ALL", [previous]
        ).fetchall()
        changed += sum(int(r[2]) for r in found)
        todo.update((table, str(r[0]), int(r[1])) for r in found)
    files, written = _rebuild(db, root, sorted(todo), watermark)
    _drop_legacy(root)
    with db.transaction(bump=False):
        db.sql("DELETE FROM export_state WHERE root = ?", [root])
        db.sql("INSERT INTO export_state VALUES (?, ?, ?)", [root, watermark, time.time()])
    return {
        "root": root,
        "watermark": watermark,
        "previous_watermark": previous,
        "rows": changed,
        "rows_written": written,
        "partitions": len(todo),
        "files": files,
    }


def purge_exports(db: Database, root: str, app: str, user_id: str) -> int:
    """Rewrite the user's partitions under ``root`` without the user; returns rows removed.
    Durability: as :func:`export_parquet` (rename into place; a crash is repaired next time)."""
    root = os.path.abspath(root)
    b = bucket_of(app, user_id)
    removed = sum(_count(_partition_dir(root, t, app, b), app, user_id, None) for t in _COLUMNS)
    todo = sorted(set(_recover(db, root)) | {(t, app, b) for t in _COLUMNS})
    _rebuild(db, root, todo, db.version, exclude=(app, user_id))
    _drop_legacy(root)
    return removed


def purge_conversation(
    db: Database, root: str, app: str, user_id: str, conversation_id: str, ids: list[str] | None = None
) -> int:
    """Rebuild the partition of a deleted conversation's messages (or of its deleted messages
    ``ids``); returns rows removed."""
    root = os.path.abspath(root)
    b = bucket_of(app, user_id)
    removed = _count(_partition_dir(root, "messages", app, b), app, user_id, conversation_id, ids)
    _rebuild(db, root, sorted(set(_recover(db, root)) | {("messages", app, b)}), db.version)
    _drop_legacy(root)
    return removed


def count_messages(root: str, app: str, user_id: str, conversation_id: str, ids: list[str] | None = None) -> int:
    """Rows of a conversation's messages (only ``ids`` when given) in the export under ``root``."""
    return _count(
        _partition_dir(os.path.abspath(root), "messages", app, bucket_of(app, user_id)),
        app,
        user_id,
        conversation_id,
        ids,
    )


def _partition_dir(root: str, table: str, app: str, bucket: int) -> str:
    return os.path.join(root, table, "app_key=" + urllib.parse.quote(app_key(app), safe=""), f"bucket={bucket}")


def _count(path: str, app: str, user_id: str, conversation_id: str | None, ids: list[str] | None = None) -> int:
    if not os.path.isdir(path):
        return 0
    ds = _dataset()
    cond = ds.field("user_id") == user_id
    if "app" in ds.dataset(path, format="parquet").schema.names:  # count the app's rows only, whatever the folder
        cond = cond & (ds.field("app") == app)
    if conversation_id is not None:
        cond = cond & (ds.field("conversation_id") == conversation_id)
    if ids is not None:
        cond = cond & ds.field("id").isin(ids)
    return int(ds.dataset(path, format="parquet").count_rows(filter=cond))


def _rebuild(
    db: Database, root: str, todo: list[Partition], version: int, exclude: tuple[str, str] | None = None
) -> tuple[list[str], int]:
    """Build ``todo``'s partitions from the store in staging, then swap each into place."""
    op = uuid.uuid4().hex
    stage, trash = os.path.join(root, ".staging", op), os.path.join(root, ".trash", op)
    files: list[str] = []
    written = 0
    for table in _COLUMNS:
        parts = [(app, b) for t, app, b in todo if t == table]
        if not parts:
            continue
        data = _select(db, table, parts, exclude)
        keys = {a: app_key(a) for a in set(data["app"].to_pylist())}
        data = data.append_column("app_key", pa.array([keys[a] for a in data["app"].to_pylist()], pa.string()))
        written += data.num_rows
        if data.num_rows:
            ds = _dataset()
            ds.write_dataset(
                data,
                os.path.join(stage, table),
                format="parquet",
                partitioning=ds.partitioning(_PARTITION_SCHEMA, flavor="hive"),
                existing_data_behavior="error",
                basename_template=f"part-{version}-{{i}}.parquet",
            )
        for app, b in parts:
            files.extend(_swap(root, table, app, b, stage, trash))
    shutil.rmtree(trash, ignore_errors=True)
    shutil.rmtree(stage, ignore_errors=True)
    return files, written


def _select(db: Database, table: str, parts: list[tuple[str, int]], exclude: tuple[str, str] | None) -> pa.Table:
    cols = ", ".join(f"t.{c}" for c in _COLUMNS[table])
    wanted = pa.table(
        {"app": pa.array([p[0] for p in parts], pa.string()), "bucket": pa.array([p[1] for p in parts], pa.int32())}
    )
    where, params = "", []
    if exclude is not None:
        where, params = "WHERE NOT (t.app = ? AND t.user_id = ?)", list(exclude)
    db.con.register("_parts", wanted)
    try:
        return db.arrow(
            f"""SELECT {cols}, p.bucket FROM (SELECT *, {_BUCKET} AS bucket FROM {table}) t
                            JOIN _parts p ON t.app = p.app AND t.bucket = p.bucket {where}""",
            params,
        )
    finally:
        db.con.unregister("_parts")


def _swap(root: str, table: str, app: str, bucket: int, stage: str, trash: str) -> list[str]:
    """Replace the partition's directory by its staged one (or remove it when it is now empty)."""
    target = _partition_dir(root, table, app, bucket)
    staged = os.path.join(stage, os.path.relpath(target, root))
    if os.path.isdir(target):
        held = os.path.join(trash, os.path.relpath(target, root))
        os.makedirs(os.path.dirname(held), exist_ok=True)
        os.rename(target, held)  # until the staged copy is in place, .trash names what to rebuild
    if not os.path.isdir(staged):
        return []
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.rename(staged, target)
    return sorted(os.path.join(target, f) for f in os.listdir(target))


def _recover(db: Database, root: str) -> list[Partition]:
    """Partitions a crashed rebuild left missing (their old copy is still in ``.trash``: the apps
    are read from its files, since a hashed folder name cannot be decoded), and every partition
    of a root written in the old ``app=<app>`` layout (rebuilt in the current one; the old
    folders are removed once the rebuild is in place, by :func:`_drop_legacy`)."""
    out: list[Partition] = []
    trash_root = os.path.join(root, ".trash")
    for op in _listdir(trash_root):
        for table in _listdir(os.path.join(trash_root, op)):
            for app_dir in _listdir(os.path.join(trash_root, op, table)):
                for bucket_dir in _listdir(os.path.join(trash_root, op, table, app_dir)):
                    bucket = int(bucket_dir.removeprefix("bucket="))
                    out.extend(
                        (table, app, bucket)
                        for app in _apps_in(os.path.join(trash_root, op, table, app_dir, bucket_dir))
                    )
    if _legacy_dirs(root):
        for table in _COLUMNS:
            found = db.sql(f"SELECT DISTINCT app, {_BUCKET} FROM {table}").fetchall()
            out.extend((table, str(a), int(b)) for a, b in found)
    shutil.rmtree(trash_root, ignore_errors=True)
    shutil.rmtree(os.path.join(root, ".staging"), ignore_errors=True)
    return [p for p in out if p[0] in _COLUMNS]


def _apps_in(path: str) -> set[str]:
    import pyarrow.parquet as pq

    apps: set[str] = set()
    for name in _listdir(path):
        if name.endswith(".parquet"):
            table = pq.read_table(os.path.join(path, name), columns=["app"])
            apps.update(str(a) for a in table["app"].to_pylist())
    return apps


def _legacy_dirs(root: str) -> list[str]:
    """Partition folders of the old layout (``app=<app>``, written before the app column was
    kept in the files)."""
    return [os.path.join(root, t, d) for t in _COLUMNS for d in _listdir(os.path.join(root, t)) if d.startswith("app=")]


def _drop_legacy(root: str) -> None:
    for path in _legacy_dirs(root):
        shutil.rmtree(path, ignore_errors=True)


def _listdir(path: str) -> list[str]:
    return sorted(os.listdir(path)) if os.path.isdir(path) else []
