"""`KeysHandle`: the server's API keys as the facade offers them (``mem.keys``).

``memray keys create|list|revoke`` is this handle; so is the server's check of every request
(:mod:`memray.server.auth` follows :meth:`KeysHandle.achanges`). The ring itself is
:class:`~memray.service.keys.KeyRing`: one per memray, an actor in Ray mode that every process
opening the same data directory reaches by name.
"""

from __future__ import annotations

import builtins

from memray.facade.runner import Internals, blocking
from memray.service.client import KeyRingClient
from memray.service.keys import KeyChanges, KeyRecord, Revocation

__all__ = ["KeysHandle"]


class KeysHandle:
    """Make, list and revoke keys; each call has an ``a``-prefixed asyncio twin."""

    def __init__(self, internals: Internals) -> None:
        self._runner = internals

    @property
    def _ring(self) -> KeyRingClient:
        return self._runner.session.deployment.keyring()

    def prepare(self) -> None:
        """Start the key ring's actor now, without waiting for it (``memray serve`` does, so the
        ring is this process's and starts while the replicas do)."""
        self._runner.session.deployment.keyring()

    async def acreate(
        self, app: str, user_id: str | None = None, read_only: bool = False, label: str | None = None
    ) -> tuple[str, KeyRecord]:
        """A new key for ``app`` (only ``user_id``'s data when given; reads only when
        ``read_only``): ``(key, record)``. The key is shown this once; the store keeps its digest."""
        return await self._runner.arun(self._ring.create(app, user_id, read_only, label))

    create = blocking(acreate)

    async def alist(self, app: str | None = None) -> builtins.list[KeyRecord]:
        """Every key (of ``app`` when given), revoked ones included, oldest first."""
        return await self._runner.arun(self._ring.list(app))

    list = blocking(alist)

    async def arevoke(self, key_id: str) -> Revocation:
        """Revoke the key with this id; returns once every server replica refuses it, or after
        5 s naming the replicas that had not confirmed (``unconfirmed``: each refuses every key
        within ``--key-ring-stale-s`` of losing the ring)."""
        return await self._runner.arun(self._ring.revoke(key_id))

    revoke = blocking(arevoke)

    async def achanges(self, since: int, follower: str, timeout_s: float = 10.0) -> KeyChanges | None:
        """The live keys once the ring's version is past ``since``, or None after ``timeout_s``
        (a long poll: how a server replica keeps its copy current)."""
        return await self._runner.arun(self._ring.changes(since, follower, timeout_s))
