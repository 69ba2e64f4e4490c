"""`ShardClient`: the typed calls to a vector shard (a :class:`~memray.index.recovery.RecoveringShard`:
its actor in Ray mode, the object itself in-process).

Every method has the shard's signature and contract (see :class:`~memray.index.shard.VectorShard`
and :class:`~memray.index.recovery.RecoveringShard`).
"""

from __future__ import annotations

from typing import Any

from memray.ids import Namespace
from memray.index.base import IndexItem
from memray.index.search import Query, ShardReply, ShardSearch
from memray.rpc.client import Client, short_read
from memray.store.base import IndexRow

__all__ = ["ShardClient"]

Ref = tuple[Namespace, str]


class ShardClient(Client):
    """Typed calls to one vector shard (see the module docstring)."""

    # -- lifecycle ---------------------------------------------------------------------------------
    async def open(self) -> None:
        return await self._call("open")

    async def close(self) -> None:
        return await self._call("close")

    @short_read
    async def ping(self) -> bool:
        return await self._call("ping")

    async def pid(self) -> int:
        return await self._call("pid")

    async def stats(self) -> dict[str, Any]:
        return await self._call("stats")

    async def is_recovering(self) -> bool:
        return await self._call("is_recovering")

    # -- writes ------------------------------------------------------------------------------------
    async def upsert(self, items: list[IndexItem], model_id: str) -> int:
        return await self._call("upsert", items, model_id)

    async def delete(self, refs: list[Ref]) -> int:
        return await self._call("delete", refs)

    async def drop(self, app: str, user_id: str, kind: str | None = None, scope: str | None = None) -> int:
        return await self._call("drop", app, user_id, kind, scope)

    # -- reads -------------------------------------------------------------------------------------
    @short_read
    async def search(self, namespaces: list[Namespace], query: Query) -> ShardReply:
        return await self._call("search", namespaces, query)

    @short_read
    async def search_many(self, requests: list[ShardSearch]) -> list[ShardReply | Exception]:
        return await self._call("search_many", requests)

    @short_read
    async def search_user(self, app: str, user_id: str, kind: str, query: Query) -> ShardReply:
        return await self._call("search_user", app, user_id, kind, query)

    async def search_app(self, app: str, kind: str, query: Query) -> ShardReply:
        return await self._call("search_app", app, kind, query)

    async def inventory(self) -> list[Ref]:
        return await self._call("inventory")

    async def missing_from(self, refs: list[Ref]) -> list[Ref]:
        return await self._call("missing_from", refs)

    async def count_user(self, app: str, user_id: str) -> int:
        return await self._call("count_user", app, user_id)

    async def count_items(self, namespace: Namespace, doc_ids: list[str] | None = None) -> int:
        return await self._call("count_items", namespace, doc_ids)

    # -- model versions (re-embedding) -------------------------------------------------------------
    async def stage_begin(self, model_id: str, dim: int) -> bool:
        return await self._call("stage_begin", model_id, dim)

    async def stage_upsert(self, rows: list[IndexRow], model_id: str) -> int:
        return await self._call("stage_upsert", rows, model_id)

    async def cutover(self, model_id: str) -> bool:
        return await self._call("cutover", model_id)

    async def stage_abort(self) -> None:
        return await self._call("stage_abort")

    async def retire_release(self) -> None:
        return await self._call("retire_release")

    # -- recovery and leveling ---------------------------------------------------------------------
    async def begin_reconcile(self) -> None:
        return await self._call("begin_reconcile")

    async def reconcile(self, rows: list[IndexRow], force: bool = False) -> int:
        return await self._call("reconcile", rows, force)

    async def end_reconcile(self) -> int:
        return await self._call("end_reconcile")

    async def finish_recovery(self) -> int:
        return await self._call("finish_recovery")

    async def vector_digest(self) -> tuple[int, int]:
        return await self._call("vector_digest")

    async def vectored_refs(self) -> list[tuple[Namespace, str]]:
        return await self._call("vectored_refs")

    # -- snapshots ---------------------------------------------------------------------------------
    async def snapshot(self) -> None:
        return await self._call("snapshot")

    async def snapshot_if_changed(self) -> bool:
        return await self._call("snapshot_if_changed")

    async def fork_to(self, dst: str) -> int:
        return await self._call("fork_to", dst)
