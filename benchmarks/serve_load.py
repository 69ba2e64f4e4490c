"""Load on ``memray serve``: N concurrent HTTP clients searching and adding, beside the floor.

    python -m benchmarks.serve_load --clients 1,16,64 --requests 2000 --phase-seconds 60

Starts a local Ray, opens a memray (ray mode) seeded with ``--conversations`` conversations of
``--messages`` messages each (indexed before the load starts), makes a key per client (the server
bounds each key's requests in flight: ``--max-requests-per-key``) and deploys the Serve
app on 127.0.0.1 (loopback only). Then, for each client count, it times four phases of
``--requests`` requests each, alternating memray and its floor:

- ``search``: ``POST .../conversations/{c}/search`` (5 hits, ``scope=conversation``);
- ``add``: ``POST .../conversations/{c}/messages`` (one message, ``ack=buffered``);
- ``floor_search`` / ``floor_add``: the same bodies, with the same keys, to ``POST
  /v1/apps/{app}/noop`` of the same Serve app: the proxy, the replica, FastAPI, the key check and
  the body's parsing, and nothing of memray (the limit of this server on this machine).

Each phase stops at ``--requests`` or ``--phase-seconds``, whichever comes first; the whole run
stops by itself. Prints one JSON line: per client count and phase p50/p95/p99 and throughput,
and the ratios the targets speak of (search p50 / floor p50 at 1 client, search throughput /
floor throughput at 64, p99 / p50).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

import httpx

from benchmarks._harness import (
    common_args,
    emit,
    free_port,
    in_data_dir,
    log,
    pct_ms,
    ratio,
    recorded,
    sentence,
)

APP = "bench"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.serve_load", description=__doc__.split("\n")[0])
    common_args(p)
    p.add_argument("--clients", default="1,16,64", help="concurrent HTTP clients, comma-separated")
    p.add_argument("--requests", type=int, default=2000, help="requests per phase (at most)")
    p.add_argument("--phase-seconds", type=float, default=60.0, help="a phase stops after this long")
    p.add_argument("--conversations", type=int, default=200, help="conversations seeded (one user each)")
    p.add_argument("--messages", type=int, default=20, help="messages per seeded conversation")
    p.add_argument("--replicas", type=int, default=1, help="Serve replicas")
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--shards", type=int, default=1)
    return p


def _conv(i: int, conversations: int) -> str:
    n = i % conversations
    return f"/v1/apps/{APP}/users/u{n}/conversations/c{n}"


def phases(args: argparse.Namespace, rng: random.Random) -> dict[str, tuple[list[str], list[dict[str, Any]]]]:
    """(urls, bodies) of each phase; a floor gets its op's bodies, sent to the no-op route."""
    n = args.requests
    convs = [_conv(rng.randrange(args.conversations), args.conversations) for _ in range(n)]
    searches = [{"query": " ".join(sentence(rng, 3).split()[:3]), "limit": 5} for _ in range(n)]
    adds = [{"messages": [{"role": "user", "content": sentence(rng)}]} for _ in range(n)]
    noop = [f"/v1/apps/{APP}/noop"] * n
    return {
        "floor_search": (noop, searches),
        "search": ([c + "/search" for c in convs], searches),
        "floor_add": (noop, adds),
        "add": ([c + "/messages" for c in convs], adds),
    }


async def run_phase(
    base: str, keys: list[str], clients: int, urls: list[str], bodies: list[dict[str, Any]], seconds: float
) -> dict[str, Any]:
    """``clients`` loops sharing the requests, until they are done or ``seconds`` passed; client
    ``c`` sends key ``keys[c]`` (each agent its own key, as the server bounds each key's requests)."""
    latencies: list[float] = []
    errors = 0
    todo = iter(range(len(urls)))
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60.0) as http:

        async def client(c: int) -> None:
            nonlocal errors
            for i in todo:
                if time.perf_counter() > deadline:
                    return
                t0 = time.perf_counter()
                r = await http.post(urls[i], json=bodies[i], headers={"X-API-Key": keys[c]})
                latencies.append(time.perf_counter() - t0)
                errors += r.status_code != 200

        t0 = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        wall = time.perf_counter() - t0
    return {**pct_ms(latencies), "requests_per_s": round(len(latencies) / wall, 1), "errors": errors}


