"""`KeyRingClient`: the typed calls to a :class:`~memray.service.keys.KeyRing` (its actor in Ray
mode, the object itself in-process); each method has the ring's signature and contract."""

from __future__ import annotations

from memray.rpc.client import Client
from memray.service.keys import KeyChanges, KeyRecord

__all__ = ["KeyRingClient"]


class KeyRingClient(Client):
    """Typed calls to the key ring."""

    async def create(
        self, app: str, user_id: str | None = None, read_only: bool = False, label: str | None = None
    ) -> tuple[str, KeyRecord]:
        return await self._call("create", app, user_id, read_only, label)

    async def list(self, app: str | None = None) -> list[KeyRecord]:
        return await self._call("list", app)

    async def revoke(self, key_id: str) -> KeyRecord:
        return await self._call("revoke", key_id)

    async def changes(self, since: int, follower: str, timeout_s: float = 10.0) -> KeyChanges | None:
        return await self._call("changes", since, follower, timeout_s)
