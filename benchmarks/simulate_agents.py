"""Many agents: tick latency, messages/s, durable and searchable lag, memory per idle conversation,
and a final check that the store holds exactly what was acknowledged.

    python -m benchmarks.simulate_agents --agents 1000 --turns 5 --plot benchmarks/results/simulate_agents.png
    python -m benchmarks.simulate_agents --agents 10000 --turns 3 --hosts 4
    python -m benchmarks.simulate_agents --address ray://head:10001 ...   # on a cluster

The simulation is :func:`memray.simulation.simulate` (the ``memray demo`` job): every tick each
agent adds a user message (one ``add_many`` for all agents), calls ``context()``, and adds an
assistant reply (one more ``add_many``); at the end the store is read directly and compared with
every acknowledged (id, seq). This benchmark adds:

- the steady tick: ``steady_tick_p50_ms`` is the p50 of the ticks from tick 3 on, counted from
  0 (the first ones run on an index the persist debounce still holds back), and ``growth`` tick
  8 over tick 3 (``_harness.growth``, as ``user_tick``: no growth with history is <= 1.3),
  beside ``tick_p50_ms`` of every tick;
- durable lag (ack → commit) per message, measured inside the hosts (``durable_lag``);
- searchable lag: each tick ``--probes`` agents get a unique marker word in their message; from
  the ack, a poller searches that conversation for the marker every ``--poll-ms`` until the
  message comes back (write → commit → embed → index);
- memory per idle conversation: the data is reopened with fresh hosts; the sum of the hosts'
  RSS (``stats()["rss_bytes"]``, distinct processes) is read before and after loading all N
  conversations (``add_many`` with no messages loads them in bulk; the first 5% load before the
  first reading, so one-time costs are not counted); the difference divided by N,
  minus the text the conversations' buffers hold (estimated from a sample of conversations).

Floors, same run:

- the raw tick (what ratios are given to): the tick's very payloads sent to no-op async actors
  (one per host, ``--mode inprocess``: in-process objects through ``LocalRef``) — the users'
  messages split per host as ``add_many`` splits them, one call per agent carrying its query (a
  ``context()`` must at least send it), the replies split per host — plus a raw DuckDB Arrow
  insert of the tick's rows into a bare table (``_harness.raw_arrow_insert``);
- as before: a Ray no-op round trip per agent per tick, i.e. ``--agents`` pipelined no-op calls.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from typing import Any

import numpy as np

import memray
from benchmarks._harness import (
    FIRST,
    common_args,
    emit,
    gathered,
    growth,
    host_calls,
    in_data_dir,
    log,
    pct_ms,
    plot_bars,
    ratio,
    raw_arrow_insert,
    run_clients,
    sinks,
)
from memray.config import default_hosts
from memray.ids import ConversationKey
from memray.models import Message
from memray.simulation import _script as script_line
from memray.simulation import simulate
from memray.store.rows import message_to_row

APP = "sim"


class SearchableProbe:
    """Marks a few agents' messages per tick and measures ack → found by search."""

    def __init__(self, mem: memray.Memory, probes: int, poll_s: float, timeout_s: float = 60.0) -> None:
        self.mem = mem
        self.probes = probes
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.lags: list[float] = []
        self.timeouts = 0
        self.tasks: list[asyncio.Task[None]] = []
        self.agents = 1

    def marker(self, agent: int, turn: int) -> str:
        return f"zqmark{turn}x{agent}"

    def probed(self, agent: int, turn: int) -> bool:
        step = max(1, self.agents // max(1, self.probes))
        return agent % step == turn % step and agent // step < self.probes

    def decorate(self, agent: int, turn: int, text: str) -> str:
        return f"{text} {self.marker(agent, turn)}" if self.probed(agent, turn) else text

    async def on_ack(self, turn: int, handles: list[Any], seqs: list[list[int]]) -> None:
        t_ack = time.perf_counter()
        for agent, handle in enumerate(handles):
            if self.probed(agent, turn):
                self.tasks.append(
                    asyncio.create_task(self._poll(handle, self.marker(agent, turn), f"t{turn}-u", t_ack))
                )

    async def _poll(self, handle: Any, marker: str, msg_id: str, t_ack: float) -> None:
        while time.perf_counter() - t_ack < self.timeout_s:
            hits = await handle.asearch(marker, limit=3)
            if any(h.message.id == msg_id for h in hits):
                self.lags.append(time.perf_counter() - t_ack)
                return
            await asyncio.sleep(self.poll_s)
        self.timeouts += 1

    async def finish(self) -> dict[str, Any]:
        await asyncio.gather(*self.tasks)
        return {**pct_ms(self.lags), "timeouts": self.timeouts}


async def noop_floor(mode: str, hosts: int, agents: int) -> dict[str, Any]:
    refs = sinks(mode, hosts)
    keys = [ConversationKey.of(APP, f"agent-{a}", "main") for a in range(agents)]
    await asyncio.gather(*(r.ping() for r in refs))
    t0 = time.perf_counter()
    await asyncio.gather(*(refs[k.route(hosts)].noop(k) for k in keys))
    one = time.perf_counter() - t0
    lat, _ = await run_clients(1, 200, lambda i: refs[0].ping())
    return {"tick_of_noop_calls_ms": round(one * 1000, 2), "round_trip": pct_ms(lat)}


async def raw_tick_floor(mode: str, hosts: int, agents: int, root: str, repeat: int = 3) -> dict[str, Any]:
    """The raw floor of one tick (see the module docstring): best of ``repeat``."""
    refs = sinks(mode, hosts)
    keys = [ConversationKey.of(APP, f"agent-{a}", "main") for a in range(agents)]
    rng = random.Random(7)
    lines = [script_line(a, 3, rng)[0] for a in range(agents)]
    users = [Message(id="t3-u", role="user", parts=text) for text in lines]  # type: ignore[arg-type]
    replies = [Message(id="t3-a", role="assistant", parts=f"Noted (3): {t[:60]}") for t in lines]  # type: ignore[arg-type]

    async def add_many(msgs: list[Message]) -> None:
        groups: dict[int, list[tuple[ConversationKey, list[Message]]]] = {}
        for k, m in zip(keys, msgs):
            groups.setdefault(k.route(hosts), []).append((k, [m]))
        await asyncio.gather(*(refs[h].noop(g, False) for h, g in groups.items()))

    await asyncio.gather(*(r.ping() for r in refs))
    calls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await add_many(users)
        await asyncio.gather(*(refs[k.route(hosts)].noop(k, q) for k, q in zip(keys, lines)))
        await add_many(replies)
        calls.append(time.perf_counter() - t0)
    rows = [message_to_row(k, m.model_copy(update={"seq": 1})) for k, m in zip(keys * 2, users + replies)]
    inserts = [raw_arrow_insert(os.path.join(root, f"raw-tick-{i}.duckdb"), rows, len(rows)) for i in range(repeat)]
    calls_ms = min(calls) * 1000
    insert_ms = len(rows) / max(inserts) * 1000
    return {
        "calls_ms": round(calls_ms, 2),
        "arrow_insert_ms": round(insert_ms, 2),
        "tick_ms": round(calls_ms + insert_ms, 2),
        "rows": len(rows),
    }


async def batched_tick_floor(mem: memray.Memory, agents: int, turn: int, repeat: int = 3) -> dict[str, Any]:
    """The floor of one batched tick (best of ``repeat``): the tick's calls — the users'
    ``add_many`` (one call per host), the contexts (one call per host with the recent-message
    requests, one per shard with the searches), the replies' ``add_many`` — each sent to a no-op
    actor (through Ray in ray mode) with the very bytes memray's call carries both ways (the
    answers memray's hosts and shards gave, captured once beforehand), plus the raw scoring of
    the same queries over the same vectors and texts (numpy top-k + BM25 per conversation,
    :mod:`benchmarks._raw`)."""
    from benchmarks._raw import RawBm25, RawExact
    from memray.conversation.reads import ContextRead
    from memray.models.wire import MessageBatch
    from memray.simulation import RECENT

    session = mem.internals.session
    recall, router = session.recall, session.router
    convs = [mem.conversation(user_id=f"agent-{a}", conversation_id="main", app=APP) for a in range(agents)]
    rng = random.Random(11)
    lines = [script_line(a, turn, rng)[0] for a in range(agents)]
    hosts = len(session.hosts)

    def per_host(text_of: Any, role: str, msg_id: str) -> dict[int, Any]:
        parts: dict[int, list[tuple[ConversationKey, list[Message]]]] = {}
        for c, line in zip(convs, lines):
            msg = Message(id=msg_id, role=role, parts=text_of(line))  # type: ignore[arg-type]
            parts.setdefault(c.key.route(hosts), []).append((c.key, [msg]))
        wire = MessageBatch.encode if mem.config.mode == "ray" else list
        return {h: wire(part) for h, part in parts.items()}

    users = per_host(lambda t: t, "user", f"t{turn}-u")
    replies = per_host(lambda t: f"Noted ({turn}): {t[:60]}", "assistant", f"t{turn}-a")
    reads = [ContextRead(c.key, line, RECENT, 3) for c, line in zip(convs, lines)]
    encoded = await mem.internals.arun(recall._encode_many([(r.query or "", r.mode) for r in reads]))
    searches = [
        recall._request(r.key, r.scope, r.query or "", r.limit + r.semantic_limit, None, e, None, None, True)
        for r, e in zip(reads, encoded)
    ]
    recent: dict[int, list[tuple[ConversationKey, int]]] = {}
    for r in reads:
        recent.setdefault(r.key.route(hosts), []).append((r.key, r.limit))
    by_shard: dict[int, list[Any]] = {}
    for search in searches:
        for s, part in router._fanout(search).items():
            by_shard.setdefault(s, []).append(part)
    # the answers memray gives to these calls, and what the raw scoring searches
    host_answers = await mem.internals.arun(gathered(session.hosts[h].recent_many(part) for h, part in recent.items()))
    shard_answers = await mem.internals.arun(
        gathered(router.shards[s].search_many(part) for s, part in by_shard.items())
    )
    history = await mem.internals.arun(
        gathered(session.hosts[h].recent_many([(k, 4 * turn + 8) for k, _ in part]) for h, part in recent.items())
    )
    host_sinks, shard_sinks = sinks(mem.config.mode, hosts), sinks(mem.config.mode, len(router.shards))
    await asyncio.gather(*(host_sinks[h].hold(a) for h, a in zip(recent, host_answers)))
    await asyncio.gather(*(shard_sinks[s].hold(a) for s, a in zip(by_shard, shard_answers)))
    calls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await asyncio.gather(*(host_sinks[h].noop(part, False) for h, part in users.items()))
        await asyncio.gather(
            *(host_sinks[h].answer(part) for h, part in recent.items()),
            *(shard_sinks[s].answer(part) for s, part in by_shard.items()),
        )
        await asyncio.gather(*(host_sinks[h].noop(part, False) for h, part in replies.items()))
        calls.append(time.perf_counter() - t0)
    texts_of = {
        k: [m.text for m in msgs if m.text]
        for part, got in zip(recent.values(), history)
        for (k, _), (msgs, _) in zip(part, got)
    }
    embedder = session.embedder
    raw = []
    for c in convs:
        texts = texts_of.get(c.key) or [""]
        vectors = embedder.embed(texts) if embedder is not None else np.zeros((len(texts), 1), dtype=np.float32)
        raw.append((RawExact(vectors), RawBm25(texts)))
    qv = [e.vector for e in encoded]
    scoring = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for (exact, bm25), q, line in zip(raw, qv, lines):
            if q is not None:
                exact.topk(q, RECENT + 3)
            bm25.topk(line, RECENT + 3)
        scoring.append(time.perf_counter() - t0)
    calls_ms, scoring_ms = min(calls) * 1000, min(scoring) * 1000
    return {
        "calls_ms": round(calls_ms, 2),
        "raw_scoring_ms": round(scoring_ms, 2),
        "tick_ms": round(calls_ms + scoring_ms, 2),
        "calls": 2 * len(users) + len(recent) + len(by_shard),
    }


async def coalesced_vs_batch(mem: memray.Memory, agents: int, turn: int, repeat: int = 3) -> dict[str, Any]:
    """Every agent's ``context()`` of a tick, alternately as one explicit ``acontext_many`` and
    as ``agents`` concurrent ``acontext()`` calls (coalesced on this loop), ``repeat`` times each."""
    from memray.simulation import RECENT

    convs = [mem.conversation(user_id=f"agent-{a}", conversation_id="main", app=APP) for a in range(agents)]
    rng = random.Random(13)
    lines = [script_line(a, turn, rng)[0] for a in range(agents)]
    calls = [memray.ContextCall(c, line, RECENT, 3) for c, line in zip(convs, lines)]
    explicit: list[float] = []
    coalesced: list[float] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await mem.acontext_many(calls)
        explicit.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await asyncio.gather(*(c.acontext(line, limit=RECENT, semantic_limit=3) for c, line in zip(convs, lines)))
        coalesced.append(time.perf_counter() - t0)
    return {
        "context_many": pct_ms(explicit),
        "concurrent_acontext": pct_ms(coalesced),
        "ratio_p50": ratio(pct_ms(coalesced)["p50_ms"], pct_ms(explicit)["p50_ms"]),
    }


async def resident_bytes(mem: memray.Memory) -> int:
    """The resident memory of every process of this memray on this machine: the driver, the
    hosts, the shards and the stores (each process once; in-process, the driver alone)."""
    dep = mem.internals.deployment
    pids = {os.getpid()}
    if mem.config.mode == "ray":
        got = await mem.internals.arun(
            gathered(
                [
                    *(h.stats() for h in dep.hosts),
                    *(s.pid() for s in dep.shards),
                    *(c.pid() for c in dep.stores.clients),
                ]
            )
        )
        pids |= {g["pid"] if isinstance(g, dict) else int(g) for g in got}
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


async def rss_per_conversation(cfg: memray.MemoryConfig, agents: int, turns: int) -> dict[str, Any]:
    """Reopen with fresh hosts; RSS before/after loading every conversation, per conversation."""
    mem = memray.open(config=cfg)
    try:
        keys = [ConversationKey.of(APP, f"agent-{a}", "main") for a in range(agents)]

        async def rss() -> tuple[int, int]:
            stats = await host_calls(mem, lambda h: h.stats())
            by_pid = {s["pid"]: s["rss_bytes"] for s in stats}
            return sum(by_pid.values()), sum(s["conversations"] for s in stats)

        warm = max(10, len(keys) // 20)  # one-time costs (imports, first allocations) land here
        await mem.aadd_many([(k, []) for k in keys[:warm]])
        await asyncio.sleep(0.2)
        before, n0 = await rss()
        for i in range(warm, len(keys), 5000):
            await mem.aadd_many([(k, []) for k in keys[i : i + 5000]])
        await asyncio.sleep(0.5)
        after, n1 = await rss()
        sample = keys[:: max(1, len(keys) // 100)]
        texts = 0
        for k in sample:
            msgs = await mem.conversation(k.user_id, k.conversation_id, k.app).amessages(limit=cfg.buffer_window)
            texts += sum(len(m.text.encode()) for m in msgs)
        content = texts / len(sample)
        loaded = max(1, n1 - n0)
        per = (after - before) / loaded
        return {
            "conversations_loaded": n1 - n0,
            "rss_before_mib": round(before / 2**20, 1),
            "rss_after_mib": round(after / 2**20, 1),
            "rss_per_conversation_bytes": round(per),
            "content_bytes_per_conversation": round(content),
            "overhead_per_conversation_bytes": round(per - content),
            "messages_per_conversation": 2 * turns,
        }
    finally:
        mem.close(terminate=True)


async def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    cfg = memray.MemoryConfig(
        path=os.path.join(root, "mem"),
        mode=args.mode,
        hosts=args.hosts,
        shards=args.shards,
        address=args.address,
        embedder=memray.EmbedderConfig(kind=args.embedder),
    )
    mem = memray.open(config=cfg)
    try:
        probe = SearchableProbe(mem, args.probes, args.poll_ms / 1000.0)
        probe.agents = args.agents
        await host_calls(mem, lambda h: h.durable_lag(True))
        rss_open = await resident_bytes(mem)
        log(f"simulating {args.agents} agents x {args.turns} turns")
        report = await simulate(
            mem, args.agents, args.turns, app=APP, seed=args.seed, decorate=probe.decorate, on_ack=probe.on_ack
        )
        rss_run = await resident_bytes(mem)
        searchable = await probe.finish()
        parts = await host_calls(mem, lambda h: h.durable_lag(True, True))
        samples = [x for p in parts for x in p["samples"]]
        durable = {**pct_ms(samples), "max_ms": round(max(samples) * 1000, 2) if samples else 0.0}
        batched: dict[str, Any] = {}
        coalescing: dict[str, Any] = {}
        if not args.skip_floors:
            log("floors: the batched tick's calls to no-op actors, raw scoring")
            batched = await batched_tick_floor(mem, args.agents, args.turns)
            log("concurrent acontext() against one context_many")
            coalescing = await coalesced_vs_batch(mem, args.agents, args.turns)
            floor = await noop_floor(args.mode, args.hosts, args.agents)
            raw = await raw_tick_floor(args.mode, args.hosts, args.agents, root)
        else:
            floor, raw = {"tick_of_noop_calls_ms": 0.0}, {"tick_ms": 0.0}
    finally:
        await mem.aclose(terminate=True)  # the memory phase needs fresh hosts
    mem_stats: dict[str, Any] = {}
    if not args.skip_rss:
        log("memory per idle conversation")
        mem_stats = await rss_per_conversation(cfg, args.agents, args.turns)
    tick_p50 = report.extras["tick_p50_ms"]
    tick_max = 50 if args.mode == "inprocess" else 1000
    return {
        "ticks": report.extras["ticks"],
        "tick_p50_ms": tick_p50,
        "tick_p99_ms": report.extras["tick_p99_ms"],
        "tick_ms": report.extras["tick_ms"],
        "steady_tick_p50_ms": pct_ms([t / 1000 for t in report.extras["tick_ms"][FIRST:]])["p50_ms"] or None,
        "growth": growth(report.extras["tick_ms"]),
        "recall_ms": report.extras["recall_ms"],
        "ticks_per_s": report.extras["ticks_per_s"],
        "messages": report.messages,
        "seconds": report.seconds,
        "messages_per_s": report.messages_per_s,
        "add_many_p50_ms": report.add_p50_ms,
        "add_many_p99_ms": report.add_p99_ms,
        "context_many_p50_ms": report.recall_p50_ms,
        "context_many_p99_ms": report.recall_p99_ms,
        "recall_hit_rate": report.recall_hit_rate,
        "degraded": report.degraded,
        "durable_lag": durable,
        "searchable_lag": searchable,
        "resident": {
            "at_open_mib": round(rss_open / 2**20, 1),
            "after_run_mib": round(rss_run / 2**20, 1),
            "per_agent_bytes": round((rss_run - rss_open) / args.agents),
            "kind": "RSS of the driver and every actor process, after the ticks minus at open",
        },
        "memory": mem_stats,
        "verified": report.verified,
        "missing": report.missing,
        "unexpected": report.extra,
        "batched_floor": {
            **batched,
            "kind": "one call per host and per shard with the same bytes both ways, to no-op actors"
            + (" through Ray" if args.mode == "ray" else "")
            + ", plus raw numpy + BM25 scoring of the same queries over each conversation's vectors and texts",
        },
        "coalescing": coalescing,
        "floor": {
            **floor,
            "kind": "ray no-op round trips, one per agent" if args.mode == "ray" else "in-process LocalRef no-op calls",
        },
        "raw_floor": {
            **raw,
            "kind": "the tick's payloads to no-op async actors, one context call per agent"
            + (" through Ray" if args.mode == "ray" else "")
            + " + a raw DuckDB Arrow insert of its rows",
        },
        "tick_ratio_to_batched_floor": ratio(tick_p50, batched.get("tick_ms", 0.0)),
        "tick_ratio_to_raw_floor": ratio(tick_p50, raw["tick_ms"]),
        "tick_ratio_to_noop_tick": ratio(tick_p50, floor["tick_of_noop_calls_ms"]),
        "context_p99_over_p50": ratio(report.recall_p99_ms, report.recall_p50_ms),
        "targets": {
            "tick_ms_max": tick_max,
            "tick_ok": tick_p50 <= tick_max,
            "tick_ratio_to_batched_floor_max": 3.0 if args.mode == "inprocess" else 2.0,
            "tick_ratio_ok": bool(batched)
            and tick_p50 <= (3.0 if args.mode == "inprocess" else 2.0) * batched["tick_ms"],
            "coalesced_over_explicit_max": 1.3,
            "coalesced_ok": bool(coalescing) and (coalescing["ratio_p50"] or 0.0) <= 1.3,
            "recall_hit_rate_ok": report.recall_hit_rate in (None, 1.0),
            "durable_lag_p99_ok": durable["p99_ms"] <= 1000,
            "idle_overhead_ok": bool(mem_stats) and mem_stats["overhead_per_conversation_bytes"] <= 16 * 1024,
            "exactly_acknowledged": report.verified,
        },
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--hosts", type=int, default=None, help="default: as many as memray.open() starts here")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--probes", type=int, default=4, help="agents per tick whose message is polled for by search")
    ap.add_argument("--poll-ms", type=float, default=25.0)
    ap.add_argument("--skip-rss", action="store_true", help="skip the memory-per-conversation phase")
    ap.add_argument("--embedder", default=memray.EmbedderConfig().kind, help="embedder kind (default: memray's)")
    ap.add_argument(
        "--skip-floors",
        action="store_true",
        help="skip the floors and the coalescing comparison (the 100,000-agent run)",
    )
    common_args(ap)
    args = ap.parse_args(argv)
    if args.hosts is None:  # as many as memray.open() starts here (the floors send to as many)
        args.hosts = default_hosts(args.address, None)
    results = in_data_dir(args, "memray-sim-", lambda root: asyncio.run(run(args, root)))
    if args.plot:
        plot_bars(
            args.plot,
            f"{args.agents} agents: latencies (ms)",
            ["tick", "context_many", "add_many", "durable lag", "searchable lag"],
            {
                "p50": [
                    results["tick_p50_ms"],
                    results["context_many_p50_ms"],
                    results["add_many_p50_ms"],
                    results["durable_lag"]["p50_ms"],
                    results["searchable_lag"]["p50_ms"],
                ],
                "p99": [
                    results["tick_p99_ms"],
                    results["context_many_p99_ms"],
                    results["add_many_p99_ms"],
                    results["durable_lag"]["p99_ms"],
                    results["searchable_lag"]["p99_ms"],
                ],
                "floor: batched calls + raw scoring": [results["batched_floor"].get("tick_ms", 0), 0, 0, 0, 0],
                "floor: no-op tick": [results["floor"]["tick_of_noop_calls_ms"], 0, 0, 0, 0],
            },
            "ms",
            log_y=True,
        )
    params = {k: v for k, v in vars(args).items() if k not in ("plot", "dir")}
    return emit("simulate_agents", params, results)


if __name__ == "__main__":
    main()
