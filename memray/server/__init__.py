"""``memray serve`` and ``memray mcp``: memray over HTTP (REST under ``/v1``, MCP at ``/mcp``) on
Ray Serve, and MCP over stdio; API keys scoped to a tenant; OpenTelemetry traces.

Layout: :mod:`.operations` (every operation, declared once: its arguments, defaults, bounds,
reach, read or write; :mod:`.operation` says what a declaration holds), :mod:`.api` (the ASGI
app: health, metrics, errors, body limit), :mod:`.routes` (the REST routes, made from the
operations), :mod:`.models` (the records their bodies and answers carry), :mod:`.mcp` (the MCP
tools, made from the operations), :mod:`.reference` (the REST and MCP reference of the docs, made
from them too), :mod:`.auth` (keys,
checked on every route and tool), :mod:`.problems` (memray errors as problem details),
:mod:`.deployment` (the Ray Serve application and the ``memray serve`` process), :mod:`.stdio`
(``memray mcp``). Everything here needs the ``serve`` extra: :func:`require` says so in one line.
"""

from __future__ import annotations

import importlib.util

from memray.errors import MissingExtraError

__all__ = ["require"]

#: (module, the package that brings it): what the ``serve`` extra installs.
NEEDED = (("fastapi", "fastapi"), ("ray.serve", "ray[serve]"), ("mcp", "mcp"), ("opentelemetry", "opentelemetry-api"))


def require() -> None:
    """Raise :class:`MissingExtraError` naming the ``serve`` extra if a package it brings is missing."""
    for module, package in NEEDED:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtraError(package, "serve")
