"""`LocalEmbedder`: a sentence-transformers model run in this process (the ``[local]`` extra).

The model loads on first use (``dim``, ``model_id`` or ``embed``), onto ``device`` — ``"cuda"``,
``"cpu"``, ... — or, when ``device`` is ``None``, onto the GPU if torch sees one and the CPU
otherwise. Construction only checks that the package is installed, so a missing extra is
reported when memray opens, not on the first message.
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from memray.errors import EmbeddingError, MissingExtraError, ValidationError

__all__ = ["LocalEmbedder"]


def _require_sentence_transformers() -> None:
    if importlib.util.find_spec("sentence_transformers") is None:
        raise MissingExtraError("sentence-transformers", "local")


class LocalEmbedder:
    """sentence-transformers embedder. ``model_id`` is ``local:{model_name}:{dim}``.

    Thread-safe: one lock serialises loading and encoding (a model on one device gains nothing
    from concurrent ``encode`` calls).
    """

    def __init__(self, model_name: str, device: str | None = None, batch_size: int = 64) -> None:
        _require_sentence_transformers()
        if batch_size <= 0:
            raise ValidationError("batch_size", batch_size, "must be > 0")
        self.model_name = model_name
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now (idempotent); ``embed`` calls it."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise MissingExtraError("sentence-transformers", "local") from exc
            self._model = SentenceTransformer(self.model_name, device=self.device or _auto_device())
        return self._model

    @property
    def dim(self) -> int:
        with self._lock:
            return int(self._load_locked().get_sentence_embedding_dimension())

    @property
    def model_id(self) -> str:
        return f"local:{self.model_name}:{self.dim}"

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32 ``[len(texts), dim]``, L2-normalised, input order kept."""
        dim = self.dim
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        with self._lock:
            model = self._load_locked()
            try:
                out = model.encode(
                    texts,
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                )
            except Exception as exc:  # torch/model errors have no common base class
                raise EmbeddingError(
                    f"{self.model_name!r} failed on {len(texts)} texts: {exc}"
                ) from exc
        return np.asarray(out, dtype=np.float32).reshape(len(texts), dim)


def _auto_device() -> str:
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"
