"""Where a data directory keeps its history partitions, and how many it was written with.

``MemoryConfig.stores`` HistoryStore partitions each own one DuckDB file; a user lives on
partition :func:`partition_of` ``(app, user_id, stores)`` (the vector shards' hash, so a user's
conversations, entries, vectors and erasure stay on one partition). File names:

- ``stores=1`` (the default): ``history.duckdb``, the name every data directory has had, so an
  existing directory opens unchanged;
- ``stores=N > 1``: ``history-0.duckdb`` … ``history-<N-1>.duckdb``.

Each partition exports to its own Parquet root (:func:`export_root`): the configured root itself
with one partition, ``<root>/store-<i>`` with more (the partitions never rebuild each other's
folders). The count is recorded in ``<root>/partitions.json`` when a directory is first opened;
opening it with another count raises :class:`~memray.errors.ValidationError` naming both numbers
before any file is touched, so nothing is lost (a user would otherwise be looked up on the wrong
partition). A directory from before the record has one partition (``history.duckdb``).
"""

from __future__ import annotations

import json
import os

from memray.config import MemoryConfig
from memray.errors import ValidationError
from memray.files import atomic_write
from memray.ids import user_hash

__all__ = [
    "PARTITIONS_FILE",
    "partition_of",
    "store_file",
    "store_files",
    "export_root",
    "export_roots",
    "recorded_stores",
    "data_directory",
    "check_stores",
]

PARTITIONS_FILE = "partitions.json"


def partition_of(app: str, user_id: str, stores: int) -> int:
    """The partition (of ``stores``) holding the user: ``user_hash(app, user_id) % stores``, the
    same hash that places the user's vectors on a shard."""
    return user_hash(app, user_id) % stores


def store_file(root: str, partition: int, stores: int) -> str:
    """The DuckDB file of ``partition`` (module docstring for the names)."""
    name = "history.duckdb" if stores == 1 else f"history-{partition}.duckdb"
    return os.path.join(os.path.abspath(root), name)


def store_files(config: MemoryConfig) -> list[str]:
    """Every partition's DuckDB file of ``config``'s data directory."""
    return [store_file(config.root, i, config.stores) for i in range(config.stores)]


def export_root(root: str, partition: int, stores: int) -> str:
    """The Parquet export root of ``partition`` under the export root ``root``."""
    root = os.path.abspath(root)
    return root if stores == 1 else os.path.join(root, f"store-{partition}")


def export_roots(config: MemoryConfig) -> list[str]:
    """Every partition's export root under ``config.exports_path`` (what the batch jobs read)."""
    return [export_root(config.exports_path, i, config.stores) for i in range(config.stores)]


def recorded_stores(root: str) -> int | None:
    """The partition count the data directory ``root`` was written with; None for a new one (or
    for a path that is no directory)."""
    try:
        with open(os.path.join(root, PARTITIONS_FILE), encoding="utf-8") as f:
            return int(json.load(f)["stores"])
    except (FileNotFoundError, NotADirectoryError):
        pass
    if os.path.exists(os.path.join(root, "history.duckdb")):
        return 1  # written before the record existed: one partition
    return None


def data_directory(path: str | None) -> int:
    """The partition count of the existing memray data directory at ``path``; a ValidationError
    naming the path and what to give instead when it is none (missing, a file, no history file)."""
    fix = "give the data directory of a memray (the path memray.open was given)"
    if not path:
        raise ValidationError("path", path, "is missing", fix)
    if not os.path.exists(path):
        raise ValidationError("path", path, "does not exist", fix)
    if not os.path.isdir(path):
        raise ValidationError("path", path, "is a file, not a directory", fix)
    stores = recorded_stores(path)
    if stores is None or not all(os.path.isfile(store_file(path, i, stores)) for i in range(stores)):
        raise ValidationError("path", path, "holds no memray data (no history.duckdb)", fix)
    return stores


def check_stores(root: str, stores: int) -> None:
    """Raise if ``root`` was written with another partition count; record ``stores`` for a new
    directory (durably: temp file, fsync, rename).

    Call it before opening any partition file."""
    recorded = recorded_stores(root)
    if recorded is not None and recorded != stores:
        raise ValidationError(
            "stores",
            stores,
            f"the data in {root} was written with stores={recorded}, not {stores}: each user lives on "
            f"partition user_hash % {recorded}, so another count would look for them in the wrong file",
            f"open it with stores={recorded} (nothing was changed)",
        )
    if recorded is None or not os.path.exists(os.path.join(root, PARTITIONS_FILE)):
        os.makedirs(root, exist_ok=True)
        data = json.dumps({"stores": stores}).encode()
        atomic_write(os.path.join(root, PARTITIONS_FILE), lambda f: f.write(data))
