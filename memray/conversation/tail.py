"""Read-your-writes: the messages a conversation acknowledged that the index may not hold yet.

An ``add`` is acknowledged once its messages are in the host's buffer; they reach the vector
shard later (debounce, group commit, embedding). So that a ``search`` or ``context`` right after
an ``add`` still finds them, each conversation keeps its **tail**: the messages acknowledged and
not yet confirmed indexed (:class:`TailKeeper`, in the host). A search asks the host for the tail
while the shard searches (concurrently: no extra latency), and scores the tail itself with the
BM25 statistics the shard returns (:func:`score_tail`), lexically, and by vector too when the
embedder is :attr:`~memray.embedding.base.Embedder.recomputable` (the hash embedder: microseconds).

The race this closes: a message confirmed indexed *after* the shard answered but *before* the
host did would be in neither answer. Every host upsert carries an increasing **stamp**; the shard
reports the newest stamp applied to the conversation's namespace, the host the newest it saw
confirmed. If the shard's is older, the shard is asked again (it has applied the upsert by then).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from memray.index.fusion import hybrid_score, lexical_score, neighbour_support, vector_score
from memray.index.lexical import Bm25Stats, bm25, ideal_bm25
from memray.index.search import Query
from memray.models import Message
from memray.models.wire import MessageList, decode_messages, encode_messages
from memray.text import index_terms

if TYPE_CHECKING:
    from memray.conversation.core import Conversation
    from memray.embedding.pipeline import PendingItem

__all__ = ["Tail", "TailKeeper", "RecentAnswers", "score_tail", "support_neighbours"]


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


def score_tail(messages: list[Message], query: Query, stats: Bm25Stats, vectors: np.ndarray | None) -> list[float]:
    """The score of each of ``messages`` for ``query``, by the rules of
    :mod:`memray.index.fusion`, with BM25 statistics ``stats`` (the shard's, for the same
    namespaces) plus these messages. ``vectors``: their L2-normalised vectors of the query's
    model, or None to score them lexically only."""
    terms = list(dict.fromkeys(index_terms(query.text))) if query.mode != "vector" else []
    counts = [dict(Counter(index_terms(m.text))) for m in messages]
    merged = stats.with_docs(counts, terms) if terms else stats
    ideal = ideal_bm25(terms, merged)
    qvec = None
    if vectors is not None and query.vector is not None:
        qvec = np.asarray(query.vector, dtype=np.float32).reshape(-1)
        qvec = qvec / (np.linalg.norm(qvec) or 1.0)
    out = []
    for n, tf in enumerate(counts):
        lexical = lexical_score(bm25(tf, sum(tf.values()), terms, merged), ideal) if terms else 0.0
        vec = (
            vector_score(float(vectors[n] @ qvec), query.threshold) if qvec is not None and vectors is not None else 0.0
        )
        if query.mode == "lexical":
            out.append(lexical)
        elif query.mode == "vector":
            out.append(vec)
        else:
            out.append(hybrid_score(lexical, vec, query.vector_weight))
    return out


def support_neighbours(seqs: list[int], scores: list[float], known: dict[int, float], weight: float) -> list[float]:
    """``scores`` of tail messages (by ``seqs``, one conversation) with neighbour support
    (:func:`memray.index.fusion.neighbour_support`): a neighbour's score comes from the tail
    itself or from ``known`` (the shard's scores of that conversation's messages by seq)."""
    by_seq = {**known, **dict(zip(seqs, scores))}
    return [
        neighbour_support(s, max(by_seq.get(q - 1, 0.0), by_seq.get(q + 1, 0.0)), weight) for q, s in zip(seqs, scores)
    ]
