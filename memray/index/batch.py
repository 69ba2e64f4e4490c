"""Many searches of one shard scored together: what ``VectorShard.search_many`` does with the
searches of a tick's agents, with the same results as :func:`memray.index.search.search_spaces`
run once per search (``tests/index/test_batch.py`` holds them equal).

A batch is scored over arrays that hold every (search, namespace) pair of the block end to end,
each pair a segment indexed by the namespace's labels (the dense scoring of
:func:`~memray.index.search.search_spaces`, for all pairs at once):

- the query vectors are normalised together, and each namespace's matrix is multiplied by the
  vector of each search that reads it (one matrix-vector product per pair, the very product a
  search alone makes: :meth:`ExactIndex.scan_many` says why not one matrix-matrix product).
  Gathering the namespaces' vectors into one padded block or one concatenated matrix for a
  single product was slower for every shape measured (``python -m benchmarks.search_micro
  --shapes``): the gather copies what the products only read;
- BM25 contributions of every pair's postings go through one ``bincount`` (the statistics stay
  per search: each search ranks over the namespaces it names);
- fusion, neighbour support, the relevance floor and the top ``k`` of every search are a fixed
  number of numpy calls for the whole block, and :class:`ShardHit` tuples are built for the
  ``k`` hits each search returns, nothing else.

What the batch does not take (:func:`batchable`): HNSW namespaces (their vector part is a graph
search, not a scan), memory-stream scoring, time windows and ``min_score <= 0`` (every item in
scope a candidate); those searches run one by one. A block holds at most :data:`BLOCK_ITEMS`
segment entries, so memory stays bounded whatever the batch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from memray.config import IndexConfig
from memray.errors import ModelMismatchError, ValidationError
from memray.ids import Namespace
from memray.index.base import ShardHit, normalise
from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex
from memray.index.lexical import Bm25Stats, ideal_bm25
from memray.index.search import DENSE_MAX, Query, query_stats, query_terms, search_spaces
from memray.index.space import Space, Spaces

__all__ = [
    "Prepared",
    "BLOCK_ITEMS",
    "MIN_BATCH",
    "checked",
    "spaces_of",
    "finds_nothing",
    "batchable",
    "normalise_many",
    "score_many",
]

#: The most segment entries (labels of all the pairs of a block) scored in one block.
BLOCK_ITEMS = 1 << 20
#: Fewer searches than this are scored one by one: a block's fixed costs outweigh what it saves
#: (``python -m benchmarks.search_micro --batch 1,2,3,4,8``: about even from 2 to 4, ahead from 8).
MIN_BATCH = 3


class Prepared(NamedTuple):
    """One checked search: its query, the spaces it reads, whether it asks the retired model, and
    its query vector (raw until :func:`normalise_many`; None: no vector part)."""

    query: Query
    spaces: list[Space]
    retired: bool
    vector: np.ndarray | None


def checked(spaces: Spaces, shard_id: int, query: Query) -> tuple[Query, bool, np.ndarray | None]:
    """``query`` checked against a shard's model versions: the query, whether it asks the retired
    model, and its vector as float32 (not normalised; None: no vector part). Raises
    ValidationError for an unknown mode, ModelMismatchError for another model or dim."""
    query = query if type(query) is Query else Query(*query)
    if query.mode not in ("vector", "lexical", "hybrid"):
        raise ValidationError("mode", query.mode, "must be 'vector', 'lexical' or 'hybrid'")
    retired = query.model_id is not None and query.model_id != spaces.model_id
    if retired and (spaces.retired is None or spaces.retired[0] != query.model_id):
        raise ModelMismatchError(
            f"query embedded with model {query.model_id!r} but shard {shard_id} indexes "
            f"{spaces.model_id!r}; embed the query with the index's model (reopen memray)"
        )
    model, dim = spaces.retired if retired and spaces.retired else (spaces.model_id, spaces.dim)
    if query.vector is None or query.mode == "lexical":
        return query, retired, None
    vector = np.asarray(query.vector, dtype=np.float32).reshape(-1)
    if vector.shape[0] != dim:
        raise ModelMismatchError(
            f"query vector of dim {vector.shape[0]} does not fit shard {shard_id} "
            f"(model {model!r}, dim {dim}); embed the query with the index's model"
        )
    return query, retired, vector


def spaces_of(spaces: Spaces, namespaces: Iterable[Namespace]) -> list[Space]:
    """The spaces of ``namespaces`` held in ``spaces``, each once, in order (unknown ones skipped)."""
    wanted = dict.fromkeys(ns if type(ns) is Namespace else Namespace(*ns) for ns in namespaces)
    return [spaces[ns] for ns in wanted if ns in spaces]


def finds_nothing(query: Query, spaces: list[Space], vector: np.ndarray | None) -> bool:
    """Whether a search is answered empty unscored: ``k <= 0``, no namespace held, or vector mode
    without a vector."""
    return query.k <= 0 or not spaces or (query.mode == "vector" and vector is None)


def _index(space: Space, retired: bool) -> ExactIndex | None:
    index = space.retired if retired else space.vectors
    return index if isinstance(index, ExactIndex) else None


def batchable(search: Prepared) -> bool:
    """Whether ``search`` is scored in a batch (module docstring), else one by one."""
    query = search.query
    if query.stream is not None or query.window is not None:
        return False
    if query.min_score is not None and query.min_score <= 0.0:
        return False
    return all(
        len(space.rec) <= DENSE_MAX and not isinstance(space.retired if search.retired else space.vectors, HnswIndex)
        for space in search.spaces
    )


def normalise_many(searches: list[Prepared]) -> list[Prepared]:
    """The searches with their query vectors L2-normalised, all of one dim in one call."""
    by_dim: dict[int, list[int]] = {}
    for i, search in enumerate(searches):
        if search.vector is not None:
            by_dim.setdefault(search.vector.shape[0], []).append(i)
    out = list(searches)
    for dim, members in by_dim.items():
        unit = normalise(np.stack([searches[i].vector for i in members]), dim)  # type: ignore[misc]
        for row, i in enumerate(members):
            out[i] = searches[i]._replace(vector=unit[row])
    return out


def score_many(searches: list[Prepared], config: IndexConfig) -> list[tuple[list[ShardHit], Bm25Stats]]:
    """The hits and BM25 statistics of each search (batchable, vectors normalised), in blocks of at
    most :data:`BLOCK_ITEMS` entries; one that :func:`finds_nothing` gets none (and no statistics)."""
    out: list[tuple[list[ShardHit], Bm25Stats]] = [([], Bm25Stats(0, 0, {})) for _ in searches]
    todo = [i for i, s in enumerate(searches) if not finds_nothing(s.query, s.spaces, s.vector)]
    if len(todo) < MIN_BATCH:
        for i in todo:
            one = searches[i]
            out[i] = search_spaces(one.spaces, one.query, one.vector, one.retired, config)
        return out
    blocks: list[list[int]] = [[]]
    size = 0
    for i in todo:
        search = searches[i]
        need = sum(len(space.rec) for space in search.spaces)
        if blocks[-1] and size + need > BLOCK_ITEMS:
            blocks.append([])
            size = 0
        blocks[-1].append(i)
        size += need
    for block in blocks:
        if block:
            for i, result in zip(block, _Block([searches[i] for i in block], config).results()):
                out[i] = result
    return out


class _Block:
    """One block of searches as segment arrays (module docstring): pair ``p`` is one (search,
    space) and holds entries ``[offsets[p], offsets[p] + len(space.rec))``, by label."""

    def __init__(self, searches: list[Prepared], config: IndexConfig) -> None:
        self.searches = searches
        self.config = config
        self.spaces: list[Space] = []
        self.owner: list[int] = []  # the search of each pair
        self.offsets: list[int] = []
        self.terms = [query_terms(s.query) for s in searches]
        self.stats = [query_stats(s.spaces, terms) for s, terms in zip(searches, self.terms)]
        total = 0
        for i, search in enumerate(searches):
            for space in search.spaces:
                self.spaces.append(space)
                self.owner.append(i)
                self.offsets.append(total)
                total += len(space.rec)
        self.total = total
        self.sizes = np.array([len(space.rec) for space in self.spaces], dtype=np.int64)
        self.pair_of = np.repeat(np.arange(len(self.spaces)), self.sizes)
        self.owner_of = np.repeat(np.array(self.owner, dtype=np.int64), self.sizes)

    def per_entry(self, values: list[float], dtype: type = np.float64) -> np.ndarray:
        """One value per search, spread over every entry of its pairs."""
        return np.array(values, dtype=dtype)[self.owner_of]

    def vector_part(self) -> np.ndarray:
        """V of every entry (0 where the item has no vector or the search none): each space's
        matrix times the vector of each search that reads it."""
        readers: dict[int, tuple[ExactIndex, list[int]]] = {}
        for p, space in enumerate(self.spaces):
            search = self.searches[self.owner[p]]
            index = _index(space, search.retired)
            if search.vector is not None and index is not None and len(index):
                readers.setdefault(id(index), (index, []))[1].append(p)
        vec = np.zeros(self.total)
        if not readers:
            return vec
        labels: list[np.ndarray] = []
        sims: list[np.ndarray] = []
        pairs: list[int] = []
        for index, members in readers.values():
            queries = [self.searches[self.owner[p]].vector for p in members]
            found, scanned = index.scan_many(np.stack(queries))  # type: ignore[arg-type]
            for column, p in enumerate(members):
                labels.append(found)
                sims.append(scanned[column])
                pairs.append(p)
        counts = [len(found) for found in labels]
        owners = np.repeat(np.array([self.owner[p] for p in pairs], dtype=np.int64), counts)
        threshold = np.array([s.query.threshold for s in self.searches], dtype=np.float32)
        scale = np.array([1.0 - s.query.threshold for s in self.searches], dtype=np.float32)
        # float32 as vector_scores computes it with a Python threshold, so the scores are the same
        cos = np.concatenate(sims)
        vec[np.concatenate(labels) + np.repeat(np.array(self.offsets)[pairs], counts)] = np.clip(
            (cos - threshold[owners]) / scale[owners], 0.0, 1.0
        )
        return vec

    def lexical_part(self) -> np.ndarray:
        """BM25 of every entry under its search's statistics, in one ``bincount``."""
        labels: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        idf: list[float] = []
        shift: list[int] = []
        for p, space in enumerate(self.spaces):
            terms = self.terms[self.owner[p]]
            if not terms:
                continue
            for labs, base, term_idf in space.lexical.postings(terms, self.stats[self.owner[p]]):
                labels.append(labs)
                weights.append(base)
                idf.append(term_idf)
                shift.append(self.offsets[p])
        if not labels:
            return np.zeros(self.total)
        counts = [len(labs) for labs in labels]
        where = np.concatenate(labels) + np.repeat(np.array(shift, dtype=np.int64), counts)
        return np.bincount(where, np.repeat(np.array(idf), counts) * np.concatenate(weights), minlength=self.total)

    def fused(self) -> tuple[np.ndarray, np.ndarray]:
        """Every entry's candidacy and score (fusion and neighbour support, as ``_score_dense``)."""
        queries = [s.query for s in self.searches]
        lexical, vec = self.lexical_part(), self.vector_part()
        ideal = self.per_entry([ideal_bm25(terms, stats) for terms, stats in zip(self.terms, self.stats)])
        positive = (lexical > 0.0) & (ideal > 0.0)
        lex = np.where(positive, np.minimum(1.0, lexical / np.where(ideal > 0.0, ideal, 1.0)), 0.0)
        weight = [0.0 if q.mode == "lexical" else 1.0 if q.mode == "vector" else q.vector_weight for q in queries]
        scores = self.per_entry([1.0 - w for w in weight]) * lex + self.per_entry(weight) * vec  # as fuse_arrays
        by_lexical = self.per_entry([q.mode != "vector" for q in queries], bool)
        by_vector = self.per_entry([q.mode != "lexical" for q in queries], bool)
        candidate = (by_lexical & (lexical > 0.0)) | (by_vector & (vec > 0.0))
        weight_n = self.config.neighbour_weight
        if weight_n <= 0.0 or all(space.by_recency is None for space in self.spaces):
            return candidate, scores
        before, after = self.neighbours()
        padded = np.append(np.where(candidate, scores, 0.0), 0.0)  # the entry past the end reads 0
        support = np.maximum(padded[before], padded[after])
        boost = candidate & (scores > 0.0) & (support > 0.0)
        return candidate, np.where(boost, scores + weight_n * support * (1.0 - scores), scores)

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """The entry of each entry's previous and next message (``self.total``: none)."""
        out = []
        for side in (0, 1):
            parts = []
            for space in self.spaces:
                if space.by_recency is None:
                    parts.append(np.full(len(space.rec), -1, dtype=np.int64))
                else:
                    parts.append(space.adjacent()[side])
            labels = np.concatenate(parts)
            shift = np.repeat(np.array(self.offsets, dtype=np.int64), self.sizes)
            out.append(np.where(labels >= 0, labels + shift, self.total))
        return out[0], out[1]

    def results(self) -> list[tuple[list[ShardHit], Bm25Stats]]:
        """Each search's best ``k`` over the floor, as hits, and its statistics."""
        queries = [s.query for s in self.searches]
        candidate, scores = self.fused()
        strict = self.per_entry([q.min_score is None for q in queries], bool)
        floor = self.per_entry([0.0 if q.min_score is None else q.min_score for q in queries])
        kept = np.flatnonzero(candidate & np.where(strict, scores > 0.0, scores >= floor))
        recency = np.concatenate([space.rec for space in self.spaces])[kept] if len(kept) else np.zeros(0)
        owner = self.owner_of[kept]
        score = scores[kept]
        order = np.lexsort((-recency, -score, owner))
        kept, owner, score, recency = kept[order], owner[order], score[order], recency[order]
        chosen = self._top(owner, score, recency, np.array([q.k for q in queries], dtype=np.int64))
        kept, owner, score, recency = kept[chosen], owner[chosen], score[chosen], recency[chosen]
        pairs = self.pair_of[kept]
        labels = kept - np.array(self.offsets, dtype=np.int64)[pairs]
        same = (owner[1:] == owner[:-1]) & (score[1:] == score[:-1]) & (recency[1:] == recency[:-1])
        tied = set(owner[1:][same].tolist())  # searches whose order needs the doc ids
        hits: list[list[tuple[float, float, str, Space]]] = [[] for _ in queries]
        for p, label, s, r in zip(pairs.tolist(), labels.tolist(), score.tolist(), recency.tolist()):
            space = self.spaces[p]
            hits[self.owner[p]].append((s, r, space.docs[label], space))
        out = []
        for i, (found, query) in enumerate(zip(hits, queries)):
            if i in tied:
                found = sorted(found, key=lambda t: (-t[0], -t[1], t[2], tuple(t[3].namespace)))[: query.k]
            hits_i = [ShardHit(space.namespace, doc, s, r, space.payload.get(doc, "")) for s, r, doc, space in found]
            out.append((hits_i, self.stats[i]))
        return out

    @staticmethod
    def _top(owner: np.ndarray, score: np.ndarray, recency: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Of entries sorted by (search, score desc, recency desc): each search's first ``k`` and
        every entry tied with its ``k``-th (the final order breaks those ties by doc id)."""
        if not len(owner):
            return np.zeros(0, dtype=np.int64)
        counts = np.bincount(owner, minlength=len(k))
        starts = np.cumsum(counts) - counts
        rank = np.arange(len(owner)) - starts[owner]
        last = starts + np.clip(np.minimum(k, counts) - 1, 0, None)
        last = np.minimum(last, len(owner) - 1)
        over = (counts > k)[owner]
        tied = over & (score == score[last][owner]) & (recency == recency[last][owner])
        return np.flatnonzero((rank < k[owner]) | tied)
