"""`Written`: what this process added and has not yet seen indexed (read-your-writes for
``search``, :mod:`memray.conversation.recall`).

A search tells the shard the seqs kept here for the conversations it covers; the shard says which
it holds (those are forgotten), and the rest are scored in the caller's process. Kept by user,
then conversation, then message id, with a cap on the total (the oldest conversations go first:
they are found once indexed).
"""

from __future__ import annotations

from memray.conversation.read_your_writes import Tail
from memray.ids import ConversationKey, Namespace
from memray.models import Message, Scope

__all__ = ["Written", "Tails", "CAP"]

#: At most this many messages this process added are kept for read-your-writes until a search
#: sees them indexed; past it the oldest conversations' are dropped (found once indexed).
CAP = 100_000

Tails = dict[ConversationKey, Tail]


class Written:
    def __init__(self) -> None:
        # user -> conversation -> message id -> (seq, message)
        self._by_user: dict[tuple[str, str], dict[ConversationKey, dict[str, tuple[int, Message]]]] = {}
        self._count = 0

    def add(self, key: ConversationKey, messages: list[Message], seqs: list[int]) -> None:
        """This process added ``messages`` to ``key`` and got ``seqs``: searches find them until
        the shard holds them (a message without text is never indexed, so is not kept)."""
        mine = self._by_user.setdefault((key.app, key.user_id), {}).setdefault(key, {})
        for msg, seq in zip(messages, seqs):
            if msg.text:
                self._count += msg.id not in mine
                mine[msg.id] = (seq, msg)
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

    def unseen(self, key: ConversationKey, scope: Scope) -> dict[ConversationKey, dict[str, tuple[int, Message]]]:
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
                tails[k] = Tail([m.model_copy(update={"seq": seq}) for seq, m in mine.values()], 0)
        if not convs:
            self._by_user.pop((key.app, key.user_id), None)
        return tails
