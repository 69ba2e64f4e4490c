"""`ItemColumns`: per-item numbers a namespace keeps for filters and stream scoring.

Three float64 columns indexed by an item's label (labels are a namespace's counter, so the rows
are dense): ``created_at`` (wall clock: a message's creation time, an entry's timestamp),
``sim_time`` (simulated seconds) and ``importance`` ([0, 1]). NaN means "none". One small
``(capacity, 3)`` array per namespace, grown by doubling: 24 bytes an item, and searches read
the rows of many labels in one fancy index.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from memray.errors import ValidationError

__all__ = [
    "ItemColumns",
    "Columns",
    "NO_COLUMNS",
    "COLUMN_NAMES",
    "columns_of",
    "checked_columns",
    "same_columns",
    "snapshot_columns",
]

#: One item's (created_at, sim_time, importance); NaN where it has none.
Columns = tuple[float, float, float]
NO_COLUMNS: Columns = (math.nan, math.nan, math.nan)
#: Their names, in order (also the snapshot's column names).
COLUMN_NAMES = ("created_at", "sim_time", "importance")


def columns_of(created_at: float | None, sim_time: float | None, importance: float | None) -> Columns:
    """The :data:`Columns` of an item (None becomes NaN)."""
    return (
        math.nan if created_at is None else float(created_at),
        math.nan if sim_time is None else float(sim_time),
        math.nan if importance is None else float(importance),
    )


def checked_columns(doc_id: str, values: Any) -> Columns:
    """``values`` as :data:`Columns`: three floats, each finite or NaN."""
    try:
        a, b, c = values
        a, b, c = float(a), float(b), float(c)
    except (TypeError, ValueError) as exc:
        raise ValidationError("columns", values, f"of doc_id={doc_id!r} must be three numbers") from exc
    if math.isinf(a) or math.isinf(b) or math.isinf(c):  # (spelled out: every item of an upsert passes here)
        raise ValidationError("columns", values, f"of doc_id={doc_id!r} must be finite or NaN (none)")
    return a, b, c


def same_columns(a: Columns, b: Columns) -> bool:
    """Equal, with NaN equal to NaN."""
    return all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def snapshot_columns(items: dict[str, list[Any]]) -> list[Columns]:
    """The columns of a snapshot's items (``items.parquet`` as a dict of lists). A snapshot written
    before the columns existed has none: they are read from the item's payload (its JSON), which
    holds a message's ``created_at`` or an entry's ``timestamp``."""
    if all(name in items for name in COLUMN_NAMES):
        return [
            (float("nan") if a is None else a, float("nan") if b is None else b, float("nan") if c is None else c)
            for a, b, c in zip(*(items[name] for name in COLUMN_NAMES))
        ]
    return [_from_payload(payload) for payload in items["payload"]]


def _from_payload(payload: str) -> Columns:
    if not payload:
        return NO_COLUMNS
    data = json.loads(payload)
    entry = data.get("entry")
    if isinstance(entry, dict):
        return columns_of(entry.get("timestamp"), entry.get("sim_time"), entry.get("importance"))
    return columns_of(data.get("created_at"), data.get("sim_time"), data.get("importance"))


class ItemColumns:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = np.full((0, 3), np.nan)

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def set(self, label: int, values: Columns) -> None:
        if label >= self.data.shape[0]:
            grown = np.full((max(4, 2 * self.data.shape[0], label + 1), 3), np.nan)
            grown[: self.data.shape[0]] = self.data
            self.data = grown
        self.data[label] = values

    def clear(self, label: int) -> None:
        if label < self.data.shape[0]:
            self.data[label] = np.nan

    def get(self, label: int) -> Columns:
        if label >= self.data.shape[0]:
            return NO_COLUMNS
        row = self.data[label]
        return float(row[0]), float(row[1]), float(row[2])

    def rows(self, labels: Any) -> np.ndarray:
        """``float64[len(labels), 3]``: the columns of ``labels`` (NaN rows for unknown ones)."""
        labs = np.asarray(labels, dtype=np.int64)
        out = np.full((len(labs), 3), np.nan)
        inside = labs < self.data.shape[0]
        out[inside] = self.data[labs[inside]]
        return out
