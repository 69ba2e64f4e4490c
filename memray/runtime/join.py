"""Finding the memray that runs on a data directory, so that another process joins it.

What is recorded, and where: the process that holds a history file's lock (in ray mode, the
store actor) writes ``history.duckdb.owner`` next to the file when it opens it
(:meth:`~memray.store.database.Database.open`): its pid, host and mode and, in ray mode, the GCS
address of its Ray, the namespace of memray's actors, the deployment's shape (hosts, shards) and
how that Ray authenticates (:class:`RayAuth`: the mode, and where the token is — a file, or "given
in ``RAY_AUTH_TOKEN``"; never the token itself).

How a process finds it (:func:`running_memray`): each history file is probed read-only
(:func:`~memray.store.database.lock_holder`, milliseconds). Not locked: nobody runs that memray.
Locked: the record is believed only when the lock's holder (the pid DuckDB names) wrote it, and
the Ray it names only when its GCS port answers (:meth:`RunningMemray.check_reachable`). The
process then authenticates as recorded (:meth:`RayAuth.environment`) and joins with
``ray.init(address=...)`` (:func:`memray.runtime.actors.ensure_ray`): Ray turns its token
authentication on by itself only for ``address=None`` or ``"auto"``, never for an explicit
address. Nothing here imports Ray.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memray.config import MemoryConfig
from memray.errors import StoreError
from memray.store.database import Holder, in_use_message, lock_holder
from memray.store.layout import store_files

__all__ = ["RayAuth", "RunningMemray", "running_memray", "AUTH_MODE", "AUTH_TOKEN", "AUTH_TOKEN_PATH"]

#: Ray's settings for token authentication (read by Ray in this order: the token itself, a file
#: holding it, ``~/.ray/auth_token``).
AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"


def _default_token_path() -> str:
    return os.path.expanduser(os.path.join("~", ".ray", "auth_token"))


@dataclass(frozen=True)
class RayAuth:
    """How a Ray authenticates its clients: ``mode`` ``"token"`` or ``"disabled"``; with a token,
    the file it is read from (``token_path``), or ``token_env`` when it was given in
    ``RAY_AUTH_TOKEN`` (no file to point to)."""

    mode: str = "disabled"
    token_path: str | None = None
    token_env: bool = False

    @classmethod
    def of_process(cls, env: Mapping[str, str] = os.environ) -> RayAuth:
        """The authentication of the Ray this process runs in. Ray's processes inherit
        ``RAY_AUTH_MODE`` from the one that started them (``ray.init`` and ``ray start`` set it
        when they turn token authentication on by default), and find the token by the
        precedence above."""
        mode = env.get(AUTH_MODE, "disabled").lower()
        if mode != "token":
            return cls(mode)
        if env.get(AUTH_TOKEN):
            return cls(mode, token_env=True)
        return cls(mode, os.path.abspath(os.path.expanduser(env.get(AUTH_TOKEN_PATH) or _default_token_path())))

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_record(cls, record: object) -> RayAuth | None:
        if not isinstance(record, dict):
            return None  # written by a memray that did not record it: Ray's own defaults apply
        path = record.get("token_path")
        return cls(str(record.get("mode", "disabled")), str(path) if path else None, bool(record.get("token_env")))

    def environment(self, env: Mapping[str, str], holder: str) -> dict[str, str]:
        """The variables a process with environment ``env`` must set to authenticate to that Ray
        (none when it needs nothing, or already says how: a token or token file of its own wins).
        Raises StoreError saying what to set when the token cannot be found from here."""
        if self.mode != "token":
            return {}
        out = {} if env.get(AUTH_MODE, "").lower() == "token" else {AUTH_MODE: "token"}
        if env.get(AUTH_TOKEN) or env.get(AUTH_TOKEN_PATH):
            return out
        if self.token_path is None:
            raise StoreError(
                f"cannot join {holder}: its Ray authenticates with a token it was given in {AUTH_TOKEN}; "
                f"set {AUTH_TOKEN} to that token (or {AUTH_TOKEN_PATH} to a file holding it) and open again"
            )
        try:
            with open(self.token_path, "rb"):
                pass
        except OSError as exc:
            raise StoreError(
                f"cannot join {holder}: its Ray authenticates with the token in {self.token_path}, which this "
                f"process cannot read ({exc.strerror}); run as the user that started it, or set {AUTH_TOKEN} to "
                "that token, and open again"
            ) from None
        if self.token_path != _default_token_path():
            out[AUTH_TOKEN_PATH] = self.token_path
        return out


@dataclass(frozen=True)
class RunningMemray:
    """A ray-mode memray that holds a data directory, as its store recorded it."""

    holder: Holder
    address: str  # the GCS address of its Ray
    namespace: str
    hosts: int | None  # its deployment's shape (None: not recorded)
    shards: int | None
    auth: RayAuth | None  # None: not recorded

    @property
    def who(self) -> str:
        return self.holder.describe()

    def joined(self, config: MemoryConfig) -> MemoryConfig:
        """``config`` to open this memray with: its Ray, its namespace and its shape (a
        conversation is routed by the number of hosts, so every process must count the same)."""
        shape = {k: v for k, v in (("hosts", self.hosts), ("shards", self.shards)) if v}
        return config.model_copy(update={"address": self.address, "namespace": self.namespace, **shape})

    def check_reachable(self, timeout_s: float = 2.0) -> None:
        """Raise StoreError if its Ray's GCS port does not accept a connection (that memray is
        stopping, or its Ray died and left the store process behind)."""
        host, _, port = self.address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except (OSError, ValueError) as exc:
            raise StoreError(
                f"cannot join {self.who}: its Ray does not answer at {self.address} ({exc}); if that memray "
                f"is stopping, open again once it has stopped, else stop process {self.holder.pid} and open again"
            ) from None


def running_memray(config: MemoryConfig) -> RunningMemray | None:
    """The ray-mode memray that holds ``config``'s data directory, or None when no process holds
    it. A holder that cannot be joined (a memray in one process, a process that left no record)
    raises StoreError naming it and what to do."""
    for path in store_files(config):
        holder = lock_holder(path)
        if holder is None:
            continue
        owner = holder.owner
        if owner.get("mode") != "ray" or not owner.get("address"):
            raise StoreError(in_use_message(path, holder))
        return RunningMemray(
            holder,
            str(owner["address"]),
            str(owner.get("namespace") or config.namespace),
            _count(owner.get("hosts")),
            _count(owner.get("shards")),
            RayAuth.from_record(owner.get("ray_auth")),
        )
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and value > 0 else None
