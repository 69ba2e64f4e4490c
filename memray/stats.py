"""What a data directory holds (``memray stats PATH``), read from disk without starting memray.

Rows per table come from the history files (``history.duckdb``, or one per partition: each
partition's counts under ``stores``) opened read-only; while a ray-mode memray runs on the
directory (DuckDB then lets no other process open its files), they are asked of its store
actors, joined as any process joins it (:mod:`memray.runtime.join`). Shards are
described by their last snapshot (``vectors/shard-N/``): namespaces, items, how many are HNSW.
Hosts keep nothing on disk; what is shown for them is how the stored conversations spread over
``hosts`` hosts (the routing memray uses). Disk use is per top-level entry, in bytes.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import duckdb

import memray
from memray.config import MemoryConfig, default_hosts
from memray.errors import StoreError, ValidationError
from memray.runtime.join import RunningMemray, running_memray
from memray.store.census import table_counts
from memray.store.layout import data_directory, recorded_stores, store_file

__all__ = ["data_stats", "render"]


def data_stats(path: str, hosts: int | None = None) -> dict[str, Any]:
    """Counts per table, shard snapshots, conversations per host (over ``hosts``; default: the
    hosts of the ray-mode memray running on ``path``, else as many as :func:`memray.open` starts
    on this machine) and disk use of ``path``."""
    root = Path(path)
    n = data_directory(path)
    running = _running(path)  # asked once: its hosts are the default count, and it is joined if it holds the files
    if hosts is None:
        hosts = running.hosts if running is not None and running.hosts else default_hosts(None, None)
    files = [Path(store_file(str(root), i, n)) for i in range(n)]
    if hosts < 1:
        raise ValidationError("hosts", hosts, "must be a positive integer")
    parts = _counts(path, files, hosts, running is not None)
    tables = {t: sum(p[0].get(t, 0) for p in parts) for t in parts[0][0]}
    per_host = [sum(p[1][h] for p in parts) for h in range(hosts)]
    out: dict[str, Any] = {"path": str(root.resolve()), "tables": tables}
    if n > 1:
        out["stores"] = [{"store": i, "file": f.name, "tables": p[0]} for i, (f, p) in enumerate(zip(files, parts))]
    return {
        **out,
        "shards": [_shard(d) for d in sorted((root / "vectors").glob("shard-*"), key=lambda p: int(p.name[6:]))],
        "hosts": {"count": hosts, "conversations": per_host},
        "disk_bytes": {entry.name: _size(entry) for entry in sorted(root.iterdir())},
    }


Counts = tuple[dict[str, int], list[int]]


def _counts(path: str, files: list[Path], hosts: int, joinable: bool) -> list[Counts]:
    """Each partition's rows per table and conversations per host: read from its file, or, while a
    ray-mode memray runs on ``path`` (``joinable``), asked of its store actors (memray.runtime.join)."""
    try:
        cons = [duckdb.connect(str(f), read_only=True) for f in files]
    except duckdb.Error as exc:
        if "lock" in str(exc).lower() and joinable:
            return _counts_of_running(path, len(files), hosts)
        raise StoreError(
            f"cannot read {path!r}: {str(exc).splitlines()[0]}; another process (a memray in one process, or "
            "a job) has it open: run memray stats when it has stopped"
        ) from exc
    try:
        return [table_counts(con, hosts) for con in cons]
    finally:
        for con in cons:
            con.close()


def _running(path: str) -> RunningMemray | None:
    """The ray-mode memray running on ``path``, if one is (and can be joined)."""
    try:
        return running_memray(MemoryConfig(path=path, stores=recorded_stores(path) or 1))
    except StoreError:
        return None


def _counts_of_running(path: str, stores: int, hosts: int) -> list[Counts]:
    with memray.open(path, stores=stores) as mem:  # joins it: its Ray, namespace and shape
        clients = mem.internals.deployment.stores.clients
        return list(mem.internals.run(_gather([c.table_counts(hosts) for c in clients])))


async def _gather(calls: list[Any]) -> list[Any]:
    return list(await asyncio.gather(*calls))


def _shard(directory: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"shard": int(directory.name[6:]), "disk_bytes": _size(directory)}
    try:
        current = json.loads((directory / "CURRENT").read_text())["snapshot"]
        meta = json.loads((directory / current / "shard.json").read_text())
    except (OSError, ValueError, KeyError):
        return {**out, "snapshot": None}
    spaces = meta.get("spaces", [])
    return {
        **out,
        "snapshot": current,
        "model_id": meta.get("model_id"),
        "dim": meta.get("dim"),
        "namespaces": len(spaces),
        "items": sum(int(s[5]) for s in spaces),
        "hnsw_namespaces": sum(1 for s in spaces if s[6] != "exact"),
    }


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    total = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


def render(stats: dict[str, Any]) -> str:
    """The stats as a short human-readable report."""
    lines = [f"memray data in {stats['path']}", "", "rows per table:"]
    lines += [f"  {name:<16} {count:>12,}" for name, count in stats["tables"].items()]
    lines += ["", "vector shards (last snapshot):"]
    for s in stats["shards"] or [{"shard": "-", "snapshot": None, "disk_bytes": 0}]:
        if s["snapshot"] is None:
            lines.append(f"  shard {s['shard']}: no snapshot yet")
        else:
            lines.append(
                f"  shard {s['shard']}: {s['items']:,} items in {s['namespaces']:,} namespaces "
                f"({s['hnsw_namespaces']} HNSW), model {s['model_id']} dim {s['dim']}, {_human(s['disk_bytes'])}"
            )
    hosts = stats["hosts"]
    lines += [
        "",
        f"conversations per host (routed over {hosts['count']} hosts): "
        + ", ".join(f"{n:,}" for n in hosts["conversations"]),
    ]
    lines += ["", "disk use:"]
    lines += [f"  {name:<24} {_human(size):>10}" for name, size in stats["disk_bytes"].items()]
    lines.append(f"  {'total':<24} {_human(sum(stats['disk_bytes'].values())):>10}")
    return "\n".join(lines)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} B"
