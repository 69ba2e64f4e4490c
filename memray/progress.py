"""Progress for long work (the demo, the backfill jobs, the benchmarks), on stderr.

:func:`bar` is a `tqdm <https://tqdm.github.io>`_ bar with count, rate and ETA when stderr is a
terminal, and does nothing when it is not (logs, CI, pipes stay free of carriage returns and
escape codes). :func:`step` prints one plain line for a phase whose length is unknown (starting
Ray, closing): those are printed either way, so a long silence never looks like a hang. stdout
is left to results.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm

__all__ = ["bar", "step", "is_terminal"]

_T0 = time.monotonic()


def is_terminal() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def bar(total: int | None, desc: str, unit: str = "it", enabled: bool | None = None, **kwargs: Any) -> Any:
    """A progress bar on stderr (a context manager; ``update(n)`` as work is done). ``enabled``:
    None (default) shows it only when stderr is a terminal."""
    show = is_terminal() if enabled is None else enabled
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not show,
        dynamic_ncols=True,
        unit_scale=bool(total and total >= 10_000),
        smoothing=0.1,
        **kwargs,
    )


def step(message: str, prefix: str = "memray") -> None:
    """One line on stderr: ``[  12.3s] memray: message``."""
    print(f"[{time.monotonic() - _T0:7.1f}s] {prefix}: {message}", file=sys.stderr, flush=True)
