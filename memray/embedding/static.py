"""`StaticEmbedder`: memray's default — meaning at tens of thousands of sentences a second, in numpy.

A static embedding model (model2vec's method): one vector per vocabulary token, distilled once
from a sentence transformer (:mod:`memray.embedding.distill`); a text's vector is the mean of
its tokens' vectors, L2-normalised. No model runs at embedding time: tokenizing is the cost.
The model memray ships, ``minilm-static-v1`` (in ``memray/embedding/models/``), is distilled from
all-MiniLM-L6-v2: 30,522 WordPiece tokens x 384 dimensions in float16 (23 MB), function words and
punctuation weighted 0, the rest by an estimate of their rarity, centred so unrelated texts sit
near cosine 0 (the recipe and its measurements: :mod:`memray.embedding.distill`).

What it understands: "what car do I own?" finds "I drive a red Tesla Model 3", which shares no
word with it. What it does not: word order and negation ("I am not vegetarian" sits near "I am
vegetarian"), and its cosine separates related from unrelated texts less sharply than the
transformer's, so its relevance floor lets through fewer of the related ones
(``docs/scoring.md``). ``embedder="minilm"`` runs the transformer itself
(:mod:`memray.embedding.minilm`) where that matters more than speed.

Speed: BERT's tokenizer splits at whitespace first, so a whitespace-separated word always becomes
the same token ids. Each distinct word is tokenized once (by the ``tokenizers`` library, in
batches) and its ids kept in a bounded table; a batch of texts is then ``str.split``, a dict
look-up per word, one gather of token rows per block of texts (padded with a zero row) and one
sum. ``python -m benchmarks.static_embedder`` (``benchmarks/results/static_embedder.json``, one
core): 63,000 chat-length texts a second with an empty word table, 105,000 once its words are
known, 41,000 one text at a time, against 45,000 for the tokenizer alone; 1,700,000 a second
for texts its memo holds (below). The same bits come out
whichever path a text takes (``tests/embedding/test_static_embedder.py`` holds them to the plain
tokenizer's).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memray.errors import EmbeddingError, ValidationError
from memray.files import load_npy
from memray.text import TextMemo

__all__ = ["StaticEmbedder", "StaticModel", "MODELS", "DEFAULT_MODEL", "model_folder", "load_model"]

MODELS = Path(__file__).parent / "models"
DEFAULT_MODEL = "minilm-static-v1"
_BLOCK = 256  # texts per gather, at most ...
_CELLS = 1 << 15  # ... and tokens (padding included): a gather is at most 32,768 x dim floats (50 MB)
#: Texts whose vectors a process keeps per model (12 MiB at 384 dimensions): a simulation's
#: message is embedded to score it in read-your-writes tails, often more than once, and again
#: by its host's pipeline; a repeated question too.
MEMO_TEXTS = 8_192


class StaticModel:
    """A static model's files: ``vectors.npy`` (``[vocab, dim]``, float16, rows already weighted;
    loaded as float32 with a zero row appended, the padding of a batch),
    ``tokenizer.json`` (a Hugging Face ``tokenizers`` file) and ``model.json`` (what it is)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = folder.name
        self.vectors: npt.NDArray[np.float32] = np.zeros((0, 0), np.float32)
        self.tokenizer: Any = None
        self.card: dict[str, Any] = {}
        self.memo: TextMemo[npt.NDArray[np.float32]] = TextMemo(MEMO_TEXTS)  # read-only rows

    def open(self) -> StaticModel:
        from tokenizers import Tokenizer  # 6 ms (python -X importtime): paid by the first embed, not by import memray

        self.card = json.loads((self.folder / "model.json").read_text(encoding="utf-8"))
        table = load_npy(self.folder / "vectors.npy")
        self.vectors = np.zeros((len(table) + 1, table.shape[1]), np.float32)  # + a zero row: padding
        self.vectors[:-1] = table
        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        return self


_LOADED: dict[Path, StaticModel] = {}
_LOAD_LOCK = threading.Lock()


def model_folder(name_or_path: str) -> Path:
    """The folder of the model named ``name_or_path``: one of :data:`MODELS`, or a folder path."""
    folder = Path(name_or_path) if ("/" in name_or_path or name_or_path.startswith(".")) else MODELS / name_or_path
    if not (folder / "vectors.npy").is_file() or not (folder / "model.json").is_file():
        shipped = sorted(p.name for p in MODELS.iterdir() if (p / "vectors.npy").is_file())
        raise ValidationError(
            "embedder.model",
            name_or_path,
            "is not a static model (a folder with vectors.npy, tokenizer.json and model.json)",
            f"use one of {shipped}, or a folder written by python -m memray.embedding.distill",
        )
    return folder.resolve()


def load_model(folder: Path) -> StaticModel:
    """The model in ``folder``, loaded once per process and shared (read-only)."""
    with _LOAD_LOCK:
        model = _LOADED.get(folder)
        if model is None:
            model = _LOADED[folder] = StaticModel(folder).open()
        return model


