from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from memray.ids import Namespace
from memray.index.base import ShardHit
from memray.index.search import Mode, Query
from memray.rpc.local import LocalRef
from memray.store.history import HistoryStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HistoryStore]:
    """A real DuckDB history store, open."""
    s = HistoryStore(str(tmp_path / "h.duckdb"))
    s.open()
    yield s
    s.close()


@pytest.fixture
def refs() -> Iterator[list[LocalRef]]:
    """In-process refs a test makes (each shut down afterwards)."""
    made: list[LocalRef] = []
    yield made
    for ref in made:
        ref.shutdown()


def unit(rng: np.random.Generator, n: int, dim: int) -> npt.NDArray[np.float32]:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    out: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def clustered(
    rng: np.random.Generator, n: int, dim: int, clusters: int, spread: float = 0.3
) -> npt.NDArray[np.float32]:
    """``n`` unit vectors drawn around ``clusters`` gaussian centres."""
    centres = unit(rng, clusters, dim)
    v = centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    out: npt.NDArray[np.float32] = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


#: The hybrid vector weight the index tests use (memray.embedding.calibration sets it per embedder).
WEIGHT = 0.3


def query(
    vector: Any = None,
    text: str = "",
    k: int = 10,
    mode: Mode = "hybrid",
    min_score: float | None = None,
    model_id: str | None = None,
    threshold: float = 0.0,
    vector_weight: float = WEIGHT,
) -> Query:
    """A shard query; ``threshold=0`` makes a vector score the cosine clipped to [0, 1]."""
    return Query(text, vector, k, mode, min_score, model_id, threshold, vector_weight)


def find(
    shard: Any, namespaces: list[Namespace], vector: Any, text: str, k: int, mode: Mode, **spec: Any
) -> list[ShardHit]:
    """``shard.search`` with the query spelled out (``spec``: the rest of :func:`query`); the hits only."""
    return list(shard.search(namespaces, query(vector, text, k, mode, **spec)).hits)


def find_user(
    shard: Any, app: str, user_id: str, kind: str, vector: Any, text: str, k: int, mode: Mode, **spec: Any
) -> list[ShardHit]:
    return list(shard.search_user(app, user_id, kind, query(vector, text, k, mode, **spec)).hits)


def find_app(
    shard: Any, app: str, kind: str, vector: Any, text: str, k: int, mode: Mode, **spec: Any
) -> list[ShardHit]:
    return list(shard.search_app(app, kind, query(vector, text, k, mode, **spec)).hits)
