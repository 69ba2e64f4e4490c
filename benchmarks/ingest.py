"""Ingest: messages/s acknowledged and durable lag, for ``add_many`` and for per-conversation ``add``.

    python -m benchmarks.ingest --conversations 10000 --hosts 4 --messages 200000 --batch 10000 \
        --clients 64 --add-messages 20000 --plot benchmarks/results/ingest.png

Phases (after a warm-up round that loads every conversation into its host):

1. ``aadd_many``: ``--messages`` messages, one per conversation per batch, ``--batch`` messages
   per call, ``--inflight`` calls in flight; acknowledged = the call returned (``durable=False``).
   With backpressure on (``MemoryConfig.max_unpersisted``, per host) a call past the bound waits,
   so this rate is what the hosts can make durable: the maximum rate.
1b. steady ``aadd_many`` at ``--sustain`` (0.8) of that rate for ``--sustain-s`` seconds: the rate
   reached and its durable lag (the issue-11 target: p99 ≤ 1 s at ≥ 80% of the maximum rate).
2. ``aadd``: ``--clients`` concurrent asyncio clients, each adding one message at a time to its
   own conversations, ``--add-messages`` in all, once everything before is indexed.

With ``--stores N`` the history is N partitions (``MemoryConfig.stores``); ``store`` reports each
partition's own busy time in message commits during phase 1 (``HistoryStore.write_stats``: wall
seconds, and the CPU seconds of its process meanwhile — on a shared machine the wall time also
holds waits for a core), its rows per busy second, and the store-side time per row: the busiest
partition's time over all rows (the partitions commit in parallel, so that is the store's share
of the wall time).

Durable lag (acknowledged → committed) is measured inside the hosts, per message
(``ConversationHost.durable_lag``), so it is exact. Floors, measured in the same run:

- Ray no-op calls: the same payloads, split per host the same way, to no-op async actors (one per
  host), with the same pipelining / the same client concurrency (``--mode inprocess``: the same
  calls to in-process objects through ``LocalRef``).
- DuckDB: ``HistoryStore.append_messages`` of the same rows on a fresh file, in batches of the
  average group-commit size of phase 1, and the raw floor: a bare table taking the same rows as
  Arrow inserts (``_harness.raw_arrow_insert``). Ratios are given to the raw floors (Ray no-op
  calls, raw Arrow insert) and to ``HistoryStore`` alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from typing import Any

import memray
from benchmarks._harness import (
    SinkClient,
    common_args,
    emit,
    host_calls,
    in_data_dir,
    log,
    pct_ms,
    pipelined,
    plot_bars,
    ratio,
    raw_arrow_insert,
    run_clients,
    sentence,
    sinks,
)
from memray.ids import ConversationKey
from memray.models import Message
from memray.store.history import HistoryStore
from memray.store.rows import MessageRow, message_to_row


def make_batches(
    keys: list[ConversationKey], total: int, batch: int, rng: random.Random, tag: str
) -> list[list[tuple[ConversationKey, list[Message]]]]:
    """``total`` messages, one per conversation per batch, cycling through ``keys``."""
    texts = [sentence(rng, 12) for _ in range(256)]
    out, cur = [], []
    for n in range(total):
        key = keys[n % len(keys)]
        cur.append((key, [Message(id=f"{tag}-{n}", role="user" if n % 2 else "assistant", parts=texts[n % 256])]))  # type: ignore[arg-type]
        if len(cur) == batch:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


async def lags(mem: memray.Memory, reset: bool) -> dict[str, Any]:
    """Merge every host's durable-lag samples; ``reset`` clears them."""
    parts = await host_calls(mem, lambda h: h.durable_lag(reset, True))
    samples = [x for p in parts for x in p["samples"]]
    out = pct_ms(samples)
    out["max_ms"] = round(max(samples) * 1000, 3) if samples else 0.0
    return out


def split(
    batch: list[tuple[ConversationKey, list[Message]]], hosts: int
) -> dict[int, list[tuple[ConversationKey, list[Message]]]]:
    groups: dict[int, list[tuple[ConversationKey, list[Message]]]] = {}
    for key, msgs in batch:
        groups.setdefault(key.route(hosts), []).append((key, msgs))
    return groups


async def floor_ray(
    refs: list[SinkClient],
    batches: list[Any],
    inflight: int,
    per_conv: list[tuple[ConversationKey, Message]],
    clients: int,
) -> dict[str, Any]:
    await asyncio.gather(*(r.ping() for r in refs))
    n = len(refs)

    async def many(batch: Any) -> None:
        await asyncio.gather(*(refs[h].noop(g, False) for h, g in split(batch, n).items()))

    secs = await pipelined(batches, inflight, many)
    total = sum(len(b) for b in batches)
    lat, wall = await run_clients(
        clients, len(per_conv), lambda i: refs[per_conv[i][0].route(n)].noop(per_conv[i][0], [per_conv[i][1]], False)
    )
    return {
        "add_many_msgs_per_s": round(total / secs),
        "add_msgs_per_s": round(len(per_conv) / wall),
        "add_latency": pct_ms(lat),
    }


