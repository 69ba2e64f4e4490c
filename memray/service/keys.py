"""`KeyRing`: the server's API keys — made, listed, revoked, and followed by every server replica.

A key is ``mry_<key id>_<secret>``: the key id is public (``memray keys list`` shows it,
``revoke`` takes it), the secret is 32 random bytes. The store keeps only the SHA-256 digest of
the whole key (:mod:`memray.store.keys`): a key with that much entropy needs no slow hash, and a
leaked store does not leak keys. The key itself is returned once, by :meth:`KeyRing.create`.

Every replica keeps the live keys in memory (checking a key is one digest and one dict lookup,
no call per request) and follows changes with :meth:`KeyRing.changes`, a long poll that answers
as soon as the ring's version moves. :meth:`KeyRing.revoke` returns only once every replica
that follows the ring has fetched the version without the key (or ``settle_s`` passed, for a
replica that stopped polling), so a revoked key is refused by the next request after
``memray keys revoke`` returns. Erasing a user (:meth:`KeyRing.erase_user`) removes the keys bound
to them the same way.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import secrets
import time
from typing import NamedTuple

from memray.errors import NotFoundError, ValidationError
from memray.ids import validate_id
from memray.store.client import StoreClient
from memray.store.keys import KeyRecord

__all__ = ["KeyRing", "KeyRecord", "KeyChanges", "Revocation", "digest_of", "KEY_PREFIX"]

KEY_PREFIX = "mry_"
#: A follower that has not polled for this long is no longer waited for by a revoke.
FOLLOWER_TTL_S = 30.0


def digest_of(key: str) -> str:
    """The hex SHA-256 of ``key`` (what the store keeps)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


class KeyChanges(NamedTuple):
    version: int
    live: list[KeyRecord]  # every key not revoked, with its digest


class Revocation(NamedTuple):
    """A revoked key's record, and the followers (server replicas) that had not dropped it when
    the revoke stopped waiting (``settle_s``): each refuses every key once it has not heard from
    the ring for its ``stale_s``, so the key stops working there within that bound."""

    record: KeyRecord
    unconfirmed: list[str]


class KeyRing:
    """The keys in the store's first partition, and their followers (see the module docstring)."""

    def __init__(self, store: StoreClient, settle_s: float = 5.0) -> None:
        self._store = store
        self.settle_s = settle_s
        self._records: dict[str, KeyRecord] | None = None  # key_id -> record, loaded on first use
        self._version = 0
        self._changed: asyncio.Condition | None = None
        self._followers: dict[str, tuple[int, float]] = {}  # follower -> (version it has, last poll)
        self._load_lock: asyncio.Lock | None = None

    async def _loaded(self) -> dict[str, KeyRecord]:
        if self._records is None:
            self._load_lock = self._load_lock or asyncio.Lock()
            async with self._load_lock:
                if self._records is None:
                    self._records = {r.key_id: KeyRecord(*r) for r in await self._store.api_keys(None)}
                    self._changed = asyncio.Condition()
                    # past every version an earlier incarnation of the ring gave out (Ray may have
                    # restarted it): a follower's next poll then fetches the keys as they are now
                    self._version = time.time_ns() // 1000
        return self._records

    async def create(
        self, app: str, user_id: str | None = None, read_only: bool = False, label: str | None = None
    ) -> tuple[str, KeyRecord]:
        """A new key for ``app`` (only ``user_id``'s data when given; no writes when
        ``read_only``): the key (shown once) and its record."""
        validate_id("app", app)
        if user_id is not None:
            validate_id("user_id", user_id)
        if label is not None:
            validate_id("label", label)
        records = await self._loaded()
        key_id = secrets.token_hex(6)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(key_id, digest_of(key), app, user_id, bool(read_only), label, time.time(), None)
        await self._store.put_api_key(record)
        records[key_id] = record
        await self._bump()
        return key, record

    async def list(self, app: str | None = None) -> list[KeyRecord]:
        """Every key (of ``app`` when given), revoked ones included, oldest first."""
        records = await self._loaded()
        return sorted((r for r in records.values() if app is None or r.app == app), key=lambda r: r.created_at)

    async def revoke(self, key_id: str) -> Revocation:
        """Revoke the key; returns its record once every follower has dropped it, or ``settle_s``
        passed (then naming the followers that had not: see the module docstring). NotFoundError
        if no key has that id; revoking twice is not an error."""
        if not isinstance(key_id, str) or not key_id:
            raise ValidationError("key_id", key_id, "must be a key id", "see `memray keys list`")
        records = await self._loaded()
        record = records.get(key_id)
        if record is None:
            raise NotFoundError(f"no key has id {key_id!r}; `memray keys list` shows the ids")
        unconfirmed: list[str] = []
        if record.revoked_at is None:
            now = time.time()
            await self._store.revoke_api_key(key_id, now)
            record = records[key_id] = record._replace(revoked_at=now)
            unconfirmed = await self._settled(await self._bump())
        return Revocation(record, unconfirmed)

    async def erase_user(self, app: str, user_id: str) -> int:
        """Every key bound to the user goes (their erasure): its row is deleted from the store, so
        no user id or label of theirs is left, and the call returns once every follower has
        dropped it (as :meth:`revoke` does). How many keys went, revoked ones included."""
        validate_id("app", app)
        validate_id("user_id", user_id)
        records = await self._loaded()
        removed = await self._store.delete_user_api_keys(app, user_id)
        bound = [k for k, r in records.items() if r.app == app and r.user_id == user_id]
        for key_id in bound:
            del records[key_id]
        if bound:
            await self._settled(await self._bump())
        return max(removed, len(bound))

    async def changes(self, since: int, follower: str, timeout_s: float = 10.0) -> KeyChanges | None:
        """The live keys once the ring's version is past ``since`` (at once if it already is),
        or None after ``timeout_s`` without a change. ``follower`` names the caller: a revoke
        waits until each recent follower has polled with the new version."""
        records = await self._loaded()
        assert self._changed is not None
        self._followers[follower] = (since, time.monotonic())
        async with self._changed:
            if self._version <= since:
                try:
                    await asyncio.wait_for(self._changed.wait_for(lambda: self._version > since), timeout_s)
                except TimeoutError:
                    return None
        self._followers[follower] = (since, time.monotonic())
        return KeyChanges(self._version, [r for r in records.values() if r.revoked_at is None])

    async def _bump(self) -> int:
        assert self._changed is not None
        async with self._changed:
            self._version += 1
            self._changed.notify_all()
        return self._version

    async def _settled(self, version: int) -> builtins.list[str]:
        """Wait until every follower seen in the last :data:`FOLLOWER_TTL_S` has polled since
        ``version`` was made (its next poll asks with ``since >= version``), at most ``settle_s``;
        the followers still behind then (none when all confirmed)."""
        deadline = time.monotonic() + self.settle_s
        while True:
            now = time.monotonic()
            behind = [f for f, (seen, at) in self._followers.items() if seen < version and now - at < FOLLOWER_TTL_S]
            if not behind or now >= deadline:
                return sorted(behind)
            await asyncio.sleep(0.005)
