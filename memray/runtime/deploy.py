"""A deployment: the store, shards and hosts of one memray, wired together.

:class:`LocalDeployment` builds the cores in this process; :class:`memray.runtime.actors.RayDeployment`
builds the same cores as Ray actors. The facade sees only the :class:`Deployment` protocol.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Protocol

from memray.config import MemoryConfig
from memray.conversation.client import HostClient
from memray.index.client import ShardClient
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient

__all__ = ["Deployment", "LocalDeployment", "shard_path"]


def shard_path(config: MemoryConfig, shard_id: int) -> str:
    return os.path.join(config.vectors_path, f"shard-{shard_id}")


def active_model(config: MemoryConfig) -> tuple[int, str]:
    """The dim and model id the shards index: the configured embedder's (``"none"`` without one)."""
    from memray.embedding import build_embedder

    embedder = build_embedder(config.embedder)
    return (embedder.dim, embedder.model_id) if embedder is not None else (config.embedder.dim, "none")


class Deployment(Protocol):
    store: StoreClient
    shards: list[ShardClient]
    hosts: list[HostClient]

    async def start(self) -> None: ...
    async def stop(self, terminate: bool) -> list[dict[str, Any]]:
        """Flush (and with ``terminate`` stop every core), within a bound; returns the hosts'
        close reports (``unpersisted``, ``dead_letters``, ``error``)."""
        ...


class LocalDeployment:
    """Every core in this process (``mode="inprocess"``)."""

    def __init__(self, config: MemoryConfig) -> None:
        from memray.conversation.host import ConversationHost
        from memray.index.recovery import RecoveringShard
        from memray.store.history import HistoryStore

        self.config = config
        dim, model_id = active_model(config)
        self._store = HistoryStore(config.store_path)
        # a RecoveringShard that never recovers (it cannot die apart from this process): the same
        # core as a shard actor, so wait_indexed() can level it with the store in both modes
        self._shards = [
            RecoveringShard(i, shard_path(config, i), dim, model_id, config.index, recovering=False)
            for i in range(config.shards)
        ]
        self._refs = [
            LocalRef(self._store, "history store"),
            *(LocalRef(s, f"shard {i}") for i, s in enumerate(self._shards)),
        ]
        self.store = StoreClient(self._refs[0])
        self.shards = [ShardClient(ref) for ref in self._refs[1:]]
        self._hosts = [ConversationHost(i, config, self.store, self.shards) for i in range(config.hosts)]
        self._refs += [LocalRef(h, f"host {i}") for i, h in enumerate(self._hosts)]
        self.hosts = [HostClient(ref) for ref in self._refs[1 + len(self._shards) :]]

    async def start(self) -> None:
        os.makedirs(self.config.root, exist_ok=True)
        await self.store.open({"mode": "inprocess", "role": "in-process store"})
        await asyncio.gather(*(s.open() for s in self.shards))
        await asyncio.gather(*(self._reconcile_if_forked(i) for i in range(len(self.shards))))
        await asyncio.gather(*(h.start() for h in self.hosts))

    async def _reconcile_if_forked(self, i: int) -> None:
        """A fork's shard reconciles with the store before it serves (:mod:`memray.index.fork`)."""
        from memray.index.fork import clear_marker, needs_reconcile, read_marker, reconcile_marked, reconcile_shard

        path = shard_path(self.config, i)
        if needs_reconcile(path):
            model_id, changed = self._shards[i].model_id, read_marker(path)
            if changed is None:  # the marker lists nothing: a full pass
                _, upserted, deleted = await reconcile_shard(self.shards[i], self.store, i, len(self.shards), model_id)
            else:
                upserted, deleted = await reconcile_marked(
                    self.shards[i], self.store, i, len(self.shards), model_id, changed
                )
            if upserted or deleted:  # the linked snapshot was not exact: persist the reconciled one
                await self.shards[i].snapshot()
            clear_marker(path)

    async def stop(self, terminate: bool = True) -> list[dict[str, Any]]:
        try:
            reports: list[dict[str, Any]] = list(await asyncio.gather(*(h.close() for h in self.hosts)))
            await asyncio.gather(*(s.close() for s in self.shards))
        finally:
            await self.store.close()
            for ref in self._refs:
                ref.shutdown()
        return reports
