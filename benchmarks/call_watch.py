"""What the per-call placement watch (``memray.rpc.ref.watched``) costs a normal Ray call.

    python -m benchmarks.call_watch --calls 2000 --rounds 6 --clients 1,16

One local Ray, one async no-op actor (``_harness.AsyncSink``, like a host). Each round times, in
turn (each round starting with the next, so that a load spike on this shared machine hits none
more often):

- floor: ``await handle.noop.remote()``, Ray's own round trip;
- unwatched: the same call through a typed client and a ref that only translates Ray's errors
  (what ``RayRef`` did before the watch);
- watched: through ``RayRef`` as memray calls its actors (the watch armed on every call).

With one client the calls are sequential (latency); with more they are concurrent (throughput).
Also reported: one placement check (a read of Ray's actor table, made only by a call that has
run for ``WATCH_GRACE_S``) and the watch's own CPU cost over a reply that is already there.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from benchmarks._harness import AsyncSink, SinkClient, emit, log, pct_ms, ratio, run_clients, start_ray


class UnwatchedRef:
    """``RayRef`` without the watch: the call and the translation of Ray's errors only."""

    def __init__(self, handle: Any, label: str) -> None:
        self.handle, self.label = handle, label

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        from ray.exceptions import RayActorError, RayTaskError

        from memray.errors import UnavailableError

        try:
            return await getattr(self.handle, method).remote(*args, **kwargs)
        except RayTaskError as exc:
            raise exc.cause from None  # type: ignore[misc]
        except RayActorError as exc:
            raise UnavailableError(self.label, str(exc)) from exc


async def one_round(variants: dict[str, Any], calls: int, clients: int, turn: int) -> dict[str, dict[str, float]]:
    """Each variant once, starting with a different one each ``turn`` (a load spike then hits no
    variant more often than another)."""
    names = list(variants)
    out = {}
    for name in names[turn % len(names) :] + names[: turn % len(names)]:
        call = variants[name]
        lat, wall = await run_clients(clients, calls, lambda _, call=call: call())
        out[name] = {**pct_ms(lat), "calls_per_s": round(calls / wall, 1)}
    return out


async def cpu_cost_us(n: int) -> dict[str, float]:
    """µs per call of awaiting a reply that is already there: plain, and through ``watched``."""
    from memray.rpc.ref import Placement, watched

    loop = asyncio.get_running_loop()

    async def never() -> Placement | None:
        raise AssertionError("a reply already there is never watched")

    def done() -> asyncio.Future[int]:
        fut: asyncio.Future[int] = loop.create_future()
        fut.set_result(0)
        return fut

    t0 = time.perf_counter()
    for _ in range(n):
        await done()
    plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(n):
        await watched(done(), never, "x", 30.0)
    watch = time.perf_counter() - t0
    return {"plain_await_us": round(plain / n * 1e6, 2), "watched_us": round(watch / n * 1e6, 2)}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    import ray

    from memray.runtime.actors import RayRef

    handle = ray.remote(AsyncSink).options(num_cpus=0, max_concurrency=10_000).remote()
    watched_ref = RayRef(handle, "sink")
    unwatched = SinkClient(UnwatchedRef(handle, "sink"))
    watched_client = SinkClient(watched_ref)
    await handle.ping.remote()
    variants = {
        "floor": lambda: handle.noop.remote(),
        "unwatched": lambda: unwatched.noop(),
        "watched": lambda: watched_client.noop(),
    }
    levels = [int(c) for c in args.clients.split(",")]
    rounds: dict[int, list[dict[str, dict[str, float]]]] = {c: [] for c in levels}
    for r in range(args.rounds):
        for c in levels:
            log(f"round {r + 1}/{args.rounds}, {c} client(s)")
            rounds[c].append(await one_round(variants, args.calls, c, turn=r))
    placement = []
    for _ in range(args.checks):
        t0 = time.perf_counter()
        await watched_ref.placement()
        placement.append(time.perf_counter() - t0)
    results: dict[str, Any] = {"clients": {}}
    for c, runs in rounds.items():
        row: dict[str, Any] = {"rounds": runs}
        for name in variants:
            row[name] = {
                key: statistics.median(run[name][key] for run in runs) for key in ("p50_ms", "p99_ms", "calls_per_s")
            }
        row["watched_p50_to_unwatched"] = ratio(row["watched"]["p50_ms"], row["unwatched"]["p50_ms"])
        row["watched_p50_to_floor"] = ratio(row["watched"]["p50_ms"], row["floor"]["p50_ms"])
        row["watched_rate_to_unwatched"] = ratio(row["watched"]["calls_per_s"], row["unwatched"]["calls_per_s"])
        results["clients"][str(c)] = row
    results["placement_check"] = pct_ms(placement)
    results["cpu"] = await cpu_cost_us(args.cpu_calls)
    ray.kill(handle)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--clients", default="1,16", help="concurrent callers, comma-separated")
    parser.add_argument("--checks", type=int, default=200, help="placement checks timed")
    parser.add_argument("--cpu-calls", type=int, default=20_000, help="calls timed for the watch's CPU cost")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: start a local Ray)")
    args = parser.parse_args()
    started = start_ray(args.address)
    try:
        results = asyncio.run(measure(args))
    finally:
        if started:
            import ray

            ray.shutdown()
    emit("call_watch", vars(args), results)


if __name__ == "__main__":
    main()
