"""`KeyRingClient`: the typed calls to a :class:`~memray.service.keys.KeyRing` (its actor in Ray
mode, the object itself in-process); each method has the ring's signature and contract."""

from __future__ import annotations

from memray.rpc.client import Client, remote
from memray.service.keys import KeyRing

__all__ = ["KeyRingClient"]


class KeyRingClient(Client, core=KeyRing):
    """Typed calls to the key ring."""

    create = remote(KeyRing.create)
    list = remote(KeyRing.list)
    revoke = remote(KeyRing.revoke)
    erase_user = remote(KeyRing.erase_user)
    changes = remote(KeyRing.changes)