class StaticEmbedder:
    """Static embeddings (module docstring). ``model_id`` is ``static:{model}:{dim}``.

    ``recomputable``: deterministic and microseconds a text, so callers embed on the spot and
    shards recompute vectors from text instead of storing them. Thread-safe (one lock guards the
    word table). Pickles as its model name: the vectors load once in each process.

    With ``memo`` (the default), the vectors of the last :data:`MEMO_TEXTS` texts embedded in
    this process with this model are kept and given again (the same bits: a text's row does not
    depend on its batch); ``memray.text.forget_texts`` empties them.
    """

    recomputable = True

    def __init__(self, model: str = DEFAULT_MODEL, max_words: int = 500_000, memo: bool = True) -> None:
        self.model = model
        self.max_words = max_words
        self.memo = memo
        self._folder = model_folder(model)
        self.dim = int(json.loads((self._folder / "model.json").read_text(encoding="utf-8"))["dim"])
        self.model_id = f"static:{self._folder.name}:{self.dim}"
        self._loaded: StaticModel | None = None  # the vectors load on the first embed
        self._words: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[StaticEmbedder], tuple[str, int, bool]]:
        return (StaticEmbedder, (self.model, self.max_words, self.memo))

    @property
    def tokenizer(self) -> Any:
        """The model's ``tokenizers.Tokenizer`` (no special tokens, no padding, no truncation)."""
        return self._m.tokenizer

    @property
    def _m(self) -> StaticModel:
        if self._loaded is None:
            self._loaded = load_model(self._folder)
        return self._loaded

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, as the model's tokenizer gives them (without special tokens)."""
        words = [text.split() for text in texts]
        with self._lock:
            table = self._words
            missing = list({w for ws in words for w in ws if w not in table})
            if not missing:
                return [[i for w in ws for i in table[w]] for ws in words]
            encoded = self._m.tokenizer.encode_batch_fast(missing, add_special_tokens=False)
            new = dict(zip(missing, (tuple(e.ids) for e in encoded)))
            ids = [[i for w in ws for i in (new[w] if w in new else table[w])] for ws in words]
            if len(table) + len(new) > self.max_words:
                table.clear()  # a cache: refilling it changes nothing in the output
            if len(new) <= self.max_words:
                table.update(new)
            return ids

    def _pooled(self, ids: list[list[int]]) -> npt.NDArray[np.float32]:
        """The sum of each text's token vectors. Texts are taken in order of length, in blocks
        padded to their longest with a zero row: one gather and one sum per block (``reduceat``
        over ragged rows was 20x slower). Each row is summed token by token, in order, whatever
        the block: the same bits alone or in a batch."""
        vectors = self._m.vectors
        lengths = np.fromiter((len(i) for i in ids), np.int64, len(ids))
        out = np.zeros((len(ids), self.dim), np.float32)
        order = np.argsort(lengths, kind="stable")
        order = order[lengths[order] > 0]
        start = 0
        while start < len(order):
            end = min(start + _BLOCK, len(order))
            while end - start > 1 and (end - start) * lengths[order[end - 1]] > _CELLS:
                end = start + max(1, _CELLS // int(lengths[order[end - 1]]))
            rows, start = order[start:end], end
            width = int(lengths[rows[-1]])
            block = np.full((len(rows), width), len(vectors) - 1, np.int64)  # the last row is zero
            block[np.arange(width) < lengths[rows, None]] = np.fromiter(
                (i for r in rows for i in ids[r]), np.int64, int(lengths[rows].sum())
            )
            out[rows] = vectors[block].sum(axis=1)
        return out

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``: float32 ``[len(texts), dim]``, rows L2-normalised, order kept. A text
        with no content token (empty, only punctuation or function words) gets the one-hot vector
        of a hash of its raw text: a unit row, near cosine 0 to every other."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if not self.memo:
            return self._embedded(list(texts))
        memo = self._m.memo
        kept = [memo.get(text) if isinstance(text, str) else None for text in texts]
        todo = [i for i, row in enumerate(kept) if row is None]
        if not todo:
            return np.stack(kept)  # type: ignore[arg-type]  # (every row is kept)
        fresh = self._embedded([texts[i] for i in todo])
        rows = fresh.copy()  # the memo's own: the caller may write to what it is given
        rows.flags.writeable = False
        for i, row in zip(todo, rows):
            memo.keep(texts[i], row)
        if len(todo) == len(texts):
            return fresh
        out = np.empty((len(texts), self.dim), np.float32)
        out[todo] = fresh
        hits = [i for i, row in enumerate(kept) if row is not None]
        out[hits] = np.stack([kept[i] for i in hits])  # type: ignore[misc]
        return out

    def _embedded(self, texts: list[str]) -> npt.NDArray[np.float32]:
        try:
            ids = self.token_ids(texts)
        except Exception as exc:  # the tokenizer rejected a text: say which model and how many
            raise EmbeddingError(f"{self.model_id} could not tokenize {len(texts)} texts: {exc}") from exc
        out = self._pooled(ids)
        norms = np.linalg.norm(out, axis=1)
        empty = norms == 0.0
        for row in np.flatnonzero(empty):
            digest = hashlib.blake2b(texts[row].encode("utf-8"), digest_size=8).digest()
            out[row, int.from_bytes(digest, "little") % self.dim] = 1.0
        norms[empty] = 1.0
        out /= norms[:, None]
        return out
