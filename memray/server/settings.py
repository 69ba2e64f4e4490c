"""What ``memray serve`` passes to each replica: :class:`ServerSettings`.

A module of its own, below the app (:mod:`memray.server.api`) and the MCP route
(:mod:`memray.server.mcp`) that both read it (neither imports the other for it), and free of the
server's packages (FastAPI, the MCP SDK).
"""

from __future__ import annotations

from dataclasses import dataclass

from memray.config import MemoryConfig

__all__ = ["ServerSettings"]


@dataclass(frozen=True)
class ServerSettings:
    """What ``memray serve`` passes to each replica."""

    config: MemoryConfig
    replicas: int = 1
    auth: bool = True
    max_body_bytes: int = 4 * 1024 * 1024
    allowed_origins: tuple[str, ...] = ("http://127.0.0.1", "http://localhost", "http://[::1]")
    otlp_endpoint: str | None = None
    mcp_app: str = "default"  # the app MCP tools act on when auth is off (a key names its own)
