"""Erasing a user everywhere (``delete_user``) and proving it (``verify_deleted``).

Order of :func:`erase_user`, each step before the next:

0. the key ring deletes every API key bound to the user (``KeyRing.erase_user``) and returns once
   every server replica has dropped them: a key that could write for the user cannot write again
   while (or after) they are erased, and ``api_keys`` keeps no user id or label of theirs;
1. every host ``evict_user``: the user's in-memory conversations and queued embedding work are
   dropped, and an embedding batch in flight lands (so nothing writes for the user afterwards);
   the service's own pipeline likewise (``MemoryService.evict_user``);
2. ``store.delete_user``: every row of the user in one transaction, the Parquet exports purged,
   then the DuckDB file rewritten so freed blocks keep none of their bytes;
3. every shard ``drop``s the user's namespaces, then snapshots, which removes the older snapshot
   folders (the only files that held them);
4. every process's embedding cache is cleared (the hosts' and this process's). The cache is
   in-memory only and keyed by hashes of text, so it is emptied whole.

The receipt counts what each step removed. :func:`verify_user_deleted` then scans each store on
its own terms: the store's tables (``api_keys`` included), every shard's index, every host's memory and queue, the
service's queue, every export root's Parquet files (read back, rows counted), and the shard
snapshot files on disk (their JSON metadata names each namespace's user). Writing to a user while
erasing them is a race the caller must avoid: what lands after step 2 is not erased.
The file scans read the data directory from this process; on a multi-node cluster they need it
on a shared filesystem.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from memray.config import MemoryConfig
from memray.embedding.cache import CachedEmbedder
from memray.ids import ConversationKey, conversation_namespace, user_hash, validate_id
from memray.index.snapshot import segments
from memray.models import DeletionProof, DeletionReceipt
from memray.store.schema import TABLES
from memray.text import forget_texts

if TYPE_CHECKING:
    from memray.conversation.client import HostClient
    from memray.conversation.recall import Recall
    from memray.embedding.base import Embedder
    from memray.index.client import ShardClient
    from memray.service.client import KeyRingClient
    from memray.service.longterm import MemoryService
    from memray.store.partitions import StorePartitions

__all__ = [
    "erase_user",
    "verify_user_deleted",
    "verify_messages_deleted",
    "scan_exports",
    "scan_snapshots",
    "scan_snapshot_items",
    "clear_cache",
    "RECEIPT_KEYS",
]

#: The keys of a receipt's ``counts``.
RECEIPT_KEYS = (
    "api_keys",
    "messages",
    "conversations",
    "entries",
    "embeddings",
    "working_memory",
    "summaries",
    "vectors",
    "export_rows",
    "host_conversations",
    "caches",
)


def clear_cache(embedder: Embedder | None) -> int:
    """Empty ``embedder``'s cache if it has one; returns the entries dropped."""
    return embedder.cache.clear() if isinstance(embedder, CachedEmbedder) else 0


async def erase_user(
    store: StorePartitions,
    shards: list[ShardClient],
    hosts: list[HostClient],
    service: MemoryService,
    embedder: Embedder | None,
    app: str,
    user_id: str,
    recall: Recall | None = None,
    keys: KeyRingClient | None = None,
) -> DeletionReceipt:
    """Erase the user from every store (module docstring); returns counts per store. ``keys``
    None: a memray whose key ring is not reachable from here (then ``api_keys`` counts 0)."""
    validate_id("app", app)
    validate_id("user_id", user_id)
    revoked = await keys.erase_user(app, user_id) if keys is not None else 0
    async with service.user_lock(app, user_id):
        evicted = await asyncio.gather(*(h.evict_user(app, user_id) for h in hosts))
        forgotten = recall.written.forget_user(app, user_id) if recall is not None else 0
        await service.evict_user(app, user_id)
        stored: dict[str, int] = await store.delete_user(app, user_id)
        dropped = await asyncio.gather(*(s.drop(app, user_id) for s in shards))
        await asyncio.gather(*(s.snapshot() for s in shards))
        cleared = await asyncio.gather(*(h.clear_caches() for h in hosts))
    counts = {t: int(stored.get(t, 0)) for t in TABLES}
    counts.update(
        api_keys=revoked,
        vectors=sum(dropped),
        export_rows=int(stored.get("export_rows", 0)),
        host_conversations=sum(evicted),
        caches=sum(cleared) + clear_cache(embedder) + forgotten + forget_texts(),
    )
    return DeletionReceipt(app=app, user_id=user_id, counts={k: counts[k] for k in RECEIPT_KEYS})


