"""A huge tick: 100,000 agents in ray mode on ``memray.open()``'s defaults, beside a 10,000-agent
tick measured in the same run; the driver's memory; the store against what was acknowledged.

    python -m benchmarks.huge_tick --agents 100000 --base 10000 --ticks 3
    python -m benchmarks.huge_tick --agents 40 --base 10 --ticks 2 --mode inprocess   # a smoke run

Each size runs ``examples/tick.py``'s batched tick (``aadd_many``, ``acontext_many``,
``aadd_many``: a call per host and per shard carrying every agent's messages) for ``--ticks``
ticks in a fresh data directory, the base size first. Per tick: its seconds and the driver's
resident memory after it. Per size: the driver's resident memory after ``memray.open()``, after
the handles were made and at its peak (the process's high-water mark, ``ru_maxrss``: the base
size runs first, so the huge size's peak is its own). After the last tick memray is closed (its
acknowledged messages flushed) and every store file is read back with DuckDB: every
acknowledged message must be stored at the seq its add returned, with its text, and nothing else.

Targets (the 2-core machine): each huge tick at most 12x the base tick of the same index
(``tick_ratio``: the largest of those ratios), and the store exactly what was acknowledged.
What the driver's memory is bounded by is reported (``driver_mib``), per agent too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import duckdb

import memray
from benchmarks._harness import emit, in_data_dir, log, ratio, recorded
from memray.store.layout import store_files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import tick as example  # noqa: E402  (examples/tick.py: the tick timed here)

__all__ = ["main", "render", "rendered", "RESULT"]

#: The recorded run the docs show.
RESULT = "benchmarks/results/huge_tick.json"


def rss_mib() -> float:
    """The driver's resident memory now."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mib() -> float:
    """The driver's resident high-water mark (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Acknowledged:
    """``mem`` as the example uses it, keeping the seqs each ``aadd_many`` returned (the lists
    memray made for its answer: nothing is copied inside the timed tick)."""

    def __init__(self, mem: memray.Memory) -> None:
        self._mem = mem
        self.seqs: list[list[list[int]]] = []  # per add call, per item, the message's seqs

    async def aadd_many(self, batch: Iterable[Any], **kwargs: Any) -> list[list[int]]:
        got = await self._mem.aadd_many(batch, **kwargs)
        self.seqs.append(got)
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mem, name)


def expected(agents: int, seqs: list[list[list[int]]]) -> set[tuple[str, int, str]]:
    """Every acknowledged message as the store must hold it: (user, seq, text). The example's
    add calls come in pairs per tick: the agents' messages, then the replies."""
    out = set()
    for call, got in enumerate(seqs):
        tick, says = divmod(call, 2)
        for a, item in enumerate(got):
            (seq,) = item
            text = example.said(a, tick) if says == 0 else example.reply(a, tick)
            out.add((f"agent-{a}", seq, text))
    return out


def stored(config: memray.MemoryConfig) -> list[tuple[str, int, str]]:
    """Every message row in the data directory's store files (memray closed)."""
    rows: list[tuple[str, int, str]] = []
    for path in store_files(config):
        with duckdb.connect(path, read_only=True) as con:
            rows += con.execute("SELECT user_id, seq, text FROM messages").fetchall()
    return rows


async def run_size(agents: int, ticks: int, path: str, mode: Literal["ray", "inprocess"]) -> dict[str, Any]:
    mem = memray.open(path, mode=mode)
    config = mem.config
    try:
        opened = rss_mib()
        handles = [mem.conversation(user_id=f"agent-{i}", conversation_id="main") for i in range(agents)]
        made = rss_mib()
        acks = Acknowledged(mem)
        times: list[float] = []
        after: list[float] = []
        for t in range(ticks):
            t0 = time.perf_counter()
            await example.tick_batches(acks, handles, t)  # acks: the Memory, keeping its seqs
            times.append(time.perf_counter() - t0)
            after.append(rss_mib())
            log(f"{agents:,} agents tick {t}: {times[-1]:.2f} s, driver {after[-1]:,.0f} MiB")
    finally:
        await mem.aclose(terminate=True)
    want, have = expected(agents, acks.seqs), stored(config)
    have_set = set(have)
    peak = peak_mib()
    return {
        "tick_s": [round(x, 2) for x in times],
        "ops_per_s": round(3 * agents * ticks / sum(times)),
        "driver_mib": {
            "opened": round(opened),
            "handles": round(made),
            "after_tick": [round(x) for x in after],
            "peak": round(peak),
            "peak_over_opened_per_agent_kib": round((peak - opened) * 1024 / agents, 1),
        },
        "store": {
            "acknowledged": len(want),
            "stored": len(have),
            "missing": len(want - have_set),
            "unacknowledged": len(have_set - want),
            "duplicated": len(have) - len(have_set),
        },
    }


async def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    base = await run_size(args.base, args.ticks, os.path.join(root, "base"), args.mode)
    huge = await run_size(args.agents, args.ticks, os.path.join(root, "huge"), args.mode)
    ratios = [ratio(h, b) or 0.0 for h, b in zip(huge["tick_s"], base["tick_s"])]
    exact = all(
        s["store"]["missing"] == s["store"]["unacknowledged"] == s["store"]["duplicated"] == 0 for s in (base, huge)
    )
    return {
        "base": base,
        "huge": huge,
        "tick_ratio": max(ratios),
        "targets": {
            "tick_ratio_max": 12.0,
            "tick_ratio_ok": max(ratios) <= 12.0,
            "store_exact": exact,
        },
    }


def render(line: dict[str, Any]) -> str:
    """The docs' table of the recorded run (:mod:`benchmarks.render` puts it on docs/performance.md)."""
    rows = [
        "| agents | ticks (s) | memory ops/s | driver after open → handles → ticks (MiB) | driver peak | "
        "store: acknowledged / stored / missing / not acknowledged |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    agents = {"base": line["params"]["base"], "huge": line["params"]["agents"]}
    for size in ("base", "huge"):
        got = line[size]
        mib, store = got["driver_mib"], got["store"]
        rows.append(
            f"| {agents[size]:,} | {', '.join(f'{t:.1f}' for t in got['tick_s'])} | {got['ops_per_s']:,} "
            f"| {mib['opened']:,} → {mib['handles']:,} → {' → '.join(f'{x:,}' for x in mib['after_tick'])} "
            f"| {mib['peak']:,} MiB ({mib['peak_over_opened_per_agent_kib']} KiB an agent over open) "
            f"| {store['acknowledged']:,} / {store['stored']:,} / {store['missing']} / {store['unacknowledged']} |"
        )
    rows.append("")
    rows.append(
        f"The largest ratio of a {agents['huge']:,}-agent tick to the {agents['base']:,}-agent tick of the "
        f"same index: **{line['tick_ratio']:.1f}×** (target ≤ 12×)."
    )
    return "\n".join(rows)


def rendered() -> str:
    return render(recorded(RESULT))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--agents", type=int, default=100_000)
    ap.add_argument("--base", type=int, default=10_000, help="the agents of the tick it is compared with")
    ap.add_argument("--ticks", type=int, default=3)
    ap.add_argument("--mode", choices=["ray", "inprocess"], default="ray")
    ap.add_argument("--address", default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--out", default=None, help="also write the JSON line here")
    args = ap.parse_args(argv)
    results = in_data_dir(args, "memray-huge-tick-", lambda root: asyncio.run(run(args, root)))
    params = {"agents": args.agents, "base": args.base, "ticks": args.ticks, "mode": args.mode}
    return emit("huge_tick", params, results, args.out)


if __name__ == "__main__":
    main()
