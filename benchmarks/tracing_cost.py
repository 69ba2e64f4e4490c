"""What a typed client call costs beyond its ref: tracing off (and on with no span current).

    python -m benchmarks.tracing_cost --calls 100000 --rounds 15

A typed client (:class:`memray.rpc.client.Client`, its call a :func:`~memray.rpc.client.remote`
of a core method, as every memray client's) over a ref that does nothing, timed in CPU time per
call, alternating with the floor: a hand-written ``async def`` that awaits the ref with no
tracing check at all. Prints one JSON line: min and median ns per call of each, and their
difference (the remote's bound call is kept on the client after its first read: without that, a
call cost ~0.3 µs more than the floor here).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from benchmarks._harness import emit
from memray.rpc.client import Client, remote


class _NullRef:
    label = "null"

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        return None


class Floor(Client):
    async def _call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        return await self.ref.call(method, *args, **kwargs)

    async def ping(self) -> Any:
        return await self._call("ping")


class _Core:
    def ping(self) -> bool:
        return True


class Memray(Client, core=_Core):
    ping = remote(_Core.ping)


async def ns_per_call(client: Client, calls: int) -> float:
    t0 = time.process_time()
    for _ in range(calls):
        await client.ping()  # type: ignore[attr-defined]
    return (time.process_time() - t0) / calls * 1e9


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from memray import tracing

    results: dict[str, list[float]] = {"floor": [], "off": [], "on_no_span": []}
    for _ in range(args.rounds):
        results["floor"].append(await ns_per_call(Floor(_NullRef()), args.calls))
        results["off"].append(await ns_per_call(Memray(_NullRef()), args.calls))
        if args.on:
            tracing.enable()
            try:
                results["on_no_span"].append(await ns_per_call(Memray(_NullRef()), args.calls))
            finally:
                tracing.disable()
    out = {
        k: {"min_ns": round(min(v), 1), "median_ns": round(sorted(v)[len(v) // 2], 1)} for k, v in results.items() if v
    }
    out["off_minus_floor_median_ns"] = round(out["off"]["median_ns"] - out["floor"]["median_ns"], 1)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tracing_cost", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument(
        "--on", action="store_true", help="also time tracing on with no span current (needs the serve extra)"
    )
    args = p.parse_args(argv)
    emit("tracing_cost", vars(args), asyncio.run(measure(args)))


if __name__ == "__main__":
    main()