def floor_duckdb(tmp: str, rows: list[MessageRow], batch: int) -> dict[str, Any]:
    chunks = [rows[i : i + batch] for i in range(0, len(rows), batch)]
    store = HistoryStore(os.path.join(tmp, "floor-store.duckdb"))
    store.open()
    t0 = time.perf_counter()
    for c in chunks:
        store.append_messages(c)
    store_rate = len(rows) / (time.perf_counter() - t0)
    store.close()
    raw_rate = raw_arrow_insert(os.path.join(tmp, "floor-raw.duckdb"), rows, batch)
    return {
        "history_store_rows_per_s": round(store_rate),
        "raw_arrow_insert_rows_per_s": round(raw_rate),
        "batch_rows": batch,
    }


async def sustained(
    mem: memray.Memory, keys: list[ConversationKey], rate: float, seconds: float, rng: random.Random
) -> dict[str, Any]:
    """``add_many`` at a steady ``rate`` messages/s for ``seconds`` (one call every 50 ms, one
    message per conversation per call, blocking when a host is at its backpressure bound);
    the rate reached and the durable lag of those messages."""
    per_call = max(1, round(rate / 20))
    calls = max(1, round(seconds * 20))
    batches = make_batches(keys, per_call * calls, per_call, rng, "steady")
    await lags(mem, True)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    pending: list[asyncio.Task[Any]] = []
    for i, b in enumerate(batches):
        delay = t0 + i / 20 - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)  # pacing the load generator, not synchronising a test
        pending.append(asyncio.create_task(mem.aadd_many(b)))
    await asyncio.gather(*pending)
    wall = loop.time() - t0
    await mem.aflush()
    return {
        "target_msgs_per_s": round(rate),
        "msgs_per_s": round(per_call * calls / wall),
        "seconds": round(wall, 3),
        "durable_lag": await lags(mem, True),
    }


def partition_busy(before: list[dict[str, float]], after: list[dict[str, float]], rows: int) -> dict[str, Any]:
    """Each partition's commits, rows and busy seconds between two ``write_stats`` readings."""
    parts = []
    for i, (b, a) in enumerate(zip(before, after)):
        busy, cpu, n = a["busy_s"] - b["busy_s"], a["cpu_s"] - b["cpu_s"], int(a["rows"] - b["rows"])
        parts.append(
            {
                "partition": i,
                "rows": n,
                "commits": int(a["commits"] - b["commits"]),
                "busy_s": round(busy, 3),
                "cpu_s": round(cpu, 3),
                "rows_per_busy_s": round(n / busy) if busy else 0,
                "rows_per_cpu_s": round(n / cpu) if cpu else 0,
            }
        )
    out: dict[str, Any] = {"partitions": parts}
    for kind in ("busy", "cpu"):  # the critical path is the busiest partition: they commit in parallel
        out[f"{kind}_us_per_row"] = round(max(p[f"{kind}_s"] for p in parts) / max(1, rows) * 1e6, 3)
        out[f"total_{kind}_us_per_row"] = round(sum(p[f"{kind}_s"] for p in parts) / max(1, rows) * 1e6, 3)
    return out