async def verify_user_deleted(
    store: StorePartitions,
    shards: list[ShardClient],
    hosts: list[HostClient],
    service: MemoryService,
    config: MemoryConfig,
    app: str,
    user_id: str,
    recall: Recall | None = None,
) -> DeletionProof:
    """Scan every store for the user; ``remaining`` counts what is left in each."""
    validate_id("app", app)
    validate_id("user_id", user_id)
    store_counts, keys_left, shard_counts, host_counts, roots = await asyncio.gather(
        store.count_user(app, user_id),
        store.count_user_api_keys(app, user_id),
        asyncio.gather(*(s.count_user(app, user_id) for s in shards)),
        asyncio.gather(*(h.count_user(app, user_id) for h in hosts)),
        store.export_roots(),
    )
    export_roots = outermost({os.path.abspath(r) for r in roots} | {config.exports_path})
    export_rows = await asyncio.to_thread(lambda: sum(scan_exports(r, app, user_id) for r in export_roots))
    snapshot_items = await asyncio.to_thread(scan_snapshots, config.vectors_path, app, user_id)
    remaining = {t: int(store_counts.get(t, 0)) for t in TABLES}
    remaining.update(
        api_keys=keys_left,
        vectors=sum(shard_counts),
        host_conversations=sum(c["conversations"] for c in host_counts),
        host_queued=sum(c["queued"] for c in host_counts),
        service_queued=service.count_user(app, user_id),
        read_your_writes=recall.written.count_user(app, user_id) if recall is not None else 0,
        export_rows=export_rows,
        snapshot_items=snapshot_items,
    )
    scanned = [f"{store.label} (tables: {', '.join(TABLES)}, api_keys)"]
    scanned += [s.label for s in shards] + [h.label for h in hosts]
    scanned += ["service embedding queue", "this process's read-your-writes messages"]
    scanned += [f"exports {r}" for r in export_roots]
    scanned.append(f"shard snapshots {config.vectors_path}")
    return DeletionProof(app=app, user_id=user_id, remaining=remaining, scanned=scanned)


async def verify_messages_deleted(
    store: StorePartitions,
    shards: list[ShardClient],
    hosts: list[HostClient],
    config: MemoryConfig,
    key: ConversationKey,
    ids: list[str] | None,
) -> DeletionProof:
    """Scan every store for a conversation's messages (``ids``, or all of them): the store's
    messages and vectors, the user's shard (after a snapshot, its snapshot files too), the
    conversation's host (buffer, read-your-writes tail, embedding queue) and every export root.
    The proof after ``delete_messages(ids)`` or ``clear()`` (docs/conversations.md)."""
    ns = conversation_namespace(key)
    i = user_hash(key.app, key.user_id) % len(shards)
    shard, host = shards[i], hosts[key.route(len(hosts))]
    await shard.snapshot()  # the files on disk reflect the deletes
    stored, vectors, held = await asyncio.gather(
        store.count_messages(key, ids), shard.count_items(ns, ids), host.count_messages(key, ids)
    )
    folder = os.path.join(config.vectors_path, f"shard-{i}")
    on_disk = await asyncio.to_thread(scan_snapshot_items, folder, ns, ids)
    remaining = {**{k: int(v) for k, v in stored.items()}, "vectors": int(vectors), **held, "snapshot_items": on_disk}
    scanned = [
        f"{store.label} (messages, embeddings)",
        shard.label,
        host.label,
        "export roots",
        f"shard snapshots {folder}",
    ]
    return DeletionProof(app=key.app, user_id=key.user_id, remaining=remaining, scanned=scanned)


