"""The `Embedder` protocol and `build_embedder`, which turns an `EmbedderConfig` into one."""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memray.config import EmbedderConfig

__all__ = ["Embedder", "build_embedder", "PLACEHOLDER_API_KEY"]

#: Sent as the API key when none is configured: local OpenAI-compatible servers (vLLM, Ollama)
#: ignore it, while the ``openai`` client refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    ``model_id`` names the model *and* its dimension (``hash-v1-256``, ``openai:m:1536``): vectors
    of different ids never share an index. ``embed`` returns float32 ``[len(texts), dim]`` with
    L2-normalised rows in input order; an empty list gives shape ``(0, dim)``. Failures raise
    :class:`memray.errors.EmbeddingError`.

    An embedder may also declare ``recomputable = True``: deterministic and cheap enough that a
    caller embeds a text itself rather than wait for its stored vector (the hash embedder; the
    read-your-writes tail is then scored by vector too). Absent means False.
    """

    @property
    def model_id(self) -> str: ...  # a plain attribute satisfies it too

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]: ...


def build_embedder(config: EmbedderConfig) -> Embedder | None:
    """Build the embedder ``config`` describes; ``None`` for ``kind="none"``.

    Wrapped in a :class:`~memray.embedding.cache.CachedEmbedder` when ``cache_size > 0``.
    Constructing never touches the network or loads a model; the first ``embed`` does.
    """
    inner: Embedder
    if config.kind == "none":
        return None
    if config.kind == "custom":
        from memray.embedding.custom import CustomEmbedder

        inner = CustomEmbedder(config.custom, config.model)
    elif config.kind == "hash":
        from memray.embedding.hashing import HashEmbedder

        inner = HashEmbedder(config.dim)
    elif config.kind == "openai":
        from memray.embedding.openai import OpenAIEmbedder

        inner = OpenAIEmbedder(
            config.model or "text-embedding-3-small",
            dim=config.dim,
            base_url=config.base_url,
            api_key=os.environ.get(config.api_key_env),
            send_dimensions=config.send_dimensions,
            batch_size=config.batch_size,
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
        )
    else:
        from memray.embedding.local import LocalEmbedder

        inner = LocalEmbedder(
            config.model or "sentence-transformers/all-MiniLM-L6-v2",
            device=config.device,
            batch_size=config.batch_size,
        )
    if config.cache_size > 0:
        from memray.embedding.cache import CachedEmbedder, EmbeddingCache

        return CachedEmbedder(inner, EmbeddingCache(config.cache_size, config.cache_ttl_s))
    return inner
