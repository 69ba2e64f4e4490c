"""`recomputer`: what a shard needs to recompute a recomputable model's vectors from text
(:mod:`memray.index.recompute`), built from the recorded or configured embedder."""

from __future__ import annotations

from memray.config import EmbedderConfig
from memray.embedding.factory import build_embedder
from memray.index.recompute import Recompute

__all__ = ["recomputer", "RECOMPUTABLE"]

#: The embedder kinds that may be recomputable (a custom one says so itself).
RECOMPUTABLE = ("static", "hash", "custom")


def recomputer(config: EmbedderConfig | None, model_id: str) -> Recompute | None:
    """The :class:`Recompute` of ``model_id`` when ``config`` builds a recomputable embedder of
    that model; None otherwise (its vectors are stored, or there are none). Only the static
    and hash embedders and custom ones can be: the others are not even built."""
    if config is None or config.kind not in RECOMPUTABLE or (config.kind == "custom" and config.custom is None):
        return None
    embedder = build_embedder(config.model_copy(update={"cache_size": 0}))
    if embedder is None or embedder.model_id != model_id or not getattr(embedder, "recomputable", False):
        return None
    return Recompute(model_id, embedder.embed)
