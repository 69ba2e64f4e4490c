"""Forks: a consistent copy of a whole memray, taken while agents keep writing.

:func:`fork_deployment` runs, in order:

1. every host flushes: every message acknowledged before the fork began is committed;
2. the store copies its DuckDB file inside one store call (:mod:`memray.store.fork`). The store
   runs one call at a time, so the copy holds exactly the transactions committed before it: this
   is the fork's **point in time**. Conversations, messages, entries, working memory, summaries
   and stored vectors are all in that file, so they are all as of that instant. A message
   acknowledged while the fork runs is in it if its group commit came first, and then whole;
3. every shard snapshots (if anything changed) and links that snapshot into the fork
   (:mod:`memray.index.fork`): hard links, no data copied. The snapshot may differ from the
   store copy only in the items written around the fork, and those are listed in each fork
   shard's marker: the items written after the store version read *before* step 1, and the
   items the embedding pipelines held unconfirmed after step 1 (committed, not yet indexed).
   Any other item was indexed before the snapshot and not written since, so the snapshot holds
   it as the copy does. The fork's shards re-read the listed items from the fork's store when it
   first opens, drop what that store lacks and add what they lack (set differences), and items
   the source had not embedded yet are embedded by the fork's own pipeline;
4. the small records of the data directory (``calibration.json``, ``model.json``) are copied.

What a fork does not take: the source's Parquet exports (the fork exports afresh), a
re-embedding job in progress (the fork has the active model), and in-memory state (buffers,
caches). A fork is a copy: erasing a user in the source does not erase them in the fork.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

from memray.config import MemoryConfig
from memray.errors import ValidationError
from memray.files import fsync_dir
from memray.ids import Namespace, user_hash
from memray.index.fork import write_marker
from memray.runtime.deploy import Deployment, shard_path

__all__ = ["fork_deployment", "check_fork_path", "RECORDS"]

#: Files of the data directory's root a fork copies.
RECORDS = ("calibration.json", "model.json", "partitions.json")


def _ref(ref: tuple[Any, str]) -> tuple[Namespace, str]:
    return Namespace(*ref[0]), ref[1]


def check_fork_path(root: str, dst: object) -> str:
    """``dst`` as an absolute path a fork of ``root`` may be written to: not inside the source
    (nor the source inside it), and new or an empty folder."""
    if not isinstance(dst, (str, os.PathLike)):
        raise ValidationError("path", dst, f"must be a path, got {type(dst).__name__}")
    target = os.path.abspath(os.fspath(dst))
    source = os.path.abspath(root)
    if os.path.commonpath([target, source]) in (target, source):
        raise ValidationError(
            "path", target, f"overlaps the data directory being forked ({source})", "fork into a separate folder"
        )
    if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise ValidationError("path", target, "already exists and is not an empty folder", "fork into a new path")
    return target


async def fork_deployment(
    deployment: Deployment,
    config: MemoryConfig,
    dst: str,
    pending: Callable[[], list[tuple[Namespace, str]]] | None = None,
) -> dict[str, Any]:
    """Fork the running memray ``deployment`` (configured by ``config``) into ``dst`` (module
    docstring). ``pending`` lists the items this process submitted for indexing and not yet saw
    confirmed (the long-term service's). Returns timings and sizes. ``dst`` must have passed
    :func:`check_fork_path`."""
    t0 = time.perf_counter()
    before = await deployment.stores.versions()
    # durable, not reported: losses owed to a caller stay for its next flush, and fail no fork
    await asyncio.gather(*(h.flush(report=False) for h in deployment.hosts))
    unconfirmed = [r for refs in await asyncio.gather(*(h.unconfirmed() for h in deployment.hosts)) for r in refs]
    unconfirmed += pending() if pending is not None else []
    t_flush = time.perf_counter()
    target = config.model_copy(update={"path": dst})
    os.makedirs(dst, exist_ok=True)
    try:
        store = await deployment.stores.fork_to(target.root)
        t_store = time.perf_counter()
        linked = await asyncio.gather(*(s.fork_to(shard_path(target, i)) for i, s in enumerate(deployment.shards)))
        changed = await deployment.stores.changed_refs(before)
        reread = list(dict.fromkeys([*(_ref(r) for r in changed), *(_ref(r) for r in unconfirmed)]))
        for i in range(len(deployment.shards)):  # what each fork shard must re-read from the copy
            write_marker(
                shard_path(target, i),
                [r for r in reread if user_hash(r[0].app, r[0].user_id) % len(deployment.shards) == i],
            )
        for name in RECORDS:
            if os.path.exists(os.path.join(config.root, name)):
                shutil.copy2(os.path.join(config.root, name), os.path.join(dst, name))
        fsync_dir(dst)
    except BaseException:
        shutil.rmtree(dst, ignore_errors=True)  # no half-written fork is left to be opened
        raise
    t_end = time.perf_counter()
    return {
        "path": dst,
        "seconds": t_end - t0,
        "flush_s": t_flush - t0,
        "store_s": t_store - t_flush,
        "shards_s": t_end - t_store,
        "store_bytes": store["bytes"],
        "cloned": bool(store["cloned"]),
        "snapshot_files": sum(linked),
    }
