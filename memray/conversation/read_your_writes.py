"""Read-your-writes: the messages a conversation acknowledged that the index may not hold yet.

An ``add`` is acknowledged once its messages are in the host's buffer; they reach the vector
shard later (debounce, group commit, embedding). So that a ``search`` or ``context`` right after
an ``add`` still finds them, each conversation keeps its **tail**: the messages acknowledged and
not yet confirmed indexed (:class:`TailKeeper`, in the host). A search asks the host for the tail
while the shard searches (concurrently: no extra latency), and scores the tail itself through the
same scoring kernel as the shard, with the BM25 statistics the shard returns
(:func:`score_tails`), lexically, and by vector too when the embedder is
:attr:`~memray.embedding.base.Embedder.recomputable` (the hash embedder: microseconds).

The race this closes: a message confirmed indexed *after* the shard answered but *before* the
host did would be in neither answer. Every host upsert carries an increasing **stamp**; the shard
reports the newest stamp applied to the conversation's namespace, the host the newest it saw
confirmed. If the shard's is older, the shard is asked again (it has applied the upsert by then).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from memray.ids import Namespace
from memray.index.base import ShardHit
from memray.index.columns import columns_of
from memray.index.exact import ExactIndex
from memray.index.lexical import Bm25Stats, LexicalIndex
from memray.index.scorer import Search, hit_order, score
from memray.index.search import Query
from memray.models import Message
from memray.models.wire import MessageList, decode_messages, encode_messages

if TYPE_CHECKING:
    from memray.conversation.state import Conversation
    from memray.embedding.pipeline import PendingItem

__all__ = ["Tail", "TailKeeper", "RecentAnswers", "TailSource", "TailSearch", "score_tails"]


class Tail(NamedTuple):
    messages: list[Message]  # acknowledged, not confirmed indexed, in seq order
    stamp: int  # the newest indexing stamp confirmed for the conversation (0: none yet)


class RecentAnswers(list[tuple[list[Message], Tail]]):
    """A host's answer to ``recent_many``: each conversation's recent messages and tail. It
    pickles as one block of columns (:mod:`memray.models.wire`) holding each message once: a
    tail's messages are mostly among the recent ones, and one block for thousands of
    conversations costs less than two lists of columns for each."""

    def __reduce__(self) -> tuple[Any, ...]:
        flat: list[Message] = []
        at: dict[int, int] = {}

        def refs(msgs: list[Message]) -> list[int]:
            out = []
            for m in msgs:
                i = at.get(id(m))
                if i is None:
                    i = at[id(m)] = len(flat)
                    flat.append(m)
                out.append(i)
            return out

        recent = [refs(msgs) for msgs, _ in self]
        tails = [refs(tail.messages) for _, tail in self]
        columns = encode_messages(flat)
        if columns is None:  # not plain JSON: the objects themselves
            return (RecentAnswers, (list(self),))
        return (_recent_answers, (columns, recent, tails, [tail.stamp for _, tail in self]))


def _recent_answers(
    columns: tuple[list[Any], ...], recent: list[list[int]], tails: list[list[int]], stamps: list[int]
) -> RecentAnswers:
    flat = decode_messages(columns)
    return RecentAnswers(
        ([flat[i] for i in r], Tail([flat[i] for i in t], stamp)) for r, t, stamp in zip(recent, tails, stamps)
    )


class TailKeeper:
    """The host's side: which messages of each conversation the index may lack. A conversation
    adds each message it acknowledges (with text: others are never indexed) to
    ``Conversation.unindexed`` as the buffer holds it after a merge (:meth:`Conversation.add`)."""

    @staticmethod
    def indexed(conv: Conversation, items: Iterable[PendingItem], stamp: int) -> None:
        """The shard confirmed ``items`` (upserted with ``stamp``): those whose text is the
        latest acknowledged leave the tail (a newer version stays until it is indexed too)."""
        conv.indexed_stamp = max(conv.indexed_stamp, stamp)
        tail = conv.unindexed
        if not tail:
            return
        for item in items:
            msg = tail.get(item.doc_id)
            if msg is not None and msg.text == item.text:
                del tail[item.doc_id]
        if not tail:
            conv.unindexed = None

    @staticmethod
    def tail(conv: Conversation) -> Tail:
        msgs = sorted(conv.unindexed.values(), key=lambda m: m.seq or 0) if conv.unindexed else []
        return Tail(MessageList(msgs), conv.indexed_stamp)  # pickles as columns (memray.models.wire)


class TailSource:
    """One conversation's tail as the scoring kernel reads it (a
    :class:`~memray.index.scorer.Source`): its messages, labelled by their place in the list."""

    linked = True  # conversation messages: neighbour support by seq

    def __init__(self, namespace: Namespace, messages: Sequence[Message], vectors: np.ndarray | None) -> None:
        self.namespace = namespace
        self.messages = messages
        self.rec = np.array([float(m.seq or 0) for m in messages])
        self.lexical = LexicalIndex(int)
        for n, m in enumerate(messages):
            self.lexical.add(str(n), m.text)
        self._vectors = None if vectors is None or not len(vectors) else ExactIndex.of(vectors)
        self._adjacent: tuple[np.ndarray, np.ndarray] | None = None

    def adjacent(self) -> tuple[np.ndarray, np.ndarray]:
        if self._adjacent is None:
            before = np.full(len(self.rec), -1, dtype=np.int64)
            after = before.copy()
            order = np.argsort(self.rec, kind="stable")
            step = np.flatnonzero(np.diff(self.rec[order]) == 1.0)
            after[order[step]] = order[step + 1]
            before[order[step + 1]] = order[step]
            self._adjacent = (before, after)
        return self._adjacent

    def vectors_of(self, retired: bool) -> ExactIndex | None:
        return self._vectors

    def columns_of(self, labels: np.ndarray) -> np.ndarray:
        msgs = self.messages
        rows = [columns_of(msgs[n].created_at, msgs[n].sim_time, msgs[n].importance) for n in labels.tolist()]
        return np.array(rows, dtype=np.float64).reshape(-1, 3)

    def hit(self, label: int, score: float, recency: float) -> ShardHit:
        return ShardHit(self.namespace, self.messages[label].id, score, recency, "")


class TailSearch(NamedTuple):
    """The read-your-writes part of one search: what the shard answered, and the messages it may
    lack, to score as it would have."""

    query: Query  # as sent to the shard
    stats: Bm25Stats  # the shard's (ShardReply.stats): of the namespaces searched, for the query's terms
    hits: Sequence[ShardHit]  # the shard's best ``query.k``
    tails: Sequence[tuple[Namespace, Sequence[Message]]]  # per conversation, its tail's messages
    vectors: np.ndarray | None = None  # L2-normalised vectors of every tail message (in order) of the
    #                                    query's model; None: the tails are scored lexically only


def score_tails(searches: Sequence[TailSearch], neighbour_weight: float) -> list[list[ShardHit]]:
    """Each search's hits with its tails' messages scored in, best ``query.k`` first, by
    :func:`memray.index.scorer.score` (all the searches' tails in one batch). A tail message is
    scored as the shard scores what it holds, with BM25 statistics of the namespaces searched
    plus the tails' messages; its neighbours (seq -+ 1) are the other tail messages and the
    shard's hits (without stream scoring, whose hit scores are not relevances). A message in a
    tail is newer than (or absent from) the shard's copy: the tail's version replaces it."""
    batch: list[Search] = []
    kept: list[list[ShardHit]] = []
    for one in searches:
        replaced = {(ns, m.id) for ns, msgs in one.tails for m in msgs}
        hits = [h for h in one.hits if (Namespace(*h.namespace), h.doc_id) not in replaced]
        kept.append(hits)
        sources: list[TailSource] = []
        start = 0
        for ns, msgs in one.tails:
            vectors = None if one.vectors is None else one.vectors[start : start + len(msgs)]
            sources.append(TailSource(ns, msgs, vectors))
            start += len(msgs)
        outside = _outside(sources, hits) if neighbour_weight > 0.0 and one.query.stream is None else ()
        batch.append(Search(one.query, sources, base=one.stats, outside=outside))
    out = []
    for hits, scored, one in zip(kept, score(batch, neighbour_weight), searches):
        merged = hits + scored.hits
        merged.sort(key=hit_order)
        out.append(merged[: max(0, one.query.k)])
    return out


def _outside(sources: list[TailSource], hits: list[ShardHit]) -> list[np.ndarray | None]:
    """Per tail, by label: the best score of the message's neighbours among the shard's hits."""
    known: dict[Namespace, dict[float, float]] = {}
    for h in hits:
        known.setdefault(Namespace(*h.namespace), {})[h.recency] = h.score
    out: list[np.ndarray | None] = []
    for source in sources:
        scores = known.get(source.namespace)
        if not scores:
            out.append(None)
            continue
        out.append(
            np.array([max(scores.get(seq - 1.0, 0.0), scores.get(seq + 1.0, 0.0)) for seq in source.rec.tolist()])
        )
    return out