async def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    rng = random.Random(args.seed)
    cfg = memray.MemoryConfig(
        path=os.path.join(root, "mem"),
        mode=args.mode,
        hosts=args.hosts,
        shards=args.shards,
        stores=args.stores,
        address=args.address,
        embedder=memray.EmbedderConfig(kind=args.embedder),
        **({} if args.max_unpersisted is None else {"max_unpersisted": args.max_unpersisted}),
    )
    mem = memray.open(config=cfg)
    try:
        keys = [
            ConversationKey.of("bench", f"user-{c % max(1, args.conversations // 4)}", f"conv-{c}")
            for c in range(args.conversations)
        ]
        log(f"warm-up: loading {len(keys)} conversations")
        for warm in make_batches(keys, len(keys), args.batch, rng, "warm"):
            await mem.aadd_many(warm)
        await mem.aflush()
        await lags(mem, True)
        batches = make_batches(keys, args.messages, args.batch, rng, "many")
        log(f"add_many: {args.messages} messages in {len(batches)} calls")
        commits0 = sum(s["commits"] for s in await host_calls(mem, lambda h: h.stats()))
        busy0 = await mem.internals.deployment.stores.write_stats()
        secs = await pipelined(batches, args.inflight, mem.aadd_many)
        t_ack = time.perf_counter()
        await mem.aflush()
        flushed_s = time.perf_counter() - t_ack
        store = partition_busy(busy0, await mem.internals.deployment.stores.write_stats(), args.messages)
        stats = await host_calls(mem, lambda h: h.stats())
        commits = sum(s["commits"] for s in stats) - commits0
        many_lag = await lags(mem, True)
        many_rate = args.messages / secs
        log(f"steady add_many at {args.sustain:.0%} of {many_rate:.0f} msgs/s for {args.sustain_s} s")
        steady = await sustained(mem, keys, args.sustain * many_rate, args.sustain_s, rng)
        per_conv = [
            (keys[n % len(keys)], Message(id=f"one-{n}", role="user", parts=sentence(rng, 12)))
            for n in range(args.add_messages)
        ]  # type: ignore[arg-type]
        handles = {k: mem.conversation(k.user_id, k.conversation_id, k.app) for k in keys}
        # the per-conversation phase measures add alone, not add beside the steady phase's
        # indexing (which still ran for seconds: 250-680 messages/s depending on how much)
        await mem.await_indexed(timeout_s=600)
        log(f"add: {args.add_messages} messages from {args.clients} clients")
        lat, wall = await run_clients(
            args.clients, len(per_conv), lambda i: handles[per_conv[i][0]].aadd([per_conv[i][1]])
        )
        await mem.aflush()
        add_lag = await lags(mem, True)
        log("floors: no-op calls")
        floor_calls = await floor_ray(sinks(args.mode, args.hosts), batches, args.inflight, per_conv, args.clients)
    finally:
        await mem.aclose()
    rows = []
    for b in batches:
        for key, msgs in b:
            m = msgs[0].model_copy(update={"seq": 1})
            rows.append(message_to_row(key, m))
    group = max(1, round(args.messages / max(1, commits)))
    log(f"floors: DuckDB, {len(rows)} rows in batches of {group}")
    floor_db = floor_duckdb(root, rows, group)
    add_rate = len(per_conv) / wall
    return {
        "add_many": {
            "msgs_per_s": round(many_rate),
            "seconds": round(secs, 3),
            "flush_after_ack_s": round(flushed_s, 3),
            "group_commits": commits,
            "avg_rows_per_commit": group,
            "durable_lag": many_lag,
            "ratio_to_ray_noop": ratio(many_rate, floor_calls["add_many_msgs_per_s"]),
            "ratio_to_history_store": ratio(many_rate, floor_db["history_store_rows_per_s"]),
            "ratio_to_raw_arrow_insert": ratio(many_rate, floor_db["raw_arrow_insert_rows_per_s"]),
        },
        "steady": {**steady, "fraction_of_max": ratio(steady["msgs_per_s"], many_rate)},
        "store": store,
        "add": {
            "msgs_per_s": round(add_rate),
            "latency": pct_ms(lat),
            "durable_lag": add_lag,
            "ratio_to_noop": ratio(add_rate, floor_calls["add_msgs_per_s"]),
        },
        "floor": {
            "calls": floor_calls,
            "calls_kind": "ray no-op async actors" if args.mode == "ray" else "in-process LocalRef no-op",
            "duckdb": floor_db,
        },
        "targets": {
            "add_many_msgs_per_s_min": 20_000,
            "durable_lag_p99_ms_max": 1000,
            "add_many_ok": many_rate >= 20_000,
            "add_many_to_ray_noop_min": 0.8,
            "add_many_to_ray_noop_ok": many_rate >= 0.8 * floor_calls["add_many_msgs_per_s"],
            "steady_lag_ok": steady["durable_lag"]["p99_ms"] <= 1000 and steady["msgs_per_s"] >= 0.8 * many_rate,
            "lag_ok": many_lag["p99_ms"] <= 1000,
        },
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=10_000)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--stores", type=int, default=1, help="history partitions (MemoryConfig.stores)")
    ap.add_argument("--messages", type=int, default=200_000, help="messages through add_many")
    ap.add_argument("--batch", type=int, default=10_000, help="messages per add_many call")
    ap.add_argument("--inflight", type=int, default=4, help="add_many calls in flight")
    ap.add_argument("--clients", type=int, default=64, help="concurrent per-conversation add clients")
    ap.add_argument("--add-messages", type=int, default=20_000, help="messages through per-conversation add")
    ap.add_argument("--embedder", choices=["hash", "none"], default="hash")
    ap.add_argument("--max-unpersisted", type=int, default=None, help="backpressure bound per host (0: none)")
    ap.add_argument("--sustain", type=float, default=0.8, help="steady phase: this share of the add_many rate")
    ap.add_argument("--sustain-s", type=float, default=10.0, help="steady phase: seconds")
    common_args(ap)
    args = ap.parse_args(argv)
    results = in_data_dir(args, "memray-ingest-", lambda root: asyncio.run(run(args, root)))
    params = {k: v for k, v in vars(args).items() if k not in ("plot", "dir")}
    if args.plot:
        m, f = results["add_many"], results["floor"]
        plot_bars(
            args.plot,
            "ingest: messages/s (acknowledged) vs floors",
            ["add_many", "add (per conversation)"],
            {
                "memray": [m["msgs_per_s"], results["add"]["msgs_per_s"]],
                "floor: no-op calls": [f["calls"]["add_many_msgs_per_s"], f["calls"]["add_msgs_per_s"]],
                "floor: HistoryStore.append": [f["duckdb"]["history_store_rows_per_s"], 0],
                "floor: raw Arrow insert": [f["duckdb"]["raw_arrow_insert_rows_per_s"], 0],
            },
            "messages/s",
            log_y=True,
        )
    return emit("ingest", params, results)


if __name__ == "__main__":
    main()
