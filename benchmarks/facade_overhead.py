"""What a sync facade call costs beyond the core call it runs, one JSON line.

    python -m benchmarks.facade_overhead --n 3000

Each handle method is written once, as a coroutine, and its sync form runs that coroutine on
memray's loop thread (:func:`memray.facade.runner.blocking`); this measures, in CPU µs per call
(best of ``--repeat`` runs, in-process mode), three sync calls of a conversation handle —
``durable_seq`` (one host round trip), ``messages(limit=5)`` and ``add`` of one message — against
two floors measured in the same run: ``hop_us``, a no-op coroutine run on the same loop thread
(``LoopThread.run``: the thread hop every sync call pays), and ``core_durable_seq_us``, the core
call ``durable_seq`` makes, run on that thread without the facade. ``facade_added_us`` is
``durable_seq_us - core_durable_seq_us``.

Seen on the shared 2-core machine while busy (load 8), best of 7 × 3000 calls, the same script
run alternately on the tree before (each pair written twice) and after: durable_seq 63.5 / 96.0 µs
before vs 63.0 / 61.8 after; messages 99.5 / 103.8 vs 95.6 / 118.5; add 261 / 279 vs 240 / 238 —
no difference above the noise. ``facade_added_us`` about 10 µs (argument checks, routing, the
handle's coroutine).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from benchmarks._harness import emit, scratch


def best_cpu_us(fn: Callable[[], Any], n: int, repeat: int) -> float:
    """Best of ``repeat`` runs of ``n`` calls of ``fn``: CPU µs (every thread) per call."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, time.process_time() - t0)
    return round(best / n * 1e6, 2)


async def _noop() -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="calls per run")
    parser.add_argument("--repeat", type=int, default=7, help="runs; the best is kept")
    args = parser.parse_args()

    import memray

    with memray.open(scratch("memray-facade-overhead-"), mode="inprocess", hosts=1, shards=1) as mem:
        conv = mem.conversation("u", "c")
        conv.add([{"role": "user", "content": f"note {i}"} for i in range(20)])
        runner = mem.internals
        host = runner.host_for(conv.key)
        results = {
            "hop_us": best_cpu_us(lambda: runner.run(_noop()), args.n, args.repeat),
            "core_durable_seq_us": best_cpu_us(lambda: runner.run(host.last_seq(conv.key)), args.n, args.repeat),
            "durable_seq_us": best_cpu_us(conv.durable_seq, args.n, args.repeat),
            "messages_us": best_cpu_us(lambda: conv.messages(limit=5), args.n, args.repeat),
            "add_us": best_cpu_us(lambda: conv.add({"role": "user", "content": "x"}), args.n, args.repeat),
        }
        results["facade_added_us"] = round(results["durable_seq_us"] - results["core_durable_seq_us"], 2)
    emit("facade_overhead", {"n": args.n, "repeat": args.repeat, "mode": "inprocess"}, results)


if __name__ == "__main__":
    main()
