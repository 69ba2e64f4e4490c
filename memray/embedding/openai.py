"""`OpenAIEmbedder`: any OpenAI-compatible embeddings endpoint (OpenAI, vLLM, Ollama...).

Requests go through the official ``openai`` client (the ``[openai]`` extra), which retries
408/409/429/5xx, connection errors and timeouts ``max_retries`` times with backoff, honouring
``Retry-After``. What still fails after that becomes :class:`memray.errors.EmbeddingError`.

Batches hold at most ``batch_size`` (≤ 2048) inputs and about ``MAX_REQUEST_TOKENS`` estimated
tokens, the API's per-request limits. Vectors are requested as ``encoding_format="float"``
(every compatible server supports it), put back in input order by their ``index``, checked
against ``dim`` and L2-normalised. An empty text is sent as a single space: the API rejects
empty inputs.
"""

from __future__ import annotations

import importlib.util
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memray.embedding.base import PLACEHOLDER_API_KEY
from memray.errors import EmbeddingError, MissingExtraError, ModelMismatchError, ValidationError
from memray.text import estimate_tokens

if TYPE_CHECKING:
    from openai import OpenAI

__all__ = ["OpenAIEmbedder", "KNOWN_DIMS", "MAX_BATCH", "MAX_REQUEST_TOKENS"]

MAX_BATCH = 2048
MAX_REQUEST_TOKENS = 250_000  # the API allows 300k; the estimate is rough, so leave headroom
#: Native dimensions of well-known models, used when ``dim`` is not given.
KNOWN_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class OpenAIEmbedder:
    """Embeds through ``POST {base_url}/embeddings``. ``model_id`` is ``openai:{model}:{dim}``.

    ``dim``: the vector size to expect (and to ask for, with ``send_dimensions=True``). When
    ``None`` it comes from :data:`KNOWN_DIMS`, or else from one probe request the first time
    ``dim``, ``model_id`` or ``embed`` is used. ``api_key=None`` sends a placeholder, which local
    servers accept. Constructing touches no network; the client is created on first use.
    Thread-safe (the ``openai`` client is).
    """

    def __init__(
        self,
        model: str,
        dim: int | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        send_dimensions: bool = False,
        batch_size: int = 256,
        timeout_s: float = 30.0,
        max_retries: int = 2,
    ) -> None:
        if importlib.util.find_spec("openai") is None:
            raise MissingExtraError("openai", "openai")
        if not 1 <= batch_size <= MAX_BATCH:
            raise ValidationError("batch_size", batch_size, f"must be 1..{MAX_BATCH}")
        if dim is not None and dim <= 0:
            raise ValidationError("dim", dim, "must be > 0")
        if send_dimensions and dim is None:
            raise ValidationError("dim", dim, "send_dimensions=True needs a dim to send")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key or PLACEHOLDER_API_KEY
        self.send_dimensions = send_dimensions
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._dim = dim if dim is not None else KNOWN_DIMS.get(model)
        self._client: OpenAI | None = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._request([" "]).shape[1])
        return self._dim

    @property
    def model_id(self) -> str:
        return f"openai:{self.model}:{self.dim}"

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32 ``[len(texts), dim]``, L2-normalised, input order kept."""
        dim = self.dim
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        parts = [self._request(batch) for batch in self._batches(texts)]
        for part in parts:
            if part.shape[1] != dim:
                raise self._mismatch(part.shape[1], dim)
        out = np.concatenate(parts)
        return _normalise(out, self.model)

    def _mismatch(self, got: int, dim: int) -> ModelMismatchError:
        return ModelMismatchError(
            f"{self.base_url or 'the OpenAI API'} returned {got}-dimensional vectors for model "
            f"{self.model!r}, expected dim={dim}; set EmbedderConfig.dim={got} (and re-embed "
            "existing vectors), or send_dimensions=True if the server supports `dimensions`"
        )

    def close(self) -> None:
        """Close the HTTP client (idempotent)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _batches(self, texts: list[str]) -> list[list[str]]:
        batches: list[list[str]] = [[]]
        tokens = 0
        for text in texts:
            cost = estimate_tokens(text)
            if batches[-1] and (len(batches[-1]) >= self.batch_size or tokens + cost > MAX_REQUEST_TOKENS):
                batches.append([])
                tokens = 0
            batches[-1].append(text if text else " ")
            tokens += cost
        return batches

    def _get_client(self) -> OpenAI:
        with self._lock:
            if self._client is None:
                try:
                    from openai import OpenAI  # optional dependency: the [openai] extra
                except ImportError as exc:  # found by find_spec, yet broken
                    raise MissingExtraError("openai", "openai") from exc
                self._client = OpenAI(
                    base_url=self.base_url, api_key=self.api_key, timeout=self.timeout_s, max_retries=self.max_retries
                )
            return self._client

    def _request(self, batch: list[str]) -> npt.NDArray[np.float32]:
        import openai  # optional dependency: the [openai] extra

        client = self._get_client()
        extra: dict[str, Any] = {"dimensions": self._dim} if self.send_dimensions else {}
        try:
            response = client.embeddings.create(model=self.model, input=batch, encoding_format="float", **extra)
        except openai.OpenAIError as exc:
            raise EmbeddingError(
                f"embedding {len(batch)} texts with {self.model!r} at "
                f"{self.base_url or 'the OpenAI API'} failed after {self.max_retries} retries: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        rows = sorted(response.data, key=lambda item: item.index)
        if [row.index for row in rows] != list(range(len(batch))):
            raise EmbeddingError(
                f"{self.model!r} answered {len(rows)} embeddings with indexes "
                f"{[row.index for row in rows][:10]} for {len(batch)} inputs"
            )
        lengths = {len(row.embedding) for row in rows}
        if len(lengths) != 1:
            raise ModelMismatchError(f"{self.model!r} returned vectors of mixed sizes {lengths}")
        return np.array([row.embedding for row in rows], dtype=np.float32)


def _normalise(vectors: npt.NDArray[np.float32], model: str) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if not np.all(np.isfinite(vectors)) or np.any(norms == 0):
        raise EmbeddingError(f"{model!r} returned a zero or non-finite vector")
    result: npt.NDArray[np.float32] = (vectors / norms).astype(np.float32)
    return result
