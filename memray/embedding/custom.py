"""`CustomEmbedder`: an embedder the caller brings, as an object or a plain function.

``memray.open(path, embedder=...)`` takes any object with the
:class:`~memray.embedding.base.Embedder` protocol (``model_id``, ``dim``, ``embed``) or a plain
``Callable[[list[str]], array]``. Either is wrapped here, so memray can rely on what it returns:
a float32 ``[len(texts), dim]`` array, finite, rows L2-normalised (a wrong shape or a NaN raises
:class:`~memray.errors.EmbeddingError`, which the pipeline retries like any embedding failure).

A plain function has no ``dim``: it is asked once, with one probe text, when the wrapper is
built (once per process that embeds: the caller, and each host in Ray mode). Its ``model_id`` is
``EmbedderConfig.model`` when set, else ``custom:<module>.<name>:<dim>``; vectors of different
model ids never share an index, so change the id when the function changes. In Ray mode the
object is pickled (cloudpickle) to the host actors, so it must pickle: a closure or an instance
that holds a lock or an open client does not. ``recomputable`` (the caller may re-embed texts
itself for read-your-writes scoring) is taken from the object, default False.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from memray.errors import EmbeddingError, ValidationError

__all__ = ["CustomEmbedder", "check_custom"]

_PROBE = ["memray dimension probe"]


def _is_embedder(obj: Any) -> bool:
    return all(hasattr(obj, name) for name in ("model_id", "dim", "embed")) and callable(obj.embed)


def check_custom(obj: object) -> object:
    """``obj`` if it can be an embedder (module docstring), else a ValidationError."""
    if obj is None or not (_is_embedder(obj) or callable(obj)):
        raise ValidationError(
            "embedder",
            obj,
            "must be an Embedder (model_id, dim, embed) or a callable list[str] -> array",
            "or pass an EmbedderConfig for a built-in embedder",
        )
    return obj


class CustomEmbedder:
    def __init__(self, inner: object, model_id: str | None = None) -> None:
        check_custom(inner)
        self.inner = inner
        self.recomputable = bool(getattr(inner, "recomputable", False))
        if _is_embedder(inner):
            self._embed: Callable[[list[str]], Any] = inner.embed  # type: ignore[attr-defined]
            self._dim = int(inner.dim)  # type: ignore[attr-defined]
            self._model_id = model_id or str(inner.model_id)  # type: ignore[attr-defined]
        else:
            self._embed = inner  # type: ignore[assignment]
            probe = np.asarray(self._embed(list(_PROBE)))
            if probe.ndim != 2 or probe.shape[0] != 1 or probe.shape[1] < 1:
                raise ValidationError(
                    "embedder",
                    inner,
                    f"returned shape {probe.shape} for one text",
                    "return an array of shape (len(texts), dim)",
                )
            self._dim = int(probe.shape[1])
            name = f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', type(inner).__name__)}"
            self._model_id = model_id or f"custom:{name}:{self._dim}"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """The inner embedder's vectors, checked and L2-normalised (module docstring)."""
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        try:
            raw = self._embed(list(texts))
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"custom embedder {self._model_id!r} failed: {type(exc).__name__}: {exc}") from exc
        arr = np.asarray(raw, dtype=np.float32)
        if arr.shape != (len(texts), self._dim):
            raise EmbeddingError(
                f"custom embedder {self._model_id!r} returned shape {arr.shape} for {len(texts)} "
                f"texts; expected ({len(texts)}, {self._dim})"
            )
        if not np.isfinite(arr).all():
            raise EmbeddingError(f"custom embedder {self._model_id!r} returned a non-finite value")
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        return np.ascontiguousarray(arr / np.where(norms > 0, norms, 1.0), dtype=np.float32)
