"""A tick as a user writes it (``examples/tick.py``), on ``memray.open()``'s defaults, beside
its full floor measured in the same run; memory operations per second.

    python -m benchmarks.user_tick --agents 1000 --ticks 25 --mode inprocess
    python -m benchmarks.user_tick --agents 10000 --ticks 25           # ray mode: the default

Runs the example's two styles, each in a fresh data directory with ``memray.open(path,
mode=...)`` and nothing else set: ``batches`` (``aadd_many``, ``acontext_many``, ``aadd_many``)
and ``coroutines`` (one coroutine per agent awaiting ``aadd`` / ``acontext`` / ``aadd``,
coalesced by memray). Every tick is timed from the driver; a tick is 3 memory operations per
agent (two adds and a context), so ``ops_per_s = 3 * agents / tick``.

``growth`` compares like with like (the target: no growth with history, <= 1.3): the example's
ticks are of two kinds, a question about the first tick's fact (ticks 3, 5, 7, ...) or a plain
statement, and a question tick recalls more. So it is the larger, over the two kinds, of the mean
of the kind's last four ticks over the mean of its first four from tick 3 (fewer in a short run:
half of the kind's ticks each). Means, not single ticks: in process the background work of the
adds (indexing, the store's commits) lands in every other tick or so, so single ticks of one
kind moved 2-4x between runs of the same code (its previous form, the last tick of a kind over
the first, read 2.07 and 2.93 in two runs a minute apart; these means, 1.32 and 1.45 on the
second). ``tick8_over_tick3``, the first form of this figure, divided a statement tick by a
question tick, which hid the growth of the question ticks: over 25 ticks of 1,000 agents in
process they grew 0.9 -> 1.6 s while it read ~1.0. Run ``--ticks 25`` to see what grows.

``shard_work`` is what the shards' upserts cost an item and their searches a query over the run,
in CPU microseconds of the threads that ran them (``VectorShard.work_stats``): the live figures
of ``benchmarks/shard_upsert_micro.py`` and ``benchmarks/search_micro.py``, which a busy
machine's waiting for a core does not inflate.

The **full floor** of a tick is the raw work with no memray code, on the last tick's data:

- the default embedder (the static table) on the tick's distinct texts;
- DuckDB taking the tick's rows (``MessageRow``, as memray stores them) from one Arrow table
  in one transaction (``_harness.raw_arrow_insert``);
- the tick's vectors written into a preallocated float32 matrix (what an exact index does with
  them: memray searches a conversation exactly below ``IndexConfig.exact_threshold`` messages, so
  an hnswlib ``add_items`` — 0.45 s for 2,000 vectors into an index of 16,000 here — would
  inflate the floor with work nobody needs), and the BM25 postings of the tick's texts
  (:class:`benchmarks._raw.RawBm25` built over them);
- the raw scoring of the tick's queries, per agent over its own conversation (numpy top-k over
  its vectors + BM25 over its texts);
- in ray mode, one Ray call per host for each of the tick's three operations and one per shard,
  carrying the tick's texts (and the queries' vectors to the shards) as Arrow / numpy buffers,
  to no-op actors.

Prints one JSON line; ``--out`` also writes it to a file (the recorded runs:
``benchmarks/results/user_tick_*.json``); ``python -m benchmarks.render`` writes the table of
those into docs/performance.md and docs/batching.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

import memray
from benchmarks._harness import (
    FIRST,
    LAST,
    emit,
    gathered,
    growth,
    in_data_dir,
    log,
    pct_ms,
    ratio,
    raw_arrow_insert,
    recorded,
    sinks,
)
from benchmarks._raw import RawBm25, RawExact
from memray.ids import ConversationKey
from memray.models import Message
from memray.store.rows import message_to_row

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import tick as example  # noqa: E402  (examples/tick.py: the functions timed here)

Mode = Literal["ray", "inprocess"]


async def run_style(style: str, mode: Mode, agents: int, ticks: int, root: str) -> dict[str, Any]:
    path = os.path.join(root, style)
    mem = memray.open(path, mode=mode)
    try:
        handles = [mem.conversation(user_id=f"agent-{i}", conversation_id="main") for i in range(agents)]
        times: list[float] = []
        recalled, asked = 0, 0
        for t in range(ticks):
            t0 = time.perf_counter()
            hits = await example.STYLES[style](mem, handles, t)
            times.append(time.perf_counter() - t0)
            if example.asks(t):
                recalled, asked = recalled + hits, asked + agents
            log(f"{style} tick {t}: {times[-1] * 1000:.0f} ms")
        await mem.await_indexed()  # (after the timed ticks: the shard work below is the whole run's)
        shards = mem.internals.deployment.shards
        work = await mem.internals.arun(gathered([shard.work_stats() for shard in shards]))
        steady = times[1:] or times
        p50 = pct_ms(steady)["p50_ms"]
        return {
            "tick_ms": [round(x * 1000, 1) for x in times],
            "tick_p50_ms": p50,
            "tick_p99_ms": pct_ms(steady)["p99_ms"],
            "ops_per_s": round(3 * agents / (p50 / 1000)) if p50 else None,
            "growth": like_for_like(times),
            "tick8_over_tick3": growth(times),
            "recall_hit_rate": round(recalled / asked, 4) if asked else None,
            "hosts": mem.config.hosts,  # the defaults' shape on this machine
            "shards": mem.config.shards,
            "shard_work": shard_work(work),
        }
    finally:
        await mem.aclose(terminate=True)


def shard_work(work: list[dict[str, float]]) -> dict[str, float | None]:
    """What the shards' upserts cost an item and their searches a query over the whole run, in
    CPU microseconds of the threads that ran them (``VectorShard.work_stats``, summed over the
    shards), and how many items or queries a call carried: the live figures beside
    ``benchmarks/shard_upsert_micro.py`` and ``benchmarks/search_micro.py``."""
    total = {
        key: sum(w[key] for w in work)
        for key in ("upserts", "upserted", "upsert_cpu_s", "searches", "searched", "search_cpu_s")
    }

    def per(value: float, count: float, scale: float = 1.0) -> float | None:
        return round(value * scale / count, 2) if count else None

    return {
        "upserted": total["upserted"],
        "upsert_us_per_item": per(total["upsert_cpu_s"], total["upserted"], 1e6),
        "items_per_upsert": per(total["upserted"], total["upserts"]),
        "searched": total["searched"],
        "search_us_per_query": per(total["search_cpu_s"], total["searched"], 1e6),
        "queries_per_search": per(total["searched"], total["searches"]),
    }


def like_for_like(times: list[float]) -> float | None:
    """The larger, over question and statement ticks from tick 3, of the mean of the kind's last
    four over the mean of its first four (half its ticks each in a shorter run; module
    docstring); None for a run too short to have two of each."""
    ticks = range(FIRST, len(times))
    kinds = ([t for t in ticks if example.asks(t)], [t for t in ticks if not example.asks(t)])
    if any(len(kind) < 2 for kind in kinds):
        return None
    out = []
    for kind in kinds:
        n = min(4, len(kind) // 2)
        first, last = (statistics.fmean(times[t] for t in part) for part in (kind[:n], kind[-n:]))
        out.append(ratio(last, first) or 0.0)
    return max(out)


async def full_floor(mode: str, agents: int, ticks: int, root: str, hosts: int, shards: int) -> dict[str, Any]:
    """The raw work of the last tick, with the earlier ticks' data in place (module docstring);
    in ray mode its calls go to as many hosts and shards as the runs timed had."""
    from memray.embedding.static import StaticEmbedder

    # the runs just closed left millions of objects: collected now, not inside a timed part (a
    # collection there once made the BM25 postings of 2,000 texts take 0.8-0.95 s instead of 27 ms)
    gc.collect()
    embedder = StaticEmbedder(memo=False)  # the raw work: the runs just timed left their texts in the memo
    last = ticks - 1
    history = [
        [example.said(a, t) for t in range(ticks)] + [example.reply(a, t) for t in range(ticks)] for a in range(agents)
    ]
    said = [example.said(a, last) for a in range(agents)]
    replies = [example.reply(a, last) for a in range(agents)]
    texts = list(dict.fromkeys(said + replies))
    embedder.embed(texts[:64])  # the table loaded, as memray's is
    t0 = time.perf_counter()
    vectors = embedder.embed(texts)
    embed_ms = (time.perf_counter() - t0) * 1000

    rows = []
    for a in range(agents):
        key = ConversationKey("default", f"agent-{a}", "main")
        for n, (role, text) in enumerate((("user", said[a]), ("assistant", replies[a]))):
            msg = Message(id=f"m{last}-{n}", role=role, parts=text, seq=2 * last + n)
            rows.append(message_to_row(key, msg))
    rate = raw_arrow_insert(os.path.join(root, "floor.duckdb"), rows, len(rows))
    insert_ms = len(rows) / rate * 1000

    dim = vectors.shape[1]
    matrix = np.zeros((2 * agents * ticks, dim), dtype=np.float32)  # the earlier ticks' rows, and room
    tick_vectors = np.resize(vectors, (2 * agents, dim))
    t0 = time.perf_counter()
    matrix[2 * agents * last : 2 * agents * ticks] = tick_vectors
    RawBm25(said + replies)
    index_ms = (time.perf_counter() - t0) * 1000

    per_agent = []
    for a in range(agents):
        mine = history[a]
        per_agent.append((RawExact(embedder.embed(mine)), RawBm25(mine)))
    queries = embedder.embed(said)
    t0 = time.perf_counter()
    for (exact, bm25), q, text in zip(per_agent, queries, said):
        exact.topk(q, 7)
        bm25.topk(text, 7)
    scoring_ms = (time.perf_counter() - t0) * 1000

    calls_ms = 0.0
    if mode == "ray":
        calls_ms = await _ray_calls(said, replies, queries, hosts, shards)
    total = embed_ms + insert_ms + index_ms + scoring_ms + calls_ms
    return {
        "embed_ms": round(embed_ms, 2),
        "arrow_insert_ms": round(insert_ms, 2),
        "vectors_and_bm25_ms": round(index_ms, 2),
        "raw_scoring_ms": round(scoring_ms, 2),
        "ray_calls_ms": round(calls_ms, 2),
        "tick_ms": round(total, 2),
    }


async def _ray_calls(said: list[str], replies: list[str], queries: np.ndarray, hosts: int, shards: int) -> float:
    """One call per host for each of the tick's three operations, one per shard, carrying the
    tick's texts as Arrow buffers (the queries' vectors to the shards): best of three."""
    import pyarrow as pa

    host_sinks, shard_sinks = sinks("ray", hosts), sinks("ray", shards)
    await asyncio.gather(*(s.ping() for s in host_sinks + shard_sinks))

    def part(texts: list[str], i: int, n: int) -> pa.Table:
        return pa.table({"text": texts[i::n]})

    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        await asyncio.gather(*(s.noop(part(said, i, hosts)) for i, s in enumerate(host_sinks)))
        await asyncio.gather(
            *(s.noop(part(said, i, hosts)) for i, s in enumerate(host_sinks)),
            *(s.noop(queries[i::shards], part(said, i, shards)) for i, s in enumerate(shard_sinks)),
        )
        await asyncio.gather(*(s.noop(part(replies, i, hosts)) for i, s in enumerate(host_sinks)))
        best = min(best, time.perf_counter() - t0)
    return best * 1000


async def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    styles = {}
    for style in ("batches", "coroutines"):
        styles[style] = await run_style(style, args.mode, args.agents, args.ticks, root)
    log("full floor")
    shape = styles["batches"]
    floor = await full_floor(args.mode, args.agents, args.ticks, root, shape["hosts"], shape["shards"])
    batch, coalesced = styles["batches"], styles["coroutines"]
    p50_max = 150 if args.mode == "inprocess" else 3000
    ratio_max = 3.0 if args.mode == "inprocess" else 2.0
    return {
        **styles,
        "full_floor": floor,
        "tick_ratio_to_full_floor": ratio(batch["tick_p50_ms"], floor["tick_ms"]),
        "coalesced_over_batches": ratio(coalesced["tick_p50_ms"], batch["tick_p50_ms"]),
        "targets": {
            "tick_p50_ms_max": p50_max,
            "tick_ok": batch["tick_p50_ms"] <= p50_max,
            "tick_ratio_to_full_floor_max": ratio_max,
            "tick_ratio_ok": batch["tick_p50_ms"] <= ratio_max * floor["tick_ms"],
            "coalesced_over_batches_max": 1.2,
            "coalesced_ok": coalesced["tick_p50_ms"] <= 1.2 * batch["tick_p50_ms"],
            "growth_max": 1.3,
            "growth_ok": all((s["growth"] or 0.0) <= 1.3 for s in styles.values()),
            "ops_per_s_min": 20_000 if args.mode == "inprocess" else None,
            "recall_ok": all(s["recall_hit_rate"] in (None, 1.0) for s in styles.values()),
        },
    }


#: The recorded runs, in the order the docs show them.
RESULTS = ("benchmarks/results/user_tick_inprocess.json", "benchmarks/results/user_tick_ray.json")


def render(lines: list[dict[str, Any]]) -> str:
    """The docs' table of recorded runs (on docs/performance.md and docs/batching.md:
    :mod:`benchmarks.render` puts it there, and a test keeps them equal to this)."""
    rows = [
        "| run (`memray.open()` defaults) | style | tick p50 | memory ops/s | full floor | tick / floor "
        "| growth | recall | load | commit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for line in lines:
        p, floor = line["params"], line["full_floor"]
        parts = (
            f"embed {floor['embed_ms']:.0f} + insert {floor['arrow_insert_ms']:.0f} + index "
            f"{floor['vectors_and_bm25_ms']:.0f} + scoring {floor['raw_scoring_ms']:.0f}"
            + (f" + Ray calls {floor['ray_calls_ms']:.0f}" if floor["ray_calls_ms"] else "")
        )
        load = f"{line['machine']['load_avg'][0]:.1f}"  # (the 1-minute load average at the end)
        for style in ("batches", "coroutines"):
            got = line[style]
            # (a run recorded before the hosts were said had the defaults of then: 4 hosts, 2 shards)
            shape = f"{got.get('hosts', 4)} hosts, {got.get('shards', 2)} shards"
            rows.append(
                f"| {p['agents']:,} agents, {p['mode']}, {shape} | {style} | {got['tick_p50_ms'] / 1000:.2f} s "
                f"| {got['ops_per_s']:,} | {floor['tick_ms']:.0f} ms ({parts}) "
                f"| {got['tick_p50_ms'] / floor['tick_ms']:.1f}× | {got['growth']:.2f} "
                f"| {got['recall_hit_rate']:.0%} | {load} | {line['git_sha']} |"
            )
    return "\n".join(rows)


def rendered() -> str:
    return render([recorded(r) for r in RESULTS if (ROOT / r).exists()])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=LAST + 1)
    ap.add_argument("--mode", choices=["ray", "inprocess"], default="ray")
    ap.add_argument("--address", default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--out", default=None, help="also write the JSON line here")
    args = ap.parse_args(argv)
    results = in_data_dir(args, "memray-user-tick-", lambda root: asyncio.run(run(args, root)))
    return emit("user_tick", {"agents": args.agents, "ticks": args.ticks, "mode": args.mode}, results, args.out)


if __name__ == "__main__":
    main()
