"""`QueryEncoder`: the query side of retrieval, shared by conversation recall and the service.

It embeds queries in the caller's process (concurrent searches share one batch: 4x the
throughput of one by one; a recomputable embedder, microseconds a text, embeds on the spot: the
thread hop cost more than the hash embedding) and turns each into a
:class:`~memray.index.search.Query` carrying the vector, its model id and that model's
calibration (relevance threshold and vector weight, :mod:`memray.embedding.calibration`). No
embedder, or ``mode="lexical"``: lexical only (documented, not degraded). An embedder whose
vectors are ignored (its calibration found they do not separate unrelated texts): lexical only,
and in vector mode the reason. An embedder that fails (endpoint down, wrong dimension): lexical
only, and the reason, so the result says ``degraded``.
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

from memray.embedding.base import Embedder
from memray.embedding.calibration import DOES_NOT_SEPARATE, Calibration
from memray.errors import EmbeddingError
from memray.index.search import Mode, Query
from memray.ranking import Stream
from memray.rpc.batch import Coalescer
from memray.sim_time import Window

__all__ = ["QueryEncoder", "Encoded"]

_IGNORED = f"vector search unavailable ({DOES_NOT_SEPARATE}); lexical results only"


class Encoded(NamedTuple):
    """A query embedded (or not) for one search."""

    mode: Mode
    vector: Any  # float32[dim] or None
    model_id: str | None
    calibration: Calibration
    failed: str | None  # why the vector part could not be used (the search is degraded)

    def query(
        self,
        text: str,
        k: int,
        min_score: float | None,
        watch: tuple[Any, ...] = (),
        stream: Stream | None = None,
        window: Window | None = None,
        distinct: bool = False,
    ) -> Query:
        threshold, weight = self.calibration
        return Query(
            text,
            self.vector,
            k,
            self.mode,
            min_score,
            self.model_id,
            threshold,
            weight,
            watch,
            stream,
            window,
            distinct,
        )


class QueryEncoder:
    def __init__(self, embedder: Embedder | None, calibration: Calibration) -> None:
        self._embedder = embedder
        self._calibration = calibration
        self._batch: Coalescer[str, Any] | None = None

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    @property
    def calibration(self) -> Calibration:
        return self._calibration

    def set_embedder(self, embedder: Embedder | None, calibration: Calibration) -> None:
        """Embed queries with ``embedder`` from now on (after a re-embedding cutover)."""
        self._embedder, self._calibration, self._batch = embedder, calibration, None

    async def encode(self, text: str, mode: Mode) -> Encoded:
        (encoded,) = await self.encode_many([(text, mode)])
        return encoded

    async def encode_many(self, queries: list[tuple[str, Mode]]) -> list[Encoded]:
        """Each ``(text, mode)`` embedded (or not) for one search, in order. The distinct texts
        that need a vector are embedded in one call: a tick's agents often ask alike."""
        embedder, calibration = self._embedder, self._calibration  # one model for these queries
        lexical = Encoded("lexical", None, None, calibration, None)
        if embedder is None:
            return [lexical] * len(queries)
        if calibration.ignores_vectors:  # an embedder that does not separate texts: lexical, said in vector mode
            ignored = Encoded("lexical", None, None, calibration, _IGNORED)
            return [ignored if mode == "vector" else lexical for _, mode in queries]
        texts = list(dict.fromkeys(text for text, mode in queries if mode != "lexical"))
        if not texts:
            return [lexical] * len(queries)
        vectors: Any
        try:
            if getattr(embedder, "recomputable", False):  # microseconds a text: no thread hop
                vectors = embedder.embed(texts)
            elif len(texts) == 1:  # concurrent single searches share one batch
                vectors = [await self._batched(embedder).get(texts[0])]
            else:
                vectors = await asyncio.to_thread(embedder.embed, texts)
        except Exception as exc:  # the embedder is down or misconfigured: lexical only, flagged
            reason = str(exc) if isinstance(exc, EmbeddingError) else f"{type(exc).__name__}: {exc}"
            failed = Encoded(
                "lexical", None, None, calibration, f"query embedding failed, lexical results only: {reason}"
            )
            return [lexical if mode == "lexical" else failed for _, mode in queries]
        by_text = dict(zip(texts, vectors))
        model_id = embedder.model_id
        return [
            lexical if mode == "lexical" else Encoded(mode, by_text[text], model_id, calibration, None)
            for text, mode in queries
        ]

    def _batched(self, embedder: Embedder) -> Coalescer[str, Any]:
        batch = self._batch
        if batch is None:

            async def embed(texts: list[str]) -> list[Any]:
                return list(await asyncio.to_thread(embedder.embed, texts))

            batch = self._batch = Coalescer(embed, max_batch=512)
        return batch
