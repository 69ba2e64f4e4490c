"""Every figure the docs show from recorded runs, rendered from ``benchmarks/results/*.json``.

    python -m benchmarks.render            # write every block into its page
    python -m benchmarks.render --check    # write nothing; exit 1 listing the stale blocks

A block is the text of a page between two comments (:func:`benchmarks._harness.markers`). The
registry, :data:`BLOCKS`, names each block's page, the recorded runs it is made from (a results
file and the command that records it) and the function that renders it; each block opens with a
line naming those runs, their commit and the load on the machine, so a reader knows where a figure
comes from and how to measure it again. ``tests/test_docs.py`` checks every block of the registry:
a page that says something other than its results fails the suite.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks import fault_table, huge_tick, serve_load, soak_table, tables, user_tick
from benchmarks._harness import block, markers, recorded, write_block

__all__ = ["BLOCKS", "Block", "Source", "stale", "write", "main"]

DOCS = Path(__file__).resolve().parent.parent / "docs"
COMMAND = "python -m benchmarks.render"


@dataclass(frozen=True)
class Source:
    """A results file (its name under ``benchmarks/results/``) and the command that records it,
    a format string over the run's recorded parameters."""

    name: str
    command: str

    def line(self) -> str:
        run = recorded(self.name)
        load = run.get("machine", {}).get("load_avg") or []
        at = f"commit `{run.get('git_sha', 'unknown')}`" + (f", load average {load[0]:.1f}" if load else "")
        return f"`benchmarks/results/{self.name}` (`{self.command.format(**run['params'])}`; {at})"


@dataclass(frozen=True)
class Block:
    """The text between a page's two markers, and what makes it."""

    page: str  # under docs/
    name: str
    sources: tuple[Source, ...]
    render: Callable[[], str]

    @property
    def begin(self) -> str:
        return markers(self.name, COMMAND)[0]

    @property
    def end(self) -> str:
        return markers(self.name, COMMAND)[1]

    def text(self) -> str:
        """What the page should hold: the runs it comes from, then the rendering."""
        return f"*From {'; '.join(s.line() for s in self.sources)}.*\n\n{self.render()}"

    def on_page(self) -> str:
        return block((DOCS / self.page).read_text(encoding="utf-8"), self.begin, self.end)


def _s(name: str, command: str) -> tuple[Source, ...]:
    return (Source(name, command),)


_TICK_COMMAND = "python -m benchmarks.user_tick --agents {agents} --ticks {ticks} --mode {mode}"
_TICK = (Source("user_tick_inprocess.json", _TICK_COMMAND), Source("user_tick_ray.json", _TICK_COMMAND))
_HUGE = _s(
    Path(huge_tick.RESULT).name, "python -m benchmarks.huge_tick --agents {agents} --base {base} --ticks {ticks}"
)
_SOAK_COMMAND = "python -m benchmarks.soak --minutes {minutes:g} --kill-every {kill_every:g} --agents {agents}"
_SOAK = tuple(Source(Path(path).name, _SOAK_COMMAND) for _, path in soak_table.RUNS)
_FAULTS = _s(
    "faults.json",
    "python -m benchmarks.faults --conversations {conversations} --messages {messages} --batch {batch} "
    "--threads {threads}",
)
_SERVE = _s(
    "serve_load.json",
    "python -m benchmarks.serve_load --clients {clients} --requests {requests} --phase-seconds {phase_seconds:g} "
    "--conversations {conversations} --messages {messages}",
)

