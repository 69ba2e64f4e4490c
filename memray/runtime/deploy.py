"""A deployment: the store, shards and hosts of one memray, wired together.

:class:`LocalDeployment` builds the cores in this process; :class:`memray.runtime.actors.RayDeployment`
builds the same cores as Ray actors. The facade sees only the :class:`Deployment` protocol.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Protocol

from memray.config import EmbedderConfig, MemoryConfig
from memray.conversation.client import HostClient
from memray.conversation.host import ConversationHost
from memray.embedding import build_embedder
from memray.embedding.active import read_active_model
from memray.embedding.recompute import recomputer
from memray.errors import DeadLetterError
from memray.index.client import ShardClient
from memray.index.fork import clear_marker, needs_reconcile, read_marker
from memray.index.keeper import reconcile_marked, reconcile_shard
from memray.index.recompute import Recompute
from memray.index.recovery import RecoveringShard
from memray.rpc.local import LocalRef
from memray.service.client import KeyRingClient
from memray.service.keys import KeyRing
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.layout import check_stores, store_files
from memray.store.partitions import StorePartitions

__all__ = ["Deployment", "LocalDeployment", "shard_path", "store_label", "store_roles", "stop_cores"]

log = logging.getLogger(__name__)


def store_label(partition: int, stores: int) -> str:
    """What errors call a history partition: "history store" when there is one."""
    return "history store" if stores == 1 else f"history store {partition}"


def store_roles(stores: int) -> list[str]:
    """The actor roles of the history partitions (one keeps the name ``store`` it always had)."""
    return ["store"] if stores == 1 else [f"store-{i}" for i in range(stores)]


def shard_path(config: MemoryConfig, shard_id: int) -> str:
    return os.path.join(config.vectors_path, f"shard-{shard_id}")


def active_model(config: MemoryConfig) -> tuple[int, str]:
    """The dim and model id the shards index: the configured embedder's (``"none"`` without one)."""
    embedder = build_embedder(config.embedder)
    return (embedder.dim, embedder.model_id) if embedder is not None else (config.embedder.dim, "none")


def shard_embedder(config: MemoryConfig, model_id: str) -> EmbedderConfig | None:
    """What a shard actor is given of the embedder: its config when it is recomputable (the
    shard recomputes the vectors the store does not keep), else None (a custom one may be big)."""
    return config.embedder if recomputer(config.embedder, model_id) is not None else None


def shard_model(
    root: str, dim: int, model_id: str, embedder: EmbedderConfig | None
) -> tuple[int, str, Recompute | None]:
    """A shard's model: the one recorded in ``root`` (a re-embedding job may have cut over since
    the shard was created with ``dim``, ``model_id`` and ``embedder``), and what recomputes its
    vectors when it is recomputable."""
    record = read_active_model(root)
    if record is not None and record.model_id != model_id:  # (a custom embedder is not in the record)
        dim, model_id, embedder = record.dim, record.model_id, record.embedder
    return dim, model_id, recomputer(embedder, model_id)


class Deployment(Protocol):
    stores: StorePartitions  # the history partitions (memray.store.layout)
    shards: list[ShardClient]
    hosts: list[HostClient]

    def keyring(self) -> KeyRingClient:
        """The client of the server's key ring (:mod:`memray.service.keys`), made on first use."""
        ...

    async def start(self) -> None: ...
    async def stop(self, terminate: bool) -> list[dict[str, Any]]:
        """Flush (and with ``terminate`` stop every core), within a bound; returns the hosts'
        close reports (``unpersisted``, ``dead_letters``, ``error``)."""
        ...


