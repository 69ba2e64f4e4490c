"""`StorePartitions`: the typed clients of every history partition, routing each call.

A user's rows all live on one partition, :func:`~memray.store.layout.partition_of` ``(app,
user_id, n)`` (the vector shards' hash). A core that serves many users holds a
``StorePartitions`` instead of one :class:`~memray.store.client.StoreClient`, and calls it as it
would the store: it is a :class:`~memray.store.client.StoreCalls`, and each call runs by the
route declared on the store's method (:mod:`memray.store.routing`: one user's partition, a batch
split by partition, every partition merged, the first partition).

A few calls are a partition's own, and this class offers a fan-out of its own for them:
:meth:`write_stats` and :meth:`versions` answer per partition, :meth:`changed_refs` takes those
versions back, :meth:`index_pages` pages every partition, :meth:`fork_to`, :meth:`export_parquet`
and :meth:`purge_exports` give each partition its own files, :meth:`put_entries` checks that the
entries are one user's.

With one partition every call goes straight to its client. :attr:`clients` lists the partitions'
clients in partition order, for a job that writes with one writer per partition
(``partitions.clients[partition_of(app, user_id, len(partitions))]``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from memray.ids import ConversationKey, Namespace
from memray.rpc.client import public_methods
from memray.store.base import IndexRow
from memray.store.client import StoreCalls, StoreClient
from memray.store.history import HistoryStore
from memray.store.layout import export_root, partition_of, store_file
from memray.store.routing import Router, route_of
from memray.store.rows import EntryRow

__all__ = ["StorePartitions"]


def _routers() -> dict[str, Router]:
    """Each routed store call's router; the calls of :class:`StoreCalls` must be exactly those."""
    routes = {name: (method, route_of(method)) for name, method in public_methods(HistoryStore).items()}
    routers = {name: how.bind(method) for name, (method, how) in routes.items() if how is not None}
    if set(routers) != set(StoreCalls.calls()):
        raise TypeError(
            f"StoreCalls must hold exactly the routed store calls: routed but not listed "
            f"{sorted(set(routers) - set(StoreCalls.calls()))}, listed but not routed "
            f"{sorted(set(StoreCalls.calls()) - set(routers))}"
        )
    return routers


_ROUTERS = _routers()


class StorePartitions(StoreCalls):
    """The clients of ``n`` history partitions (see the module docstring)."""

    def __init__(self, clients: Sequence[StoreClient]) -> None:
        if not clients:
            raise ValueError("StorePartitions needs at least one store client")
        self.clients = list(clients)

    def __len__(self) -> int:
        return len(self.clients)

    def __repr__(self) -> str:
        return f"StorePartitions({[c.label for c in self.clients]!r})"

    @property
    def label(self) -> str:
        return self.clients[0].label if len(self.clients) == 1 else f"{len(self.clients)} history stores"

    def partition(self, app: str, user_id: str) -> int:
        return partition_of(app, user_id, len(self.clients))

    def of(self, app: str, user_id: str) -> StoreClient:
        """The client of the user's partition."""
        return self.clients[partition_of(app, user_id, len(self.clients))]

    def of_key(self, key: ConversationKey) -> StoreClient:
        return self.of(key.app, key.user_id)

    async def _call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """A :class:`StoreCalls` call, by the route its store method declares."""
        return await _ROUTERS[method](self.clients, args, kwargs)

    # -- a partition's own calls, fanned out ------------------------------------------------------
    async def write_stats(self) -> list[dict[str, float]]:
        """Each partition's :meth:`~memray.store.history.HistoryStore.write_stats`, in order."""
        return list(await asyncio.gather(*(c.write_stats() for c in self.clients)))

    async def index_pages(
        self, shard: int, shards: int, model_id: str, page_size: int, unembedded: bool = False
    ) -> AsyncIterator[list[IndexRow]]:
        """Every item of ``shard`` (``scan_index_rows``), page by page, partition by partition."""
        for client in self.clients:
            after: tuple[Namespace, str] | None = None
            while page := await client.scan_index_rows(shard, shards, model_id, after, page_size, unembedded):
                yield page
                after = (Namespace(*page[-1].namespace), page[-1].doc_id)

    async def put_entries(self, rows: list[EntryRow], replace_session: tuple[str, str, str] | None = None) -> list[str]:
        """One user's entries (a session's, or one entry): one partition, one transaction."""
        if replace_session is not None:
            app, user_id = replace_session[0], replace_session[1]
        elif rows:
            app, user_id = rows[0].app, rows[0].user_id
        else:
            return []
        if any(self.partition(r.app, r.user_id) != self.partition(app, user_id) for r in rows):
            raise ValueError("put_entries takes one user's entries (one partition, one transaction)")
        return await self.of(app, user_id).put_entries(rows, replace_session)

    # -- forks -------------------------------------------------------------------------
    async def versions(self) -> list[int]:
        """Each partition's version (``changed_refs`` takes them back)."""
        return list(await asyncio.gather(*(c.version() for c in self.clients)))

    async def changed_refs(self, versions: list[int]) -> list[tuple[Namespace, str]]:
        found = await asyncio.gather(*(c.changed_refs(v) for c, v in zip(self.clients, versions)))
        return [ref for part in found for ref in part]

    async def fork_to(self, root: str) -> dict[str, int]:
        """Copy every partition into the data directory ``root`` (its files, same names)."""
        n = len(self.clients)
        found = await asyncio.gather(*(c.fork_to(store_file(root, i, n)) for i, c in enumerate(self.clients)))
        return {"bytes": sum(int(f["bytes"]) for f in found), "cloned": int(all(f["cloned"] for f in found))}

    # -- exports -----------------------------------------------------------------------
    async def export_parquet(self, root: str) -> dict[str, Any]:
        """Every partition exports to its own root under ``root``
        (:func:`~memray.store.layout.export_root`); the manifest adds theirs up, each one in
        ``stores``. Each partition counts its own versions, so ``watermark`` is the lowest: a job
        that re-reads rows changed after it re-reads some rows, never misses one."""
        n = len(self.clients)
        if n == 1:
            return await self.clients[0].export_parquet(root)
        found = await asyncio.gather(*(c.export_parquet(export_root(root, i, n)) for i, c in enumerate(self.clients)))
        merged: dict[str, Any] = {
            "root": export_root(root, 0, 1),
            "watermark": min(int(m["watermark"]) for m in found),
            "previous_watermark": min(int(m["previous_watermark"]) for m in found),
            "files": [f for m in found for f in m["files"]],
            "stores": found,
        }
        merged.update({k: sum(int(m[k]) for m in found) for k in ("rows", "rows_written", "partitions")})
        return merged

    async def purge_exports(self, root: str, app: str, user_id: str) -> int:
        p, n = self.partition(app, user_id), len(self.clients)
        return await self.clients[p].purge_exports(export_root(root, p, n), app, user_id)
