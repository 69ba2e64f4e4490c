"""Vectors a shard recomputes from text: a recomputable model's are not stored.

An embedder that is :attr:`~memray.embedding.base.Embedder.recomputable` (the hash embedder:
deterministic, microseconds a text) gets no vectors written to the store; the items are only
marked embedded with it (:func:`memray.store.items.put_embeddings`). Whatever rebuilds a shard
from the store (recovery, leveling, a fork's reconcile) then reads rows with ``vector=None``, and
the shard fills them in with :func:`fill_vectors` before indexing: the same vectors the pipeline
gave it, so searches answer as before. The index layer sits below the embedders: it is handed
the model id and an ``embed`` function (:func:`memray.embedding.recompute.recomputer`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from memray.store.base import IndexRow

__all__ = ["Recompute", "fill_vectors"]


class Recompute(NamedTuple):
    model_id: str  # the model whose vectors ``embed`` recomputes
    embed: Callable[[list[str]], Any]  # texts -> float32[len(texts), dim]


def fill_vectors(rows: list[IndexRow], recompute: Recompute | None, model_id: str) -> list[IndexRow]:
    """``rows`` with every missing vector of a non-empty text recomputed, when ``recompute``
    recomputes ``model_id``; otherwise ``rows`` as they are (those items stay lexical-only)."""
    if recompute is None or recompute.model_id != model_id:
        return rows
    todo = [n for n, row in enumerate(rows) if row.vector is None and row.text]
    if not todo:
        return rows
    vectors = recompute.embed([rows[n].text for n in todo])
    filled = list(rows)
    for n, vector in zip(todo, vectors):
        filled[n] = rows[n]._replace(vector=vector)
    return filled