async def measure_http(base: str, keys: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Every phase at every client count against a server at ``base``."""
    rng = random.Random(args.seed)
    out: dict[str, Any] = {}
    for clients in [int(c) for c in str(args.clients).split(",")]:
        row: dict[str, Any] = {}
        for name, (urls, bodies) in phases(args, rng).items():
            log(f"{clients} clients: {name}")
            row[name] = await run_phase(base, keys, clients, urls, bodies, args.phase_seconds)
        for op in ("search", "add"):
            mine, floor = row[op], row[f"floor_{op}"]
            row[f"{op}_p50_to_floor"] = ratio(mine["p50_ms"], floor["p50_ms"])
            row[f"{op}_throughput_to_floor"] = ratio(mine["requests_per_s"], floor["requests_per_s"])
            row[f"{op}_p99_to_p50"] = ratio(mine["p99_ms"], mine["p50_ms"])
        out[str(clients)] = row
    return out


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets, read off the results (None where that client count was not run)."""
    one, many = results.get("1"), results.get("64")
    return {
        "search_p50_to_floor_at_1_le_1.5": one and one["search_p50_to_floor"] <= 1.5,
        "search_throughput_to_floor_at_64_ge_0.7": many and many["search_throughput_to_floor"] >= 0.7,
        "p99_le_3x_p50": all(row[f"{op}_p99_to_p50"] <= 3 for row in results.values() for op in ("search", "add")),
    }


def seed(mem: Any, args: argparse.Namespace) -> None:
    rng = random.Random(args.seed + 1)

    def messages() -> list[dict[str, str]]:
        return [{"role": "user", "content": sentence(rng)} for _ in range(args.messages)]

    batch = [(mem.conversation(f"u{i}", f"c{i}", APP), messages()) for i in range(args.conversations)]
    mem.add_many(batch, durable=True)
    mem.wait_indexed(timeout_s=300)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import memray
    from memray.server.api import ServerSettings
    from memray.server.deployment import APP_NAME, deploy

    def work(root: str) -> dict[str, Any]:
        from ray import serve

        config = memray.MemoryConfig(path=root, mode="ray", hosts=args.hosts, shards=args.shards)
        with memray.open(config=config) as mem:
            log(f"seeding {args.conversations} conversations x {args.messages} messages")
            seed(mem, args)
            most = max(int(c) for c in str(args.clients).split(","))
            keys = [mem.keys.create(APP, label=f"serve_load-{c}")[0] for c in range(most)]
            base = deploy(
                ServerSettings(config=config, replicas=args.replicas, floor_route=True), "127.0.0.1", free_port()
            )
            try:
                return asyncio.run(measure_http(base, keys, args))
            finally:
                serve.delete(APP_NAME)
                serve.shutdown()  # type: ignore[no-untyped-call]

    return dict(in_data_dir(args, "memray-serve-load-", work))


def render() -> str:
    """docs/server.md's table of the recorded run (``benchmarks/results/serve_load.json``)."""
    line = recorded("serve_load.json")
    p = line["params"]
    rows = [
        f"{p['conversations']} conversations of {p['messages']} messages, {p['hosts']} hosts, "
        f"{p['shards']} shard(s), {p['replicas']} replica(s):",
        "",
        "| clients | search p50 / p99 | floor p50 / p99 | search / floor req/s | add p50 / p99 | add / floor req/s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n, c in line["clients"].items():
        s, fs, a, fa = c["search"], c["floor_search"], c["add"], c["floor_add"]
        rows.append(
            f"| {n} | {s['p50_ms']:.1f} / {s['p99_ms']:.1f} ms | {fs['p50_ms']:.1f} / {fs['p99_ms']:.1f} ms "
            f"| {s['requests_per_s']:.1f} / {fs['requests_per_s']:.1f} | {a['p50_ms']:.1f} / {a['p99_ms']:.1f} ms "
            f"| {a['requests_per_s']:.1f} / {fa['requests_per_s']:.1f} |"
        )
    one, most = line["clients"][min(line["clients"], key=int)], line["clients"][max(line["clients"], key=int)]
    tails = ", ".join(f"{n}: {c['search_p99_to_p50']:.1f}×" for n, c in line["clients"].items())
    rows += [
        "",
        f"Targets: search p50 ≤ 1.5× the floor at one client ({one['search_p50_to_floor']:.2f}×); search "
        f"throughput ≥ 0.7× the floor's at the most clients ({most['search_throughput_to_floor']:.2f}×); "
        f"search p99 ≤ 3× its p50 (by clients: {tails}).",
    ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    results = run(args)
    params = {k: getattr(args, k) for k in ("clients", "requests", "phase_seconds", "conversations", "messages")}
    params.update(replicas=args.replicas, hosts=args.hosts, shards=args.shards)
    emit("serve_load", params, {"clients": results, "targets": targets(results)})


if __name__ == "__main__":
    main()
