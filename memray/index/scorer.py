"""The scoring kernel: how every search turns BM25 and cosine into scores, hits and their order.

What a score means is stated for users in ``docs/scoring.md``; in short, for each item in scope:

- **lexical** ``L = min(1, bm25 / ideal)`` (0 when it shares no index term with the query), BM25
  under the statistics of everything the search reads (:mod:`memray.index.lexical`), ``ideal``
  the sum of the query terms' idf;
- **vector** ``V = (cos - t) / (1 - t)`` clipped to [0, 1], ``t`` the embedder's relevance
  threshold (:mod:`memray.embedding.calibration`); 0 whenever ``t >= 1`` or the cosine is not a
  finite number: no vector part is ever NaN or infinite, so it can never remove a lexical hit;
- the mode's **fusion**: ``L``, ``V`` or ``(1 - v) * L + v * V``;
- **neighbour support** for conversation messages: ``s + n * s_nb * (1 - s)`` when ``s > 0`` and
  the best fused score ``s_nb`` of the messages at seq - 1 and seq + 1 is above 0;
- the **floor**: a hit has ``R > 0`` (``min_score=None``) or ``R >= min_score``, and lies in
  the time window; **stream scoring** then ranks it by
  ``(w_rec * recency + w_imp * importance + w_rel * R) / (w_rec + w_imp + w_rel)``;
- the **order**: score descending, recency descending, doc id ascending, namespace ascending;
  the first ``k``.

One function runs that rule for every search path: :func:`score` takes a batch of
:class:`Search` records (a single search is a batch of one) over :class:`Source` objects — a
shard's namespaces (:class:`~memray.index.space.Space`), an app's flat view
(:class:`~memray.index.flat.FlatView`), a conversation's not-yet-indexed tail
(:mod:`memray.conversation.read_your_writes`). A batch is scored over arrays that hold every (search,
source) pair end to end, each pair a *segment*: BM25 of every pair in one ``bincount``, each
exact index multiplied by the vectors of the searches that read it (one matrix-vector product
per pair: :meth:`ExactIndex.scan_many` says why not one matrix-matrix product), then fusion,
support, floor, window, stream and top ``k`` as a fixed number of numpy calls for the whole
batch; :class:`ShardHit` tuples are built for the hits returned, nothing else. With a batch of
one, the per-search values stay Python floats that numpy broadcasts.

A segment holds every label of its source (*dense*), or only its *candidates*: for an HNSW
index, the items sharing a query term, the ``depth`` nearest by vector (every item of the
window, compared exactly, when the search has one) and the neighbours of those (compared
exactly); for a large source (:data:`SPARSE_ABOVE`) searched without a vector part, the items
sharing a term and their neighbours; and, with no floor, the ``k`` newest items (stream scoring
with no floor: every item). An HNSW source's vector part is therefore approximate beyond that
depth, and only there.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from memray.index.base import ShardHit
from memray.index.exact import ExactIndex
from memray.index.hnsw import HnswIndex
from memray.index.lexical import NO_POSTINGS, Bm25Stats, LexicalIndex, Postings, bm25_idf, weigh
from memray.index.search import Query
from memray.ranking import Stream
from memray.sim_time import SECONDS_PER_HOUR, Window
from memray.text import term_counts

__all__ = [
    "Source",
    "Search",
    "Scored",
    "score",
    "query_terms",
    "hit_order",
    "top_hits",
    "in_window",
    "stream_scores",
    "vector_scores",
    "HYBRID_DEPTH",
    "STREAM_DEPTH",
    "BLOCK_ITEMS",
    "SPARSE_ABOVE",
    "NO_STATS",
]

#: How many nearest neighbours an HNSW source contributes as candidates (at least ``k``).
HYBRID_DEPTH = 50
#: The same under stream scoring, where recency and importance may lift a less similar item.
STREAM_DEPTH = 200
#: The most segment entries scored in one block: a batch's memory stays bounded, and each of a
#: block's arrays stays in the CPU's caches. At 1 << 20, 16 app-wide searches of 50,000 items a
#: shard went in one block of 800,000 entries: 289 ms p50 at 16 clients in ray mode against
#: 171 ms at 1 << 16 (``benchmarks/recall_latency.py --n 100000 --shards 2 --clients 16``), and
#: a call of 5,000 conversation searches took 404-412 ms against 342-347
#: (``benchmarks/search_micro.py --n 50000 --namespaces 1000 --queries 5000 --batch 5000``;
#: 1 << 13 to 1 << 15 within the noise of 1 << 16). Blocks change no result.
BLOCK_ITEMS = 1 << 16
#: A source with more labels than this is scored over its candidates (not every label) when the
#: search has no vector part there: its lexical hits are few next to its size.
SPARSE_ABOVE = 4096
#: The statistics of a search that reads nothing.
NO_STATS = Bm25Stats(0, 0, {})


class Source(Protocol):
    """Items numbered by label that a search reads."""

    #: recency by label (a message's seq, an entry's timestamp); NaN where there is no item
    rec: np.ndarray
    #: BM25 over the items, keyed by label
    lexical: LexicalIndex

    @property
    def linked(self) -> bool:
        """Whether the items are conversation messages (neighbour support by seq applies)."""
        ...

    def adjacent(self) -> tuple[np.ndarray, np.ndarray]:
        """By label: the label of the message at seq - 1 and at seq + 1 (-1: none)."""
        ...

    def vectors_of(self, retired: bool) -> ExactIndex | HnswIndex | None:
        """The vector index searched (``retired``: the one of the model replaced last)."""
        ...

    def columns_of(self, labels: np.ndarray) -> np.ndarray:
        """``float64[len(labels), 3]``: created_at, sim_time, importance (NaN: none)."""
        ...

    def text_ids(self, labels: np.ndarray) -> np.ndarray:
        """``int64[len(labels)]``: each item's text identity (:func:`memray.text.text_id`; 0:
        unknown, never merged), read by a search that asks for distinct texts."""
        ...

    def hit(self, label: int, score: float, recency: float) -> ShardHit:
        """The hit of ``label`` scoring ``score`` (``recency`` is ``rec[label]``)."""
        ...


class Search(NamedTuple):
    """One search as the kernel scores it."""

    query: Query  # its ``vector`` any scale (normalised here); None, or lexical mode: no vector part
    sources: Sequence[Source]  # what it reads, each once
    retired: bool = False  # read the sources' retired vector indexes
    base: Bm25Stats | None = None  # documents outside ``sources`` its BM25 statistics count (a tail: the shard's)
    outside: Sequence[np.ndarray | None] = ()  # per source, by label: the best score among the item's
    #                                             neighbours that are not in ``sources`` (a tail: indexed hits)


class Scored(NamedTuple):
    hits: list[ShardHit]  # the best ``k``, in the order of :func:`hit_order`
    stats: Bm25Stats  # the BM25 statistics used, for the query's terms


def query_terms(query: Query) -> list[str]:
    """The distinct index terms of ``query`` (none in vector mode)."""
    return list(term_counts(query.text)) if query.mode != "vector" else []


def hit_order(hit: ShardHit) -> tuple[float, float, str, tuple[str, ...]]:
    """Sort key: score desc, recency desc, doc_id asc, namespace asc. Scores are compared to 12
    decimals: hits scored apart (a shard's and a tail's, two shards') reach a score that is equal
    in exact arithmetic by sums in another order, a last bit apart, and that must stay a tie."""
    return (-round(hit.score, 12), -hit.recency, hit.doc_id, tuple(hit.namespace))


def top_hits(hits: Sequence[ShardHit], k: int, min_score: float | None = None) -> list[ShardHit]:
    """The ``k`` best of hits scored apart (several shards; a shard's and a tail's), in the one
    order: those above 0, or with ``min_score`` those at or above it."""
    if min_score is None:
        kept = [h for h in hits if h.score > 0.0]
    else:
        kept = [h for h in hits if h.score >= min_score]
    kept.sort(key=hit_order)
    return kept[: max(0, k)]


def in_window(columns: np.ndarray, window: Window | None) -> np.ndarray:
    """Which rows of ``columns`` (``float64[n, 3]``: created_at, sim_time, importance) lie in
    ``window``: ``after <= sim_time < before``, ``created_after <= created_at < created_before``;
    NaN compares false, so a missing time is outside."""
    keep = np.ones(len(columns), dtype=bool)
    if window is None:
        return keep
    after, before, created_after, created_before = window
    for col, lo, hi in ((1, after, before), (0, created_after, created_before)):
        values = columns[:, col]
        if lo is not None:
            keep &= values >= lo
        if hi is not None:
            keep &= values < hi
    return keep


def stream_scores(relevance: np.ndarray, columns: np.ndarray, stream: Stream) -> np.ndarray:
    """The memory-stream score of each item: ``recency = decay_per_hour ** max(0, hours since
    sim_time)`` (0 without one), ``importance`` (0 without one), weighted with ``relevance``."""
    now, decay, w_rec, w_imp, w_rel = stream
    sim = columns[:, 1]
    hours = np.maximum(0.0, (now - np.nan_to_num(sim, nan=now)) / SECONDS_PER_HOUR)
    recency = np.where(np.isnan(sim), 0.0, np.power(decay, hours))
    importance = np.nan_to_num(columns[:, 2], nan=0.0)
    scores: np.ndarray = (w_rec * recency + w_imp * importance + w_rel * relevance) / (w_rec + w_imp + w_rel)
    return scores


def vector_scores(sims: np.ndarray, threshold: float) -> np.ndarray:
    """``V`` of each cosine: 0 where it is not finite, and everywhere when ``threshold`` is not
    below 1 (no cosine can pass it)."""
    if not threshold < 1.0:  # (NaN too)
        return np.zeros(len(sims))
    return np.fmin(np.fmax((sims - threshold) / (1.0 - threshold), 0.0), 1.0)  # fmax: NaN -> 0


# -- one search, prepared -------------------------------------------------------------------


class _Plan(NamedTuple):
    at: int  # its place in the batch
    search: Search
    k: int
    terms: list[str]
    stats: Bm25Stats
    idf: list[float]  # of each term, under ``stats``
    ideal: float  # inf when it has no terms (L is then 0)
    vector: np.ndarray | None  # unit, finite (None: no vector part)
    threshold: float  # the query's (V is 0 when it is not below 1)
    lexical_weight: float
    vector_weight: float
    floor: float | None  # None: above 0
    depth: int  # HNSW candidates


def _weights(query: Query) -> tuple[float, float]:
    """(weight of L, weight of V) of the query's mode, the vector weight kept in [0, 1]."""
    if query.mode == "lexical":
        return 1.0, 0.0
    if query.mode == "vector":
        return 0.0, 1.0
    w = float(query.vector_weight)
    w = min(1.0, max(0.0, w)) if w == w else 0.0
    return 1.0 - w, w


def _unit_vectors(searches: Sequence[Search]) -> list[np.ndarray | None]:
    """Each search's query vector L2-normalised (as :func:`~memray.index.base.normalise` does);
    None where it has none, is in lexical mode, or is not a usable direction (zero, NaN or
    infinite). A batch's vectors of one dim are normalised in one call."""
    out: list[np.ndarray | None] = [None] * len(searches)
    by_dim: dict[int, list[tuple[int, np.ndarray]]] = {}
    for i, search in enumerate(searches):
        query = search.query
        if query.vector is not None and query.mode != "lexical":
            raw = np.asarray(query.vector, dtype=np.float32).reshape(-1)
            by_dim.setdefault(raw.shape[0], []).append((i, raw))
    for members in by_dim.values():
        if len(members) == 1:
            i, raw = members[0]
            norm = np.sqrt(np.add.reduce(raw * raw))  # as np.linalg.norm(axis=1): the same bits
            if math.isfinite(norm) and norm > 0.0:
                out[i] = raw / norm
            continue
        stacked = np.stack([raw for _, raw in members])
        norms = np.sqrt(np.add.reduce(stacked * stacked, axis=1))
        usable = np.isfinite(norms) & (norms > 0.0)
        unit = stacked / np.where(usable, norms, 1.0)[:, None]
        for row, (i, _) in enumerate(members):
            if usable[row]:
                out[i] = unit[row]
    return out


def _plan(at: int, search: Search, vector: np.ndarray | None) -> _Plan | None:
    """``search`` prepared, or None when it finds nothing whatever is held: ``k <= 0``, nothing
    to read, or vector mode without a usable query vector."""
    query = search.query
    if query.k <= 0 or not search.sources or (query.mode == "vector" and vector is None):
        return None
    terms = query_terms(query)
    sources = search.sources
    if len(sources) == 1 and search.base is None:
        stats = sources[0].lexical.stats(terms)
    else:
        own = (source.lexical.stats(terms) for source in sources)
        stats = Bm25Stats.merge(own if search.base is None else (search.base, *own))
    idf = [bm25_idf(stats.docs, stats.df.get(term, 0)) for term in terms]  # the ideal: their sum
    ideal = sum(idf)
    depth = max(query.k, HYBRID_DEPTH if query.stream is None else STREAM_DEPTH)
    lexical_weight, vector_weight = _weights(query)
    return _Plan(
        at,
        search,
        query.k,
        terms,
        stats,
        idf,
        ideal if ideal > 0.0 else math.inf,
        vector,
        float(query.threshold),
        lexical_weight,
        vector_weight,
        query.min_score,
        depth,
    )


def score(searches: Sequence[Search], neighbour_weight: float) -> list[Scored]:
    """Each search's best ``query.k`` hits and the BM25 statistics it used (module docstring);
    ``neighbour_weight`` is ``IndexConfig.neighbour_weight``. A search that finds nothing
    whatever is held (``k <= 0``, no source, vector mode without a usable vector) gets no hits
    and :data:`NO_STATS`."""
    out = [Scored([], NO_STATS) for _ in searches]
    plans = []
    for i, (search, vector) in enumerate(zip(searches, _unit_vectors(searches))):
        plan = _plan(i, search, vector)
        if plan is not None:
            plans.append(plan)
    for block in _blocks(plans) if len(plans) > 1 else (plans,) if plans else ():
        for plan, scored in zip(block, _Block(block, neighbour_weight).results()):
            out[plan.at] = scored
    return out


def _blocks(plans: list[_Plan]) -> Iterator[list[_Plan]]:
    """``plans`` in blocks of at most :data:`BLOCK_ITEMS` labels (a bigger search alone)."""
    block: list[_Plan] = []
    size = 0
    for plan in plans:
        need = sum(len(source.rec) for source in plan.search.sources)
        if block and size + need > BLOCK_ITEMS:
            yield block
            block, size = [], 0
        block.append(plan)
        size += need
    if block:
        yield block


# -- a block of searches --------------------------------------------------------------------


class _Pair(NamedTuple):
    """One (search, source) segment: entries ``[offset, offset + size)``."""

    plan: _Plan
    owner: int  # the search, in the block
    source: Source
    vectors: ExactIndex | HnswIndex | None  # the vector index read (None: no vector part)
    labels: np.ndarray | None  # the label of each entry (None: dense, entry i is label i)
    probe: np.ndarray | None  # sparse: the labels whose vectors are compared (exactly)
    postings: Postings  # of the query's terms in the source
    outside: np.ndarray | None  # by label: the best score of the neighbours outside the search
    offset: int
    size: int

    def places(self, labels: np.ndarray) -> np.ndarray:
        """The places in the segment of ``labels`` (all in it)."""
        return labels if self.labels is None else np.searchsorted(self.labels, labels)

    def entry_labels(self) -> np.ndarray:
        return np.arange(self.size) if self.labels is None else self.labels


def _newest(source: Source, k: int, window: Window | None) -> np.ndarray:
    """The ``k`` newest live labels of ``source`` (inside ``window``), with every one as new as
    the ``k``-th (the order breaks those ties by doc id)."""
    live = np.flatnonzero(~np.isnan(source.rec))
    if window is not None and len(live):
        live = live[in_window(source.columns_of(live), window)]
    if len(live) <= k:
        return live
    rec = source.rec[live]
    kth = np.partition(rec, len(rec) - k)[len(rec) - k]
    newest: np.ndarray = live[rec >= kth]
    return newest


def _candidates(
    plan: _Plan,
    source: Source,
    index: HnswIndex | None,
    postings: Postings,
    linked: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The entries (labels) of a sparse segment — an HNSW source's, or a large source's with no
    vector part — and those of them whose vectors are compared (module docstring)."""
    query, vector = plan.search.query, plan.vector
    found = [labs for labs, _, _ in postings.arrays]
    if postings.raw is not None:
        found.append(postings.raw.labels())
    if index is not None and vector is not None:
        if query.window is None:
            found.append(index.search(vector, plan.depth)[0][0])
        else:  # every item of the window, compared exactly
            live = np.flatnonzero(~np.isnan(source.rec))
            found.append(live[in_window(source.columns_of(live), query.window)])
    labels = np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
    if linked and len(labels):
        before, after = source.adjacent()
        near = np.concatenate([labels, before[labels], after[labels]])
        labels = np.unique(near[near >= 0])
    probe = labels if index is not None else None
    if plan.floor is not None and plan.floor <= 0.0:  # no floor: items scoring 0 are hits too
        if query.stream is not None:
            rest = np.flatnonzero(~np.isnan(source.rec))  # recency and importance rank them all
        else:
            rest = _newest(source, query.k, query.window)
        labels = np.union1d(labels, rest)
    return labels, probe


class _Block:
    """Searches scored together as segment arrays (module docstring). Every step is a fixed
    number of numpy calls for the whole block; per pair, only the vector products and the
    lookups of cached arrays. For a block of one search the per-search values stay scalars."""

    def __init__(self, plans: list[_Plan], neighbour_weight: float) -> None:
        self.plans = plans
        self.neighbour_weight = neighbour_weight
        self.pairs: list[_Pair] = []
        total = 0
        for owner, plan in enumerate(plans):
            search = plan.search
            outside = search.outside
            for n, source in enumerate(search.sources):
                postings = source.lexical.postings(plan.terms, plan.stats, plan.idf) if plan.terms else NO_POSTINGS
                index = source.vectors_of(search.retired) if plan.vector is not None and plan.threshold < 1.0 else None
                if index is not None and not len(index):
                    index = None  # (and no cosine can pass a threshold of 1 or more)
                labels = probe = None
                size = len(source.rec)
                if isinstance(index, HnswIndex) or (index is None and size > SPARSE_ABOVE):
                    linked = source.linked and neighbour_weight > 0.0
                    labels, probe = _candidates(plan, source, index, postings, linked)
                    size = len(labels)
                extra = outside[n] if n < len(outside) else None
                self.pairs.append(_Pair(plan, owner, source, index, labels, probe, postings, extra, total, size))
                total += size
        self.total = total
        self.one = len(plans) == 1
        if len(self.pairs) > 1:
            sizes = [pair.size for pair in self.pairs]
            self.shift = np.repeat(np.array([pair.offset for pair in self.pairs], dtype=np.int64), sizes)
            if not self.one:  # (and one more: the 0 past the last entry)
                owners = np.array([pair.owner for pair in self.pairs] + [0], dtype=np.int64)
                self.owner_of = np.repeat(owners, sizes + [1])

    def spread(self, values: list[float]) -> Any:
        """One value per search: a scalar for a block of one, else spread over the entries (and
        the 0 past the last)."""
        return values[0] if self.one else np.array(values)[self.owner_of]

    def placed(self, parts: list[tuple[int, np.ndarray]]) -> np.ndarray:
        """Segment places, each shifted by its pair's offset, end to end: ``(offset, places)``."""
        if len(self.pairs) == 1:  # one segment, at 0
            return parts[0][1] if len(parts) == 1 else np.concatenate([at for _, at in parts])
        counts = [len(at) for _, at in parts]
        shift = np.repeat(np.array([offset for offset, _ in parts], dtype=np.int64), counts)
        return np.concatenate([at for _, at in parts]) + shift

    # -- the parts ---------------------------------------------------------------------
    def lexical(self) -> np.ndarray | None:
        """``L`` of every entry and a 0 past the last: BM25 under its search's statistics (one
        ``bincount``) over the search's ideal (None: no entry shares a term). The small postings
        of the whole block are weighed in one expression (:func:`~memray.index.lexical.weigh`)."""
        at: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        raw = [(pair, part) for pair in self.pairs if (part := pair.postings.raw) is not None]
        if raw:
            labels, weight, sizes = weigh([part for _, part in raw])
            start = 0
            for (pair, _), size in zip(raw, sizes):  # a sparse segment's places are found, not its labels
                if pair.labels is not None:
                    labels[start : start + size] = pair.places(labels[start : start + size])
                start += size
            at.append(labels + np.repeat(np.array([pair.offset for pair, _ in raw], dtype=np.int64), sizes))
            weights.append(weight)
        where: list[tuple[int, np.ndarray]] = []
        base: list[np.ndarray] = []
        idf: list[float] = []
        for pair in self.pairs:
            for labs, term_weights, term_idf in pair.postings.arrays:
                where.append((pair.offset, pair.places(labs)))
                base.append(term_weights)
                idf.append(term_idf)
        if where:
            at.append(self.placed(where))
            weights.append(np.repeat(np.array(idf), [len(b) for b in base]) * np.concatenate(base))
        if not at:
            return None
        places, weight = (at[0], weights[0]) if len(at) == 1 else (np.concatenate(at), np.concatenate(weights))
        bm25: np.ndarray = np.bincount(places, weight, minlength=self.total + 1)
        np.divide(bm25, self.spread([plan.ideal for plan in self.plans]), out=bm25)  # (BM25 >= 0: 0 stays 0)
        np.minimum(bm25, 1.0, out=bm25)
        return bm25

    def vector(self) -> np.ndarray | None:
        """``V`` of every entry and a 0 past the last (None: no entry has one): each exact index
        times the vectors of the searches that read it, the HNSW candidates compared one by one,
        then one :func:`vector_scores` for all."""
        where: list[tuple[int, np.ndarray]] = []
        sims: list[np.ndarray] = []
        owners: list[_Plan] = []
        readers: dict[int, tuple[ExactIndex, list[_Pair]]] = {}
        for pair in self.pairs:
            index = pair.vectors
            if isinstance(index, ExactIndex):
                readers.setdefault(id(index), (index, []))[1].append(pair)
            elif isinstance(index, HnswIndex) and pair.probe is not None and pair.plan.vector is not None:
                probe = pair.probe[index.has(pair.probe)]
                if len(probe):
                    where.append((pair.offset, pair.places(probe)))
                    sims.append(index.get(probe) @ pair.plan.vector)
                    owners.append(pair.plan)
        for index, pairs in readers.values():
            if len(pairs) == 1:
                labels, scanned = index.scan_one(pairs[0].plan.vector)  # type: ignore[arg-type]
                rows = [scanned]
            else:
                labels, scanned = index.scan_many(np.stack([pair.plan.vector for pair in pairs]))  # type: ignore[misc]
                rows = list(scanned)
            for row, pair in zip(rows, pairs):
                where.append((pair.offset, labels))
                sims.append(row)
                owners.append(pair.plan)
        if not sims:
            return None
        vec = np.zeros(self.total + 1)
        if len(sims) == 1:
            vec[self.placed(where)] = vector_scores(sims[0], owners[0].threshold)
            return vec
        counts = [len(x) for x in sims]
        # float32, as vector_scores computes with a Python threshold: the same scores
        threshold = np.array([plan.threshold for plan in owners], dtype=np.float32)
        scale = np.array([1.0 - plan.threshold for plan in owners], dtype=np.float32)
        part = (np.concatenate(sims) - np.repeat(threshold, counts)) / np.repeat(scale, counts)
        vec[self.placed(where)] = np.fmin(np.fmax(part, 0.0), 1.0)  # fmax: NaN -> 0
        return vec

    def neighbours(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Each entry's previous and next message's entry, -1 where there is none (it reads the
        0 appended past the end of the scores), or None when no pair has neighbour support."""
        if self.neighbour_weight <= 0.0 or not any(pair.source.linked for pair in self.pairs):
            return None
        sides = []
        for side in (0, 1):
            parts = []
            for pair in self.pairs:
                if not pair.source.linked:
                    parts.append(np.full(pair.size, -1, dtype=np.int64))
                elif pair.labels is None:
                    parts.append(pair.source.adjacent()[side])
                else:
                    found = pair.source.adjacent()[side][pair.labels]
                    at = np.minimum(np.searchsorted(pair.labels, found), pair.size - 1)
                    parts.append(np.where((found >= 0) & (pair.labels[at] == found), at, -1))
            sides.append(parts)
        if len(self.pairs) == 1:
            return sides[0][0], sides[1][0]
        out = []
        for parts in sides:
            near = np.concatenate(parts)
            out.append(np.where(near >= 0, near + self.shift, -1))
        return out[0], out[1]

    # -- the rule ----------------------------------------------------------------------
    def relevance(self) -> np.ndarray:
        """``R`` of every entry: fused by mode, raised by neighbour support."""
        plans = self.plans
        lexical = self.lexical() if any(plan.terms for plan in plans) else None
        vec = self.vector() if any(plan.vector is not None for plan in plans) else None
        fused: np.ndarray
        if lexical is not None and vec is not None:
            fused = self.spread([p.lexical_weight for p in plans]) * lexical
            fused += self.spread([p.vector_weight for p in plans]) * vec
        elif lexical is not None:
            fused = (
                lexical
                if self.one and plans[0].lexical_weight == 1.0
                else self.spread([p.lexical_weight for p in plans]) * lexical
            )
        elif vec is not None:
            fused = (
                vec
                if self.one and plans[0].vector_weight == 1.0
                else self.spread([p.vector_weight for p in plans]) * vec
            )
        else:
            fused = np.zeros(self.total + 1)
        near = self.neighbours()
        outside = [pair for pair in self.pairs if pair.outside is not None]
        if near is None and not outside:
            return fused[:-1]
        if near is None:
            best = np.zeros(self.total)
        else:
            best = np.maximum(fused[near[0]], fused[near[1]])  # entry -1 reads the 0 at the end
        fused = fused[:-1]
        for pair in outside:
            span = slice(pair.offset, pair.offset + pair.size)
            best[span] = np.maximum(best[span], pair.outside[pair.entry_labels()])  # type: ignore[index]
        best *= fused > 0.0  # only an item relevant on its own gains
        best *= self.neighbour_weight
        best *= 1.0 - fused
        best += fused
        return best

    def final(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every entry's recency, final score (relevance, or the stream score) and whether it is
        a hit (an item, inside the window, over the floor)."""
        plans = self.plans
        relevance = self.relevance()
        pairs = self.pairs
        if len(pairs) == 1:
            pair = pairs[0]
            rec = pair.source.rec if pair.labels is None else pair.source.rec[pair.labels]
        else:
            rec = np.concatenate([p.source.rec if p.labels is None else p.source.rec[p.labels] for p in pairs])
        floors = [plan.floor for plan in plans]
        if all(f is None for f in floors):
            keep = relevance > 0.0  # (no item: 0)
        else:
            if self.one:
                keep = relevance >= floors[0]
            else:
                strict = self.spread([f is None for f in floors])[:-1]
                floor = self.spread([f or 0.0 for f in floors])[:-1]
                keep = np.where(strict, relevance > 0.0, relevance >= floor)
            keep &= rec == rec  # (NaN: no item)
        final = relevance
        for pair in pairs:
            query = pair.plan.search.query
            if query.window is None and query.stream is None:
                continue
            span = slice(pair.offset, pair.offset + pair.size)
            columns = pair.source.columns_of(pair.entry_labels())
            if query.window is not None:
                keep[span] &= in_window(columns, query.window)
            if query.stream is not None:
                if final is relevance:
                    final = relevance.copy()
                final[span] = stream_scores(relevance[span], columns, Stream(*query.stream))
        return rec, final, keep

    def results(self) -> list[Scored]:
        """Each search's best ``k`` hits over the floor, and its statistics."""
        plans = self.plans
        rec, final, keep = self.final()
        kept = keep.nonzero()[0]
        score, recency = final[kept], rec[kept]
        if any(plan.search.query.distinct for plan in plans):
            first = self.distinct(kept, score, recency)
            kept, score, recency = kept[first], score[first], recency[first]
        if self.one:
            k = plans[0].k
            if len(kept) > 4 * k + 64:  # many hits (no floor, a broad query): the best first
                narrow = _best(score, recency, k)
                kept, score, recency = kept[narrow], score[narrow], recency[narrow]
            order = np.lexsort((recency, score))[::-1]  # score desc, recency desc (equal: any order)
            places, scores, recencies = kept[order].tolist(), score[order].tolist(), recency[order].tolist()
            take = min(k, len(places))
            while take < len(places) and scores[take] == scores[take - 1] and recencies[take] == recencies[take - 1]:
                take += 1  # tied with the k-th: the final order breaks those ties by doc id
            places, scores, recencies = places[:take], scores[:take], recencies[:take]
            tied = {0} if len(set(zip(scores, recencies))) < take else set()
        else:
            k_of = np.array([plan.k for plan in plans], dtype=np.int64)
            owner = self.owner_of[kept]
            order = np.lexsort((-recency, -score, owner))
            kept, owner, score, recency = kept[order], owner[order], score[order], recency[order]
            chosen = _top(owner, score, recency, k_of)
            kept, owner, score, recency = kept[chosen], owner[chosen], score[chosen], recency[chosen]
            same = (owner[1:] == owner[:-1]) & (score[1:] == score[:-1]) & (recency[1:] == recency[:-1])
            tied = set(owner[1:][same].tolist())  # searches whose order needs the doc ids
            places, scores, recencies = kept.tolist(), score.tolist(), recency.tolist()
        pairs = self.pairs
        if len(pairs) == 1:  # one search of one source
            source, labels = pairs[0].source, pairs[0].labels
            if labels is not None:
                places = labels[places].tolist()
            hits = [[source.hit(label, s, r) for label, s, r in zip(places, scores, recencies)]]
        else:
            starts = np.array([pair.offset for pair in pairs], dtype=np.int64)
            hits = [[] for _ in plans]
            for p, entry, s, r in zip(
                (np.searchsorted(starts, places, side="right") - 1).tolist(), places, scores, recencies
            ):
                pair = pairs[p]
                at = entry - pair.offset
                hits[pair.owner].append(pair.source.hit(at if pair.labels is None else int(pair.labels[at]), s, r))
        out = []
        for i, (found, plan) in enumerate(zip(hits, plans)):
            if i in tied:
                found = sorted(found, key=hit_order)[: plan.k]
            out.append(Scored(found, plan.stats))
        return out

    def distinct(self, kept: np.ndarray, score: np.ndarray, recency: np.ndarray) -> np.ndarray:
        """Of the ``kept`` entries (ascending, with their final score and recency), a mask of
        those a search asking for distinct texts keeps: of each text, the first in hit order
        (score, recency, doc id, namespace); entries of the other searches, and of an unknown
        text (id 0), all."""
        tid = np.zeros(len(kept), dtype=np.int64)
        for pair in self.pairs:
            if pair.plan.search.query.distinct:
                lo, hi = np.searchsorted(kept, [pair.offset, pair.offset + pair.size])
                tid[lo:hi] = pair.source.text_ids(pair.entry_labels()[kept[lo:hi] - pair.offset])
        owner = np.zeros(len(kept), dtype=np.int64) if self.one else self.owner_of[kept]
        known = np.flatnonzero(tid)
        rounded = np.round(score, 12)  # as hit_order compares scores
        order = known[np.lexsort((-recency[known], -rounded[known], tid[known], owner[known]))]
        same = (tid[order[1:]] == tid[order[:-1]]) & (owner[order[1:]] == owner[order[:-1]])
        mask = np.ones(len(kept), dtype=bool)
        mask[order[1:][same]] = False
        # a text's best tied with other copies on score and recency: the doc id decides (hit order)
        tied = same & (rounded[order[1:]] == rounded[order[:-1]]) & (recency[order[1:]] == recency[order[:-1]])
        for i in np.flatnonzero(mask[order[:-1]] & tied).tolist():  # a keeper tied with the next copy
            j, members = i, [int(order[i])]
            while j < len(tied) and tied[j]:
                members.append(int(order[j + 1]))
                j += 1
            mask[members] = False
            mask[min(members, key=lambda e: hit_order(self.hit_of(int(kept[e]), 0.0, 0.0)))] = True
        return mask

    def hit_of(self, entry: int, score: float, recency: float) -> ShardHit:
        """The hit of one entry of the block."""
        pair = self.pairs[int(np.searchsorted([p.offset for p in self.pairs], entry, side="right")) - 1]
        at = int(entry) - pair.offset
        return pair.source.hit(at if pair.labels is None else int(pair.labels[at]), score, recency)


def _best(score: np.ndarray, recency: np.ndarray, k: int) -> np.ndarray:
    """Of more than ``k`` entries, those that may be among the best ``k`` by (score, recency):
    every entry above the ``k``-th score, and of those at it the newest that can make the ``k``,
    with every one tied with the last (the final order breaks those ties by doc id)."""
    kth = np.partition(score, len(score) - k)[len(score) - k]
    above = score > kth
    at = np.flatnonzero(score == kth)
    need = k - int(np.count_nonzero(above))
    if len(at) > need:
        rec = recency[at]
        at = at[rec >= np.partition(rec, len(rec) - need)[len(rec) - need]]
    return np.union1d(np.flatnonzero(above), at)


def _top(owner: np.ndarray, score: np.ndarray, recency: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Of entries sorted by (search, score desc, recency desc): each search's first ``k`` and
    every entry tied with its ``k``-th (the final order breaks those ties by doc id)."""
    if not len(owner):
        return np.zeros(0, dtype=np.int64)
    counts = np.bincount(owner, minlength=len(k))
    starts = np.cumsum(counts) - counts
    rank = np.arange(len(owner)) - starts[owner]
    last = np.minimum(starts + np.clip(np.minimum(k, counts) - 1, 0, None), len(owner) - 1)
    over = (counts > k)[owner]
    tied = over & (score == score[last][owner]) & (recency == recency[last][owner])
    return np.flatnonzero((rank < k[owner]) | tied)