class LocalDeployment:
    """Every core in this process (``mode="inprocess"``)."""

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        dim, model_id = active_model(config)
        self._stores = [HistoryStore(path) for path in store_files(config)]
        # a RecoveringShard that never recovers (it cannot die apart from this process): the same
        # core as a shard actor, so wait_indexed() can level it with the store in both modes
        recompute = recomputer(config.embedder, model_id)
        self._shards = [
            RecoveringShard(
                i, shard_path(config, i), dim, model_id, config.index, recovering=False, recompute=recompute
            )
            for i in range(config.shards)
        ]
        store_refs = [
            LocalRef(s, store_label(i, config.stores), StoreClient.short_reads()) for i, s in enumerate(self._stores)
        ]
        shard_refs = [LocalRef(s, f"shard {i}", ShardClient.short_reads()) for i, s in enumerate(self._shards)]
        self.stores = StorePartitions([StoreClient(ref) for ref in store_refs])
        self.shards = [ShardClient(ref) for ref in shard_refs]
        self._hosts = [ConversationHost(i, config, self.stores, self.shards) for i in range(config.hosts)]
        host_refs = [LocalRef(h, f"host {i}") for i, h in enumerate(self._hosts)]
        self.hosts = [HostClient(ref) for ref in host_refs]
        self._refs = [*store_refs, *shard_refs, *host_refs]
        self._keyring: KeyRingClient | None = None

    def keyring(self) -> KeyRingClient:
        if self._keyring is None:
            self._keyring = KeyRingClient(LocalRef(KeyRing(self.stores.clients[0]), "key ring"))
        return self._keyring

    async def start(self) -> None:
        check_stores(self.config.root, self.config.stores)
        await self.stores.open({"mode": "inprocess", "role": "in-process store"})
        await asyncio.gather(*(s.open() for s in self.shards))
        await asyncio.gather(*(self._reconcile_if_forked(i) for i in range(len(self.shards))))
        await asyncio.gather(*(h.start() for h in self.hosts))

    async def _reconcile_if_forked(self, i: int) -> None:
        """A fork's shard reconciles with the store before it serves (:mod:`memray.index.fork`)."""
        path = shard_path(self.config, i)
        if needs_reconcile(path):
            model_id, changed = self._shards[i].model_id, read_marker(path)
            if changed is None:  # the marker lists nothing: a full pass
                _, upserted, deleted = await reconcile_shard(self.shards[i], self.stores, i, len(self.shards), model_id)
            else:
                upserted, deleted = await reconcile_marked(
                    self.shards[i], self.stores, i, len(self.shards), model_id, changed
                )
            if upserted or deleted:  # the linked snapshot was not exact: persist the reconciled one
                await self.shards[i].snapshot()
            clear_marker(path)

    async def stop(self, terminate: bool = True) -> list[dict[str, Any]]:
        try:
            reports: list[dict[str, Any]] = list(await asyncio.gather(*(h.close() for h in self.hosts)))
            await asyncio.gather(*(s.close() for s in self.shards))
        finally:
            await self.stores.close()
            for ref in self._refs:
                ref.shutdown()
        return reports


async def stop_cores(deployment: Deployment, terminate: bool, bound_s: float) -> list[dict[str, Any]]:
    """Flush the hosts of a deployment whose cores may be down or restarting (Ray's), every wait
    bounded by ``bound_s``; with ``terminate`` also close the hosts, shards and stores. Returns the
    hosts' reports of what they could not persist."""
    if not terminate:
        # a driver leaving a shared memray: flush, but leave dead-letter reports to their writers
        flushed = await _bounded([h.flush(None, None, False) for h in deployment.hosts], bound_s)
        await _bounded([s.snapshot_if_changed() for s in deployment.shards], bound_s)
        return [
            {
                "host": h.label,
                "error": f"{type(r).__name__}: {r}",
                "dead_letters": len(r.letters) if isinstance(r, DeadLetterError) else 0,
            }
            for h, r in zip(deployment.hosts, flushed)
            if isinstance(r, BaseException)
        ]
    reports: list[dict[str, Any]] = []
    closed = await _bounded([h.close() for h in deployment.hosts], bound_s)
    for host, result in zip(deployment.hosts, closed):
        if isinstance(result, BaseException):
            reports.append({"host": host.label, "error": f"{type(result).__name__}: {result}"})
        else:
            reports.append(result)
    # a shard's close is only a snapshot (indexes are derived data): one that is down or
    # restarting must not keep the store from closing nor the actors from being killed
    closed = await _bounded([s.close() for s in deployment.shards], 60.0)
    for shard, result in zip(deployment.shards, closed):
        if isinstance(result, BaseException):
            log.warning("%s did not close cleanly (%r); it recovers from the store", shard.label, result)
    stored = await _bounded([c.close() for c in deployment.stores.clients], 60.0)
    for store, failed in [(c, r) for c, r in zip(deployment.stores.clients, stored) if isinstance(r, BaseException)]:
        log.warning("%s did not close cleanly (%r); its WAL is replayed on the next open", store.label, failed)
    return reports


async def _bounded(calls: list[Any], timeout_s: float) -> list[Any]:
    """Await ``calls`` together; each result, or its exception (TimeoutError past ``timeout_s``)."""

    async def one(call: Any) -> Any:
        return await asyncio.wait_for(call, timeout_s)

    return list(await asyncio.gather(*(one(c) for c in calls), return_exceptions=True))
