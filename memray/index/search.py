"""What a caller sends a shard to search, and what comes back: :class:`Query`, the three kinds of
search (:data:`ShardSearch`) and :class:`ShardReply`.

A shard scores every search through :func:`memray.index.scorer.score` (what a score means: its
module docstring and ``docs/scoring.md``). BM25 uses the statistics of all the namespaces a
search reads together, so a user-wide search ranks as one BM25 over the user's whole history;
the statistics go back with the reply (:class:`ShardReply`), so a caller can score texts the
shard has not indexed yet the same way (read-your-writes, :mod:`memray.conversation.read_your_writes`).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from memray.ids import Namespace
from memray.index.base import ShardHit
from memray.index.lexical import Bm25Stats
from memray.ranking import Stream
from memray.sim_time import Window

__all__ = ["Mode", "Query", "ShardReply", "NamespaceSearch", "UserSearch", "AppSearch", "ShardSearch"]

Mode = Literal["vector", "lexical", "hybrid"]


class Query(NamedTuple):
    """One search as a caller sends it to a shard."""

    text: str
    vector: Any = None  # float32[dim] of ``model_id`` (None: no vector part)
    k: int = 10
    mode: Mode = "hybrid"
    min_score: float | None = None  # None: relevant hits only (score > 0); 0: no floor
    model_id: str | None = None
    threshold: float = 1.0  # the relevance threshold of ``model_id`` (memray.embedding.calibration)
    vector_weight: float = 0.0  # the share of the vector score in a hybrid score
    # conversations whose read-your-writes state the reply carries: (namespace, seqs the caller
    # wrote there and has not seen indexed yet) — see memray.conversation.read_your_writes
    watch: tuple[tuple[Namespace, tuple[int, ...]], ...] = ()
    stream: Stream | None = None  # memory-stream scoring (memray.ranking); None: by relevance
    window: Window | None = None  # simulation / creation time bounds; None: all
    # one hit per text: of items with the same text (memray.text.text_id), the first in hit order
    # (a context's recall, which shows a text once: copies of a question asked again would fill it)
    distinct: bool = False


class ShardReply(NamedTuple):
    hits: list[ShardHit]
    stats: Bm25Stats  # of everything searched, for the query's index terms
    stamps: dict[Namespace, int]  # the indexing stamp of each watched namespace (0: none)
    held: dict[Namespace, list[int]]  # of each watched namespace's seqs, those indexed here


class NamespaceSearch(NamedTuple):
    """A search of these namespaces (``VectorShard.search``), in a batch (``search_many``)."""

    namespaces: list[Namespace]
    query: Query


class UserSearch(NamedTuple):
    """A search of every namespace of one user and ``kind`` (``VectorShard.search_user``)."""

    app: str
    user_id: str
    kind: str
    query: Query


class AppSearch(NamedTuple):
    """A search of every namespace of ``app`` and ``kind`` on a shard (``VectorShard.search_app``)."""

    app: str
    kind: str
    query: Query


#: One search of a batch: callers batch the searches of many concurrent agents into one call.
ShardSearch = NamespaceSearch | UserSearch | AppSearch
