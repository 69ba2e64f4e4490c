"""Deprecated: what this module held is in :mod:`memray.ranking` (``Scoring``, ``Stream``,
``check_importance``, ``coerce_scoring``, ``stream_of``) and :mod:`memray.sim_time` (``SimTime``,
``SECONDS_PER_HOUR``, ``to_seconds``, ``Window``, ``window``). Each name is still found here,
with a :class:`DeprecationWarning` naming its new module; ``memray.Scoring`` is unchanged."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_MOVED = {
    "Scoring": "memray.ranking",
    "Stream": "memray.ranking",
    "check_importance": "memray.ranking",
    "coerce_scoring": "memray.ranking",
    "stream_of": "memray.ranking",
    "SimTime": "memray.sim_time",
    "SECONDS_PER_HOUR": "memray.sim_time",
    "to_seconds": "memray.sim_time",
    "Window": "memray.sim_time",
    "window": "memray.sim_time",
}

__all__ = list(_MOVED)


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'memray.scoring' has no attribute {name!r}")
    warnings.warn(
        f"memray.scoring is deprecated: import {name} from {module}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(_MOVED)
