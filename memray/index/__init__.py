"""Retrieval indexes: exact and HNSW vector indexes, BM25, the scoring kernel, shards and their router.

Similarity is cosine over L2-normalised vectors; what a ``score`` means in each retrieval mode is
defined in :mod:`memray.index.scorer` (and, for users, ``docs/scoring.md``).
"""

from __future__ import annotations

from pathlib import Path

from memray.index.base import IndexItem, ShardHit, VectorIndex, read_json
from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex
from memray.index.lexical import LexicalIndex
from memray.index.router import RouterResult, ShardRouter
from memray.index.shard import VectorShard

__all__ = [
    "IndexItem",
    "ShardHit",
    "VectorIndex",
    "ExactIndex",
    "HnswIndex",
    "LexicalIndex",
    "VectorShard",
    "ShardRouter",
    "RouterResult",
    "load_index",
]


def load_index(directory: str) -> ExactIndex | HnswIndex:
    """Load whichever vector index was saved in ``directory``."""
    kind = read_json(Path(directory) / "meta.json").get("kind")
    if kind == "hnsw":
        return HnswIndex.load(directory)
    if kind == "exact":
        return ExactIndex.load(directory)
    raise ValueError(f"{directory} holds no vector index (kind={kind!r})")
