"""What leveling a shard with the store pays to move refs between processes, one JSON line.

    python -m benchmarks.refs_wire_micro --refs 80000 --namespaces 10000

A restarted shard's keeper levels it with the store 1, 5 and 30 s after it recovers
(:func:`memray.index.keeper.level_shard`). While writes go on the two digests differ (the shard
holds vectors the store has not marked yet), so the store's refs cross to the shard: every
``(namespace, doc_id)`` of the shard's users, 80,000 after eight ticks of 10,000 agents. Through
Ray's pickler (cloudpickle), per round trip (dumps and loads), best of 5:

- ``tuples``: a list of ``(Namespace, doc_id, has_vector)``, as ``index_refs`` answered before
  (a ``Namespace`` built per row): every ``Namespace`` (a named tuple) goes through the pickler's
  per-object hook in Python;
- ``ref_list``: :class:`memray.models.wire.RefList`, each namespace once and the rest as columns,
  rebuilt as ``Namespace`` objects on load;
- ``floor``: the columns a ``RefList`` puts on the wire (its namespaces as plain tuples, their
  index per ref, the doc ids, the flags), with no refs rebuilt from them.

Before this form a leveling pass also shipped the shard's own refs to the keeper and compared
the two there; 10,000 agents in ray mode after eight ticks, per shard: 1.0-1.4 s before, 0.35-0.47
s after (a probe timing ``index_refs`` and the comparison through the live actors).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import ray.cloudpickle as cp  # Ray's pickler: what a call's arguments and answer go through

from benchmarks._harness import emit, ratio
from memray.ids import Namespace
from memray.models.wire import RefList
from memray.runtime import collector


def round_trip(value: Any) -> Any:
    return cp.loads(cp.dumps(value))  # type: ignore[no-untyped-call]


def best_ms(fn: Callable[[], Any], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(min(times) * 1000, 2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--refs", type=int, default=80_000)
    ap.add_argument("--namespaces", type=int, default=10_000)
    args = ap.parse_args(argv)
    collector.raise_thresholds()  # as in memray's actor processes
    per = max(1, args.refs // args.namespaces)
    # a Namespace per ref, as the store builds them from its rows (one object shared by many refs
    # would be pickled once anyway: the pickler's memo)
    tuples = [
        (Namespace("default", f"agent-{(i // per) % args.namespaces}", "conv", "main"), f"m{i}", i % 7 != 0)
        for i in range(args.refs)
    ]
    refs = RefList(tuples)
    columns = refs.__reduce__()[1]  # what a RefList puts on the wire
    assert round_trip(refs) == tuples
    results: dict[str, Any] = {
        "tuples_ms": best_ms(lambda: round_trip(tuples)),
        "ref_list_ms": best_ms(lambda: round_trip(refs)),
        "floor_ms": best_ms(lambda: round_trip(columns)),
    }
    results["ref_list_over_floor"] = ratio(results["ref_list_ms"], results["floor_ms"])
    return emit("refs_wire_micro", {"refs": args.refs, "namespaces": args.namespaces}, results)


if __name__ == "__main__":
    main()