def scan_snapshot_items(folder: str, namespace: tuple[str, str, str, str], ids: list[str] | None) -> int:
    """Items of ``namespace`` (only ``ids`` when given) in every snapshot under a shard's ``folder``."""
    wanted = None if ids is None else set(ids)
    total = 0
    for file in _files(folder, "shard.json"):
        with open(file, encoding="utf-8") as f:
            meta = json.load(f)
        spaces: list[list[Any]] = meta.get("spaces") or []
        uids = {int(row[4]) for row in spaces if tuple(row[:4]) == tuple(namespace)}
        if not uids:
            continue
        for items_file in _item_files(file, meta):
            items = pq.read_table(items_file, columns=["uid", "doc_id"]).to_pydict()
            held = zip(items["uid"], items["doc_id"])
            total += sum(1 for uid, doc in held if uid in uids and (wanted is None or doc in wanted))
    return total


def _item_files(file: str, meta: dict[str, Any]) -> list[str]:
    """The items files of the snapshot whose ``shard.json`` is ``file`` (every segment's)."""
    return [os.path.join(os.path.dirname(file), segment.items) for segment in segments(meta)]


def scan_exports(root: str, app: str, user_id: str) -> int:
    """Rows of the user in every Parquet file under ``root`` (staging and trash folders included:
    a leftover there still holds data). The app comes from the file's ``app`` column or, in a
    hive layout, from the ``app=`` folder it sits in."""
    total = 0
    for path in _files(root, ".parquet"):
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        if "user_id" not in names:
            continue
        table = pf.read(columns=[c for c in ("app", "user_id") if c in names])
        mask = pc.equal(table["user_id"], user_id)
        if "app" in names:
            mask = pc.and_(mask, pc.equal(table["app"], app))
        elif _hive_value(path, root, "app") not in (None, app):
            continue
        total += int(pc.sum(mask).as_py() or 0)
    return total


def scan_snapshots(path: str, app: str, user_id: str) -> int:
    """Items of the user in every shard snapshot under ``path`` (current, stale or unfinished
    ones alike): each snapshot's ``shard.json`` lists its namespaces ``(app, user_id, kind, scope,
    uid, ...)``; the user's items are the rows with those uids in its segments' items files (a
    namespace counts at least 1: its presence is data)."""
    total = 0
    for file in _files(path, "shard.json"):
        try:
            with open(file, encoding="utf-8") as f:
                meta = json.load(f)
            spaces: list[list[Any]] = meta.get("spaces") or []
        except (OSError, ValueError):
            total += _raw_mentions(file, app, user_id)  # unreadable metadata: fall back to the bytes
            continue
        uids = {int(row[4]) for row in spaces if len(row) > 4 and row[0] == app and row[1] == user_id}
        if not uids:
            continue
        counts = {uid: 0 for uid in uids}
        try:
            for items in _item_files(file, meta):
                for uid in pq.read_table(items, columns=["uid"]).column("uid").to_pylist():
                    if uid in counts:
                        counts[uid] += 1
        except (OSError, ValueError):
            total += len(uids)
            continue
        total += sum(max(1, n) for n in counts.values())
    return total


def _raw_mentions(file: str, app: str, user_id: str) -> int:
    with open(file, "rb") as f:
        data = f.read()
    return int(json.dumps(app).encode() in data and json.dumps(user_id).encode() in data)


def outermost(roots: set[str]) -> list[str]:
    """``roots`` less those inside another one (a partition's export root under the configured
    one): each file is scanned, and counted, once."""
    kept: list[str] = []
    for root in sorted(roots):
        if not any(os.path.commonpath([root, k]) == k for k in kept):
            kept.append(root)
    return kept


def _files(root: str, suffix: str) -> list[str]:
    out: list[str] = []
    for directory, _dirs, names in os.walk(root):
        out.extend(os.path.join(directory, n) for n in names if n.endswith(suffix))
    return sorted(out)


def _hive_value(path: str, root: str, key: str) -> str | None:
    for part in os.path.relpath(path, root).split(os.sep):
        if part.startswith(key + "="):
            return urllib.parse.unquote(part[len(key) + 1 :])
    return None
