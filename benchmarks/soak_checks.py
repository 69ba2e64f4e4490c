"""What the chaos soak (:mod:`benchmarks.soak`) checks at the end, on the data directory reopened
cold: Jepsen-style, every acknowledgement a caller got against what the store holds.

- every durable ack stored at its seq (``lost_durable``, ``seq_mismatch``), nothing stored twice
  (``duplicated``): :func:`benchmarks.fault_checks.stored_against_acked`, per app;
- per conversation, the acknowledged messages the store holds are in the order they were
  acknowledged, and their seqs rise in that order (``order_violations``: conversations where not);
- every buffered loss (acknowledged, not stored, not deleted) both raised to a caller (an add, a
  flush: :class:`~memray.errors.DeadLetterError`) and listed by ``dead_letters()``: else it is an
  ``unnamed_loss``;
- an erased user is gone (``verify_deleted``) and none of the data directory's files holds its id.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from benchmarks.fault_checks import stored_against_acked

__all__ = ["Ack", "cold_check", "files_holding"]

#: (app, user_id, conversation_id, message id)
MessageRef = tuple[str, str, str, str]


@dataclass(frozen=True)
class Ack:
    """One acknowledgement a caller got: which message, the seq returned, whether durable, when."""

    app: str
    user_id: str
    conversation_id: str
    id: str
    seq: int
    durable: bool
    at: float

    @property
    def ref(self) -> MessageRef:
        return (self.app, self.user_id, self.conversation_id, self.id)


def cold_check(
    mem: Any, acks: list[Ack], reported: set[MessageRef], deleted: set[MessageRef], unsure: set[MessageRef]
) -> dict[str, Any]:
    """The figures of the module docstring, ``mem`` opened cold on the soak's data directory.
    ``reported``: the messages a DeadLetterError named to a caller; ``deleted``: those deleted
    (expected absent); ``unsure``: a delete that raised (either way is right)."""
    by_conv: dict[tuple[str, str, str], list[Ack]] = defaultdict(list)
    for a in acks:
        if a.ref not in deleted and a.ref not in unsure:
            by_conv[(a.app, a.user_id, a.conversation_id)].append(a)
    figures: dict[str, int] = defaultdict(int)
    stored_seq: dict[MessageRef, int] = {}
    for app in sorted({k[0] for k in by_conv}):
        keys = [k for k in by_conv if k[0] == app]
        convs = [mem.conversation(user_id=u, conversation_id=c, app=app) for _, u, c in keys]
        durable = {(i, a.id): (a.seq, a.at) for i, k in enumerate(keys) for a in by_conv[k] if a.durable}
        every = {(i, a.id): (a.seq, a.at) for i, k in enumerate(keys) for a in by_conv[k]}
        d = stored_against_acked(mem, app, convs, durable, {})
        e = stored_against_acked(mem, app, convs, every, {})
        figures["acked_durable"] += d["acked"]
        figures["lost_durable"] += d["lost"]
        figures["acked"] += e["acked"]
        figures["stored"] += e["stored"]
        figures["duplicated"] += e["duplicated"]
        figures["seq_mismatch"] += e["seq_mismatch"]
        figures["seq_reused"] += e["seq_reused"]
        store = mem.internals.deployment.stores
        for (_, u, c), conv in zip(keys, convs):
            for r in mem.internals.run(store.get_messages(conv.key)):
                stored_seq[(app, u, c, r.id)] = r.seq
    letters = {
        (d.app, d.user_id, d.conversation_id, d.id) for d in mem.dead_letters(limit=10_000_000) if d.kind == "lost"
    }
    lost = [a for k in by_conv for a in by_conv[k] if a.ref not in stored_seq]
    figures["lost_buffered"] = sum(1 for a in lost if not a.durable)
    figures["lost_in_dead_letters"] = sum(1 for a in lost if a.ref in letters)
    figures["lost_raised_to_caller"] = sum(1 for a in lost if a.ref in reported)
    figures["unnamed_losses"] = sum(1 for a in lost if a.ref not in letters or a.ref not in reported)
    figures["reported_but_stored"] = sum(1 for ref in reported if ref in stored_seq)  # false alarms
    figures["order_violations"] = sum(1 for k in by_conv if not _in_order(by_conv[k], stored_seq))
    figures["deleted"] = len(deleted)
    figures["deleted_still_stored"] = sum(1 for ref in deleted if ref in stored_seq)
    return dict(figures)


def _in_order(acks: list[Ack], stored_seq: dict[MessageRef, int]) -> bool:
    """The conversation's acknowledged seqs rise in the order they were acknowledged, and the
    store holds the acknowledged messages it kept in that same order (a prefix-consistent log,
    losses named elsewhere)."""
    ordered = sorted(acks, key=lambda a: a.at)
    seqs = [a.seq for a in ordered]
    kept = [stored_seq[a.ref] for a in ordered if a.ref in stored_seq]
    return seqs == sorted(seqs) and len(set(seqs)) == len(seqs) and kept == sorted(kept)


def files_holding(root: str, needle: str) -> list[str]:
    """Files under ``root`` whose bytes contain ``needle`` (UTF-8): where an erased id survives."""
    data = needle.encode()
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    if data in f.read():
                        found.append(os.path.relpath(path, root))
            except OSError:
                continue
    return found
