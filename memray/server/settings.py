"""What ``memray serve`` passes to each replica: :class:`ServerSettings`.

A module of its own, below the app (:mod:`memray.server.api`) and the MCP route
(:mod:`memray.server.mcp`) that both read it (neither imports the other for it), and free of the
server's packages (FastAPI, the MCP SDK).
"""

from __future__ import annotations

from dataclasses import dataclass

from memray.config import MemoryConfig

__all__ = ["ServerSettings", "LOOPBACK_HOSTS"]

#: The names of the loopback interface, as a ``Host`` header carries them.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class ServerSettings:
    """What ``memray serve`` passes to each replica."""

    config: MemoryConfig
    replicas: int = 1
    auth: bool = True
    max_body_bytes: int = 4 * 1024 * 1024
    allowed_origins: tuple[str, ...] = ("http://127.0.0.1", "http://localhost", "http://[::1]")
    #: ``Host`` names (any port) ``/mcp`` answers, and every route with ``--no-auth``.
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    #: Each request's deadline in the replica (body read included): past it, 504.
    request_timeout_s: float = 30.0
    #: Requests of one key in flight in one replica: past it, 429 with ``Retry-After``.
    max_requests_per_key: int = 32
    #: A replica that has not heard from the key ring for this long accepts no key (503).
    key_ring_stale_s: float = 30.0
    #: Requests one replica runs at once (Serve's ``max_ongoing_requests``).
    max_ongoing_requests: int = 256
    #: Requests waiting for a replica (Serve's ``max_queued_requests``): past it, Serve answers 503.
    max_queued_requests: int = 1024
    otlp_endpoint: str | None = None
    #: Serve ``POST /v1/apps/{app}/noop`` (checks the key, parses the body, does nothing): the
    #: floor ``benchmarks/serve_load.py`` measures against. Off in ``memray serve``.
    floor_route: bool = False
    mcp_app: str = "default"  # the app MCP tools act on when auth is off (a key names its own)
