"""What the fault benchmark (:mod:`benchmarks.faults`) checks after a fault: the store against
what was acknowledged, and the shards and searches against the store."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["stored_against_acked", "index_figures"]


def stored_against_acked(
    mem: Any, app: str, convs: list[Any], acked: dict[tuple[int, str], tuple[int, float]], kill: dict[str, float]
) -> dict[str, Any]:
    """The store against what was acknowledged (``acked``: (conversation, id) -> (seq, when)):
    stored (of the acknowledged; ``stored_rows``: every row), lost (and whether recorded as dead
    letters), duplicated, at another seq, seqs reused, gaps."""
    store = mem.internals.deployment.stores
    stored: dict[tuple[int, str], int] = {}
    duplicated = gaps = 0
    letters = [d for d in mem.dead_letters(app=app, limit=10_000_000)]
    dead_seqs: dict[str, set[int]] = {}
    for d in letters:
        dead_seqs.setdefault(d.conversation_id, set()).add(d.seq)
    by_seq: dict[tuple[int, int], str] = {}
    for c, conv in enumerate(convs):
        rows = mem.internals.run(store.get_messages(conv.key))
        ids = [r.id for r in rows]
        seqs = [r.seq for r in rows]
        duplicated += (len(ids) - len(set(ids))) + (len(seqs) - len(set(seqs)))
        for r in rows:
            stored[(c, r.id)] = r.seq
            by_seq[(c, r.seq)] = r.id
        if seqs:
            gaps += len(set(range(1, max(seqs) + 1)) - set(seqs) - dead_seqs.get(conv.key.conversation_id, set()))
    lost = [k for k in acked if k not in stored]
    recorded = {(d.conversation_id, d.id) for d in letters if d.kind == "lost"}
    kill_at = kill.get("at", 0.0)
    return {
        "acked": len(acked),
        "stored": sum(1 for k in acked if k in stored),
        "stored_rows": len(stored),
        "lost": len(lost),
        "lost_recorded": sum(1 for c, i in lost if (convs[c].key.conversation_id, i) in recorded),
        "lost_max_age_s": round(max((kill_at - acked[k][1] for k in lost), default=0.0), 3),
        "duplicated": duplicated,
        "seq_mismatch": sum(1 for k, (s, _) in acked.items() if k in stored and stored[k] != s),
        "seq_reused": sum(1 for (c, i) in lost if by_seq.get((c, acked[(c, i)][0]), i) != i),
        "gaps": gaps,
        "dead_letters": len(letters),
        "recovery_s": round(kill["recovery_s"], 2) if "recovery_s" in kill else None,
    }


def index_figures(mem: Any, app: str, convs: list[Any], sample: int = 40, seed: int = 7) -> dict[str, Any]:
    """Every stored vector in its shard; a sample of messages findable by vector and lexically."""
    from memray.ids import Namespace

    dep = mem.internals.deployment
    missing = 0
    for i, shard in enumerate(dep.shards):
        model = mem.internals.run(shard.stats())["model_id"]
        want = {
            (Namespace(*ns), d)
            for ns, d, vectored in mem.internals.run(dep.stores.index_refs(i, len(dep.shards), model))
            if vectored and ns[0] == app
        }
        held = {(Namespace(*ns), d) for ns, d in mem.internals.run(shard.vectored_refs())}
        missing += len(want - held)
    rng = random.Random(seed)
    found_vector = found_lexical = tried = 0
    for conv in rng.sample(convs, min(len(convs), sample)):
        msgs = conv.messages()
        if not msgs:
            continue
        m = rng.choice(msgs)
        tried += 1
        code = next(w for w in m.text.split() if w.startswith("zq")).rstrip(":")
        lexical = conv.search(code, limit=1, mode="lexical")
        vector = conv.search(m.text, limit=1, mode="vector")
        found_lexical += bool(lexical and not lexical.degraded and lexical[0].message.id == m.id)
        found_vector += bool(vector and not vector.degraded and vector[0].message.id == m.id)
    return {
        "vectors_missing_from_shards": missing,
        "sampled": tried,
        "found_by_vector": found_vector,
        "found_lexically": found_lexical,
    }
