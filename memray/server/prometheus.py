"""memray's metrics (:func:`memray.metrics.snapshot`) in the Prometheus text format, for ``/metrics``.

A replica serves what its own process recorded: its HTTP requests and latencies, and the
facade-side metrics (recall latency, degraded recalls). The actors' metrics (commits, flush lag,
dead letters) are exported through Ray's own metrics endpoint (:mod:`memray.metrics`).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["render"]


def render(snapshot: dict[str, dict[str, Any]]) -> str:
    lines: list[str] = []
    for name, values in sorted(snapshot.items()):
        if "boundaries" in values:
            lines.append(f"# TYPE {name} histogram")
            for label, buckets in values["by_tags"].items():
                running = 0
                for bound, count in zip([*values["boundaries"], math.inf], buckets):
                    running += count
                    le = "+Inf" if bound == math.inf else repr(float(bound))
                    lines.append(f"{name}_bucket{_labels(label, le=le)} {running}")
                lines.append(f"{name}_count{_labels(label)} {running}")
            lines.append(f"{name}_sum {values['sum']}")
        else:
            lines.append(f"# TYPE {name} counter")
            for label, total in values["by_tags"].items():
                lines.append(f"{name}{_labels(label)} {total}")
    return "\n".join(lines) + "\n"


def _labels(label: str, **extra: str) -> str:
    """``a=1,b=2`` (how memray.metrics joins tags) as ``{a="1",b="2"}``."""
    pairs = [tuple(p.split("=", 1)) for p in label.split(",") if p] + list(extra.items())
    if not pairs:
        return ""
    escaped = (
        f'{k}="{v}"'.replace("\n", " ") for k, v in ((k, v.replace("\\", "\\\\").replace('"', '\\"')) for k, v in pairs)
    )
    return "{" + ",".join(escaped) + "}"
