"""Who may do what: a request's key, checked against the route's app and user, on REST and MCP alike.

A key (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``) is bound to one app, maybe one user,
maybe reads only (:mod:`memray.service.keys`). :func:`authorize` is the one check every route and
every MCP tool passes, with the app and user the call acts on — from the path, or from each item
of a batch or a tool's arguments — so nothing in a body can reach past the key:

- no key, an unknown or revoked one → 401;
- a key of another app, or bound to another user → 403 (nothing is read or written);
- a read-only key on a write → 403.

The replica's copy of the live keys (:class:`KeyCache`): checking a key is one SHA-256 and one
dict lookup. It follows the key ring with a long poll, so a revoke reaches it at once; a copy that
has not heard from the ring for ``stale_s`` accepts no key (fail-closed) until it does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from memray.facade.keys import KeysHandle
from memray.service.keys import KeyRecord, digest_of

__all__ = ["Principal", "OPEN", "AuthError", "KeyCache", "presented_key", "authorize"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """What a request may reach: ``app`` (None: any, when auth is off), ``user_id`` (None: every
    user of the app), and whether it may write."""

    app: str | None
    user_id: str | None = None
    read_only: bool = False
    key_id: str | None = None


#: The principal of every request when the server runs with ``--no-auth`` (loopback only).
OPEN = Principal(None)


class AuthError(Exception):
    """A request refused: ``status`` 401 (who are you) or 403 (not this), and why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``), or None."""
    key = headers.get("x-api-key")
    if key:
        return key.strip()
    scheme, _, value = (headers.get("authorization") or "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class KeyCache:
    """The live keys, kept current from the key ring (see the module docstring)."""

    def __init__(self, keys: KeysHandle, poll_s: float = 10.0, stale_s: float = 30.0) -> None:
        self._keys = keys
        self._poll_s = poll_s
        self.stale_s = stale_s
        self._heard_at = -math.inf  # when the ring last answered a poll (monotonic)
        self._follower = f"{socket.gethostname()} pid {os.getpid()} ({uuid.uuid4().hex[:8]})"  # a revoke names it
        self._by_digest: dict[str, Principal] = {}
        self._version = -1
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the live keys (before the first request is served), then follow the ring."""
        await self._apply_next(0.0)
        self._task = asyncio.get_running_loop().create_task(self._follow())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def fresh(self) -> bool:
        """The ring answered within ``stale_s``: this copy can be trusted (fail-closed: a replica
        cut off from the ring would not learn of a revoke, so it accepts no key until it hears)."""
        return time.monotonic() - self._heard_at <= self.stale_s

    def principal(self, key: str) -> Principal | None:
        """The principal of a live key, or None (also for every key while the copy is stale)."""
        if not self.fresh:
            return None
        try:
            return self._by_digest.get(digest_of(key))
        except UnicodeError:
            return None

    async def _apply_next(self, timeout_s: float) -> None:
        got = await self._keys.achanges(self._version, self._follower, timeout_s)
        self._heard_at = time.monotonic()
        if got is not None:
            self._by_digest = {r.digest: _principal(r) for r in got.live}
            self._version = got.version

    async def _follow(self) -> None:
        while True:
            try:
                await self._apply_next(self._poll_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the ring is restarting: keep the last copy, ask again
                log.warning("key ring unreachable (%r); retrying", exc)
                await asyncio.sleep(0.5)


def _principal(record: KeyRecord) -> Principal:
    return Principal(record.app, record.user_id, record.read_only, record.key_id)


def authorize(
    keys: KeyCache | None, headers: Mapping[str, str], app: str, user_ids: list[str] | None, write: bool
) -> Principal:
    """The request's principal if it may act on ``app`` and each of ``user_ids`` (None: a call
    that touches no user's data, the no-op route) with a write when ``write``; else AuthError.
    ``keys`` None: auth is off."""
    if keys is None:
        return OPEN
    key = presented_key(headers)
    if key is None:
        raise AuthError(401, "no key: send Authorization: Bearer KEY or X-API-Key: KEY (memray keys create)")
    who = keys.principal(key)
    if who is None:
        raise AuthError(401, "unknown or revoked key")
    if who.app != app:
        raise AuthError(403, f"this key is for app {who.app!r}, not {app!r}")
    if who.user_id is not None and user_ids is not None and any(u != who.user_id for u in user_ids):
        raise AuthError(403, f"this key is bound to user {who.user_id!r}")
    if write and who.read_only:
        raise AuthError(403, "this key is read-only")
    return who
