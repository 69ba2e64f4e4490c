"""Read-your-writes: a ``search`` or ``context`` right after an ``add`` finds what it added,
though the index may not hold it yet.

An ``add`` is acknowledged once its messages are in the host's buffer; they reach the vector
shard later (debounce, group commit, embedding). Until a shard confirms them, they are kept in
two places, each giving **tails** (:class:`Tail`: a conversation's messages the shard may lack):

- on the host, per conversation: what it acknowledged and has not seen confirmed indexed
  (``Conversation.unindexed``, :meth:`~memray.conversation.state.Conversation.unindexed_tail`).
  ``context`` asks the host for the recent messages anyway, and the host adds the tail (what
  *any* writer added), so a context sees every message acknowledged before the call.
- in the caller's process: :class:`Written`, what this process added and has not seen indexed.
  A ``search`` tells the shard those seqs, the shard says which it holds (those are forgotten),
  and the rest are tails. So a search finds what this process added (in the conversation, and
  with ``scope="user"`` in every conversation of the user it wrote to); what another process
  added is found once indexed (normally well under a second).

The caller scores the tails through the same scoring kernel as the shard, with the BM25
statistics the shard returns (:func:`score_tails`), lexically, and by vector too when the
embedder is :attr:`~memray.embedding.base.Embedder.recomputable` (the hash embedder:
microseconds). The host is asked while the shard searches (concurrently: no extra latency).

The race this closes: a message confirmed indexed *after* the shard answered but *before* the
host did would be in neither answer. Every host upsert carries an increasing **stamp**; the shard
reports the newest stamp applied to the conversation's namespace, the host the newest it saw
confirmed. If the shard's is older, the shard is asked again (it has applied the upsert by then).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from memray.ids import ConversationKey, Namespace, as_namespace
from memray.index.base import ShardHit
from memray.index.columns import columns_of
from memray.index.exact import ExactIndex
from memray.index.lexical import Bm25Stats, LexicalIndex
from memray.index.scorer import Search, hit_order, score
from memray.index.search import Query
from memray.models import Message, Scope
from memray.models.wire import Packed, decode_messages, encode_messages, pack_message, unpack_message
from memray.text import text_id

__all__ = ["Tail", "Tails", "RecentAnswers", "Written", "CAP", "TailSource", "TailSearch", "score_tails"]

#: At most this many messages this process added are kept for read-your-writes until a search
#: sees them indexed; past it the oldest conversations' are dropped (found once indexed).
CAP = 100_000


class Tail(NamedTuple):
    """The messages of one conversation the shard may lack."""

    messages: list[Message]  # acknowledged, not confirmed indexed, in seq order
    stamp: int  # the newest indexing stamp confirmed for the conversation (0: none yet)


Tails = dict[ConversationKey, Tail]


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


#: What :class:`Written` keeps of a message: packed (:func:`~memray.models.wire.pack_message`),
#: or the message itself when it does not pack (a part or metadata value that is not plain JSON).
Kept = Packed | Message


class Written:
    """What this process added and has not yet seen indexed (the module docstring): kept by
    user, then conversation, then message id, with a cap on the total (:data:`CAP`: the oldest
    conversations go first; they are found once indexed).

    A message is kept packed, as one tuple of plain values: a tick of 10,000 agents adds 20,000
    messages, which the process keeps for about a tick. Kept as messages (the record, its parts
    and their containers: ~8 objects the cyclic collector tracks, each), they were 165,000 of the
    385,000 objects it tracked in a ray-mode driver of ``examples/tick.py`` at 10,000 agents;
    packed, the driver tracks 220,000 and its collections took ~0.38 s of a tick where they took
    ~0.5 s. Only a search whose tail holds one builds the message again."""

    def __init__(self) -> None:
        # user -> conversation -> message id -> (seq, message kept)
        self._by_user: dict[tuple[str, str], dict[ConversationKey, dict[str, tuple[int, Kept]]]] = {}
        self._count = 0

    def add(self, key: ConversationKey, messages: list[Message], seqs: list[int]) -> None:
        """This process added ``messages`` to ``key`` and got ``seqs``: searches find them until
        the shard holds them (a message without text is never indexed, so is not kept)."""
        mine = self._by_user.setdefault((key.app, key.user_id), {}).setdefault(key, {})
        for msg, seq in zip(messages, seqs):
            if msg.text:
                self._count += msg.id not in mine
                mine[msg.id] = (seq, pack_message(msg) or msg)
        while self._count > CAP:
            user = next(iter(self._by_user))
            convs = self._by_user[user]
            self._count -= len(convs.pop(next(iter(convs))))
            if not convs:
                del self._by_user[user]

    def forget(self, key: ConversationKey, ids: list[str] | None = None) -> int:
        """Drop what this process wrote to ``key`` (or only ``ids``): deleted messages must not
        come back from here. Returns how many were dropped."""
        convs = self._by_user.get((key.app, key.user_id), {})
        mine = convs.get(key, {})
        gone = [i for i in (list(mine) if ids is None else ids) if mine.pop(i, None) is not None]
        self._count -= len(gone)
        if not mine:
            convs.pop(key, None)
        if not convs:
            self._by_user.pop((key.app, key.user_id), None)
        return len(gone)

    def forget_user(self, app: str, user_id: str) -> int:
        """Drop everything this process wrote for the user (erasure). Returns how many."""
        convs = self._by_user.pop((app, user_id), {})
        gone = sum(len(mine) for mine in convs.values())
        self._count -= gone
        return gone

    def confirmed(self, key: ConversationKey, tail: Tail, last_seq: int) -> None:
        """Forget what this process wrote to ``key`` that its host says is indexed: ``tail`` is
        what the host had not seen indexed when it answered, ``last_seq`` the newest seq it held
        then (a message this process added after that answer is kept: the host had not seen it).
        context() learns this from the host's answer, so agents that only ask for contexts keep
        nothing here once their messages are indexed."""
        convs = self._by_user.get((key.app, key.user_id), {})
        mine = convs.get(key)
        if not mine:
            return
        unindexed = {m.id for m in tail.messages}
        gone = [mid for mid, (seq, _) in mine.items() if seq <= last_seq and mid not in unindexed]
        for mid in gone:
            del mine[mid]
        self._count -= len(gone)
        if not mine:
            del convs[key]
            if not convs:
                del self._by_user[(key.app, key.user_id)]

    def count_user(self, app: str, user_id: str) -> int:
        """Messages of the user this process holds for read-your-writes (0 after an erasure)."""
        return sum(len(mine) for mine in self._by_user.get((app, user_id), {}).values())

    def unseen(self, key: ConversationKey, scope: Scope) -> dict[ConversationKey, dict[str, tuple[int, Kept]]]:
        """What this process wrote and has not seen indexed, in ``key``'s conversation or (scope
        "user") every conversation of its user."""
        convs = self._by_user.get((key.app, key.user_id), {})
        if scope == "conversation":
            return {key: convs[key]} if key in convs else {}
        return dict(convs)

    def seen(
        self, key: ConversationKey, held: dict[Namespace, list[int]], skip: ConversationKey | None = None
    ) -> Tails:
        """Forget what the shard said it holds; the tails of what it does not (but ``skip``'s:
        context() has that conversation's tail from its host)."""
        convs = self._by_user.get((key.app, key.user_id), {})
        tails: Tails = {}
        for ns, seqs in held.items():
            k = ConversationKey(ns.app, ns.user_id, ns.scope)
            mine = convs.get(k)
            if mine is None:
                continue
            if seqs:
                indexed = set(seqs)
                for mid in [m for m, (seq, _) in mine.items() if seq in indexed]:
                    del mine[mid]
                    self._count -= 1
            if not mine:
                del convs[k]
            elif k != skip:
                tails[k] = Tail([_kept_message(seq, kept) for seq, kept in mine.values()], 0)
        if not convs:
            self._by_user.pop((key.app, key.user_id), None)
        return tails


def _kept_message(seq: int, kept: Kept) -> Message:
    """A message :class:`Written` kept, with its seq."""
    if isinstance(kept, Message):
        return kept.model_copy(update={"seq": seq})
    return unpack_message(kept, seq)


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

    def text_ids(self, labels: np.ndarray) -> np.ndarray:
        msgs = self.messages
        return np.array([text_id(msgs[n].text) for n in labels.tolist()], dtype=np.int64)

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
        hits = [h for h in one.hits if (h.namespace, h.doc_id) not in replaced]  # (a tuple equals its Namespace)
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
        known.setdefault(as_namespace(h.namespace), {})[h.recency] = h.score
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
