"""One tenant flooding ``memray serve``: another tenant's latency with and without the flood.

    python -m benchmarks.serve_flood --streams 300 --samples 40

Starts a local Ray, opens a memray (ray mode), makes keys for two apps and deploys the Serve app on
127.0.0.1 (loopback only). The victim (app ``victim``) lists its conversations, ``--samples``
sequential requests at a time. The attacker (app ``attacker``, a *read-only* key) opens
``--streams`` ``GET /mcp`` streams (the standalone SSE stream) and holds them open, then sends
``--max-requests-per-key`` + ``--over`` searches whose bodies stop halfway, so that the bound's
worth hold their slots in the replica until released. The victim's median is measured before the
flood, during it and after it; the floor is the median of the samples before and after pooled
(so a drift of the machine's own load does not pass for the flood's effect). Prints one JSON
line: the medians, their ratio (target ≤ 1.5), and what the attacker's requests were answered.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks._harness import common_args, emit, free_port, in_data_dir, log


@dataclass(frozen=True)
class Tenants:
    """Where the flood goes: the server, the attacker's key and a route it may read, the victim's
    key and route, and a third key that reads the replica's metrics."""

    url: str
    attacker_key: str
    attacker_search: str
    victim_key: str
    victim_route: str
    observer_key: str


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.serve_flood", description=__doc__.split("\n")[0])
    common_args(p)
    p.add_argument("--streams", type=int, default=300, help="idle GET /mcp streams the attacker holds")
    p.add_argument("--over", type=int, default=16, help="slow requests past the attacker key's bound")
    p.add_argument("--samples", type=int, default=40, help="victim requests per measurement")
    p.add_argument("--max-requests-per-key", type=int, default=32, help="the server's per-key bound")
    return p


async def latencies_s(http: httpx.AsyncClient, url: str, n: int) -> list[float]:
    """Latencies of ``n`` sequential GETs (each must answer 200 within the client's timeout)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = await http.get(url)
        times.append(time.perf_counter() - t0)
        if r.status_code != 200:
            raise RuntimeError(f"the victim's request answered {r.status_code}: {r.text}")
    return times


async def answered_with(http: httpx.AsyncClient, status: int) -> float:
    """How many requests the (single) replica has answered with ``status``, from ``/metrics``."""
    text = (await http.get("/metrics")).text
    lines = [x for x in text.splitlines() if x.startswith("memray_http_requests_total{") and f'status="{status}"' in x]
    return sum(float(x.rsplit(" ", 1)[1]) for x in lines)


async def flood(t: Tenants, streams: int, bound: int, over: int, samples: int) -> dict[str, Any]:
    """The measurement (module docstring); every wait is on state, never on a sleep."""
    release = asyncio.Event()

    async def trickle() -> AsyncIterator[bytes]:  # a body that stops halfway until released
        yield b'{"query": '
        await release.wait()
        yield b'"vault"}'

    limits = httpx.Limits(max_connections=streams + bound + over + 8, max_keepalive_connections=0)
    attacker_headers = {"Authorization": f"Bearer {t.attacker_key}"}
    async with (
        httpx.AsyncClient(base_url=t.url, headers={"X-API-Key": t.victim_key}, timeout=10.0) as victim,
        httpx.AsyncClient(base_url=t.url, headers=attacker_headers, timeout=60.0, limits=limits) as attacker,
        httpx.AsyncClient(base_url=t.url, headers={"X-API-Key": t.observer_key}, timeout=10.0) as observer,
        AsyncExitStack() as held,
    ):
        await latencies_s(victim, t.victim_route, 5)  # warm the connection and the route
        before = await latencies_s(victim, t.victim_route, samples)
        sse = {"Accept": "text/event-stream"}
        opened = await asyncio.gather(
            *(held.enter_async_context(attacker.stream("GET", "/mcp", headers=sse)) for _ in range(streams))
        )  # each stream is open and answered (its status line arrived); none is closed yet
        refused_before = await answered_with(observer, 429)
        slow = [
            asyncio.create_task(
                attacker.post(t.attacker_search, content=trickle(), headers={"content-type": "application/json"})
            )
            for _ in range(bound + over)
        ]
        # The server answers the requests past the bound at once (the client reads those answers
        # only once it has sent its whole body, after the release): wait until it has.
        deadline = time.monotonic() + 30.0
        while await answered_with(observer, 429) < refused_before + over:
            if time.monotonic() > deadline:
                raise RuntimeError("the requests past the key's bound were not refused within 30 s")
        during = await latencies_s(victim, t.victim_route, samples)  # the bound's worth hold their slots
        release.set()
        answered = await asyncio.gather(*slow)
        await held.aclose()  # the streams close
        after = await latencies_s(victim, t.victim_route, samples)
    unloaded, loaded = statistics.median(before + after), statistics.median(during)
    return {
        "unloaded_p50_ms": round(unloaded * 1e3, 2),
        "flooded_p50_ms": round(loaded * 1e3, 2),
        "flooded_to_unloaded": round(loaded / unloaded, 3),
        "flooded_max_ms": round(max(during) * 1e3, 2),
        "streams": dict(Counter(s.status_code for s in opened)),
        "slow_requests": dict(Counter(r.status_code for r in answered)),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import memray
    from memray.server.deployment import APP_NAME, deploy
    from memray.server.settings import ServerSettings

    def work(root: str) -> dict[str, Any]:
        from ray import serve

        config = memray.MemoryConfig(path=root, mode="ray", hosts=1, shards=1)
        with memray.open(config=config) as mem:
            attacker, _ = mem.keys.create("attacker", read_only=True, label="flood")
            victim, _ = mem.keys.create("victim", label="victim")
            observer, _ = mem.keys.create("ops", read_only=True, label="metrics")
            settings = ServerSettings(config=config, max_requests_per_key=args.max_requests_per_key)
            base = deploy(settings, "127.0.0.1", free_port())
            tenants = Tenants(
                base,
                attacker,
                "/v1/apps/attacker/users/a/conversations/c/search",
                victim,
                "/v1/apps/victim/users/v/conversations",
                observer,
            )
            try:
                log(f"{args.streams} streams, {args.max_requests_per_key}+{args.over} slow requests")
                return asyncio.run(flood(tenants, args.streams, args.max_requests_per_key, args.over, args.samples))
            finally:
                serve.delete(APP_NAME)
                serve.shutdown()  # type: ignore[no-untyped-call]

    return dict(in_data_dir(args, "memray-serve-flood-", work))


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    results = run(args)
    params = {k: getattr(args, k) for k in ("streams", "over", "samples", "max_requests_per_key")}
    targets = {"flooded_to_unloaded_le_1.5": results["flooded_to_unloaded"] <= 1.5}
    emit("serve_flood", params, {**results, "targets": targets})


if __name__ == "__main__":
    main()
