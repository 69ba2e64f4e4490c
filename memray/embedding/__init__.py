"""Embedders: text → L2-normalised float32 vectors.

`StaticEmbedder` (the default: a table distilled from all-MiniLM-L6-v2, shipped with memray),
`MiniLMEmbedder` (all-MiniLM-L6-v2 itself in numpy, ``[minilm]`` extra), `HashEmbedder` (words
only, no model), `OpenAIEmbedder` (any OpenAI-compatible endpoint, ``[openai]`` extra),
`LocalEmbedder` (sentence-transformers, ``[local]`` extra), and `CachedEmbedder` over an
`EmbeddingCache`. `build_embedder` makes one from an `EmbedderConfig`. The MiniLM, OpenAI and
local embedders import their packages only when built, so each of their modules imports without them.
"""

from __future__ import annotations

from memray.embedding.base import Embedder
from memray.embedding.cache import CachedEmbedder, CacheStats, EmbeddingCache, cache_key
from memray.embedding.factory import build_embedder
from memray.embedding.hashing import HashEmbedder
from memray.embedding.local import LocalEmbedder
from memray.embedding.minilm import MiniLMEmbedder
from memray.embedding.openai import OpenAIEmbedder
from memray.embedding.static import StaticEmbedder

__all__ = [
    "Embedder",
    "build_embedder",
    "StaticEmbedder",
    "MiniLMEmbedder",
    "HashEmbedder",
    "OpenAIEmbedder",
    "LocalEmbedder",
    "EmbeddingCache",
    "CachedEmbedder",
    "CacheStats",
    "cache_key",
]
