"""The `Embedder` protocol (and the placeholder API key the OpenAI-compatible embedders send)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "PLACEHOLDER_API_KEY"]

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