_SIM_COMMAND = "python -m benchmarks.simulate_agents --agents {agents} --turns {turns} --mode {mode}"
_SIMULATIONS = tuple(
    Source(n, _SIM_COMMAND)
    for n in ("simulate_agents.json", "simulate_agents_inprocess.json", "simulate_agents_10k.json")
)
_INGEST = _s(
    "ingest.json", "python -m benchmarks.ingest --conversations {conversations} --hosts {hosts} --messages {messages}"
)
_STORES_COMMAND = (
    "python -m benchmarks.ingest --stores {stores} --conversations {conversations} --hosts {hosts} --shards {shards} "
    "--messages {messages} --batch {batch} --inflight {inflight} --add-messages {add_messages} --clients {clients} "
    "--embedder {embedder}"
)
_STORES = tuple(Source(n, _STORES_COMMAND) for n in ("ingest_stores1.json", "ingest_stores2.json"))
_RECALL = (
    Source("recall_latency.json", "python -m benchmarks.recall_latency --n 10000,100000 --shards 2 --clients 1,16"),
    Source(
        "recall_latency_inprocess.json",
        "python -m benchmarks.recall_latency --n 10000,100000 --shards 2 --mode inprocess --clients 1",
    ),
)
_REEMBED = tuple(
    Source(n, "python -m benchmarks.reembed --model {model} --rows {rows}")
    for n in ("reembed.json", "reembed_20k.json")
)
_FORK_COMMAND = (
    "python -m benchmarks.fork --conversations {conversations} --messages {messages} --writers {writers} "
    "--rate {rate:g} --repeat {repeat} --mode {mode}"
)
_FORK = tuple(Source(n, _FORK_COMMAND) for n in ("fork.json", "fork_inprocess.json"))
_STREAM = _s(
    "stream_scoring.json",
    "python -m benchmarks.stream_scoring --n {n} --conversations {conversations} --queries {queries}",
)
_RETRIEVAL = _s(
    "retrieval_eval.json", "python -m benchmarks.retrieval_eval --datasets {datasets} --embedders {embedders} --tune"
)
_STATIC = _s("static_embedder.json", "python -m benchmarks.static_embedder")
_STARTUP = _s("startup.json", "python -m benchmarks.startup --repeat {repeat}")
_MICRO = (
    Source("read_path_micro.json", "python -m benchmarks.read_path_micro"),
    Source("search_micro.json", "python -m benchmarks.search_micro --n {n} --namespaces {namespaces} --batch {batch}"),
)
_RESTART = _s("restart_micro.json", "python -m benchmarks.restart_micro --rounds {rounds} --init-s {init_s:g}")
_SNAPSHOTS = tuple(
    Source(n, "python -m benchmarks.snapshot_micro --namespaces {namespaces} --ticks {ticks} --repeat {repeat}")
    for n in tables.SNAPSHOT_RUNS
)
_LEXICAL = _s("lexical_micro.json", "python -m benchmarks.lexical_micro --namespaces {namespaces} --ticks {ticks}")
_WATCH = _s("call_watch.json", "python -m benchmarks.call_watch --calls {calls} --rounds {rounds} --clients {clients}")

#: Every rendered block of the docs: its page, its name (in its markers), the recorded runs it is
#: made from and the function that renders it.
BLOCKS: list[Block] = [
    Block("performance.md", "user_tick", _TICK, user_tick.rendered),
    Block("performance.md", "huge_tick", _HUGE, huge_tick.rendered),
    Block("batching.md", "user_tick", _TICK, user_tick.rendered),
    Block("batching.md", "simulations", _SIMULATIONS[1:], tables.batching_runs),
    Block("reliability.md", "soak", _SOAK, soak_table.render),
    Block("reliability.md", "faults", _FAULTS, fault_table.rendered),
    Block("reliability.md", "restart", _RESTART, tables.restart),
    Block("server.md", "serve_load", _SERVE, serve_load.render),
    Block("getting-started.md", "modes", _STARTUP, tables.modes),
    Block("cluster.md", "stores", _STORES, tables.stores),
    Block("benchmarks.md", "ingest", _INGEST, tables.ingest),
    Block("benchmarks.md", "simulate_agents", _SIMULATIONS, tables.simulate_agents),
    Block("benchmarks.md", "recall_latency", _RECALL, tables.recall_latency),
    Block("benchmarks.md", "reembed", _REEMBED, tables.reembed),
    Block("benchmarks.md", "fork", _FORK, tables.fork),
    Block("benchmarks.md", "stream_scoring", _STREAM, tables.stream_scoring),
    Block("benchmarks.md", "retrieval_paraphrase", _RETRIEVAL, tables.retrieval_paraphrase),
    Block("benchmarks.md", "retrieval_locomo", _RETRIEVAL, tables.retrieval_locomo),
    Block("benchmarks.md", "retrieval_synthetic", _RETRIEVAL, tables.retrieval_synthetic),
    Block("benchmarks.md", "embedding_rates", _RETRIEVAL + _STATIC, tables.embedding_rates),
    Block("benchmarks.md", "startup", _STARTUP, tables.startup),
    Block("benchmarks.md", "call_watch", _WATCH, tables.call_watch),
    Block("performance.md", "ingest_targets", _INGEST + _SIMULATIONS + _RECALL[:1] + _REEMBED, tables.ingest_targets),
    Block("performance.md", "write_targets", _SIMULATIONS + _INGEST + _STARTUP, tables.write_targets),
    Block("performance.md", "read_targets", _RECALL + _MICRO + _RETRIEVAL, tables.read_targets),
    Block("design.md", "snapshots", _SNAPSHOTS, tables.snapshots),
    Block("design.md", "lexical", _LEXICAL, tables.lexical),
]


def stale() -> list[Block]:
    """The blocks whose page holds something other than what their results render to."""
    return [b for b in BLOCKS if b.on_page() != b.text()]


def write() -> None:
    """Put every block's rendering between its markers (the rest of each page kept)."""
    for b in BLOCKS:
        write_block(DOCS / b.page, b.begin, b.end, b.text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 listing the stale blocks")
    args = ap.parse_args(argv)
    if not args.check:
        write()
        return 0
    bad = stale()
    for b in bad:
        print(f"docs/{b.page}: the block {b.name!r} differs from its results: run {COMMAND}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
