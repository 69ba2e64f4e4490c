"""A no-op actor that imports nothing, so a floor actor's process start costs only Ray's own
(``_harness.Sink`` imports memray through its typed client: it would charge memray's imports
to the floor)."""

from __future__ import annotations


class BareSink:
    def ping(self) -> bool:
        return True
