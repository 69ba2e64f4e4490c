"""The ``memray`` command line: ``memray demo``, ``memray backfill ...``, ``memray fork``, ``memray stats``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
from typing import Sequence

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    import memray
    from memray.simulation import simulate, summary_line

    path = args.path or tempfile.mkdtemp(prefix="memray-demo-")
    config = memray.MemoryConfig(path=path, mode=args.mode, hosts=args.hosts, shards=args.shards, num_cpus=args.num_cpus)
    print(f"memray demo: {args.agents} agents, {args.turns} turns, mode={args.mode}, data in {path}", flush=True)
    with memray.open(config=config) as mem:
        report = asyncio.run(simulate(mem, args.agents, args.turns))
        stats = mem.stats()
    report.extras["hosts"] = [{k: s[k] for k in ("host", "conversations", "rss_bytes", "commits", "rows")} for s in stats]
    print(summary_line(report))
    print(json.dumps(dataclasses.asdict(report)))
    if not args.path and not args.keep:
        shutil.rmtree(path, ignore_errors=True)
    return 0 if report.verified else 1


def _fork(args: argparse.Namespace) -> int:
    """Open SRC, fork it into DST (memray.runtime.fork), close both; print one JSON line."""
    import memray
    from memray.errors import MemrayError

    src = os.path.abspath(args.src)
    if not os.path.exists(os.path.join(src, "history.duckdb")):
        print(f"memray fork: {src} is not a memray data directory (no history.duckdb)", file=sys.stderr)
        return 2
    found = [int(m.group(1)) for name in os.listdir(os.path.join(src, "vectors")) if (m := re.fullmatch(r"shard-(\d+)", name))] \
        if os.path.isdir(os.path.join(src, "vectors")) else []
    shards = args.shards or (max(found) + 1 if found else memray.MemoryConfig().shards)
    config = memray.MemoryConfig(path=src, mode=args.mode, address=args.address, hosts=1, shards=shards)
    try:
        with memray.open(config=config) as mem:
            with mem.fork(args.dst) as fork:
                info = dict(fork.fork_info or {})
    except MemrayError as exc:
        print(f"memray fork: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"src": src, "dst": info.pop("path"), "shards": shards, **info}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memray", description="Conversation and long-term memory for AI agents, on Ray.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a scripted many-agent simulation and verify the store")
    demo.add_argument("--agents", type=int, default=1000)
    demo.add_argument("--turns", type=int, default=6)
    demo.add_argument("--mode", choices=["ray", "inprocess"], default="ray")
    demo.add_argument("--hosts", type=int, default=4)
    demo.add_argument("--shards", type=int, default=2)
    demo.add_argument("--num-cpus", type=int, default=None)
    demo.add_argument("--path", default=None, help="data directory (default: a temporary one, removed after)")
    demo.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    demo.set_defaults(func=_demo)
    fork = sub.add_parser("fork", help="copy a memray (every conversation, entry, note, summary, index) into a new path")
    fork.add_argument("src", help="the data directory to fork")
    fork.add_argument("dst", help="the new data directory (must not exist, or be empty)")
    fork.add_argument("--mode", choices=["ray", "inprocess"], default="inprocess",
                      help="inprocess (default) for a directory no running memray holds; ray with --address to fork a live one")
    fork.add_argument("--address", default=None, help="the Ray cluster where the memray to fork runs")
    fork.add_argument("--shards", type=int, default=None, help="shard count (default: read from SRC)")
    fork.set_defaults(func=_fork)
    backfill = sub.add_parser("backfill", help="batch jobs on Ray Data: re-embed, or bring summaries up to date")
    jobs = backfill.add_subparsers(dest="job", required=True)
    from jobs import backfill_embeddings, backfill_summaries

    embeddings = jobs.add_parser("embeddings", help="(re-)embed everything with --model and cut over atomically")
    backfill_embeddings.build_parser(embeddings).set_defaults(func=backfill_embeddings.run_args)
    summaries = jobs.add_parser("summaries", help="bring every conversation's summary up to date")
    backfill_summaries.build_parser(summaries).set_defaults(func=backfill_summaries.run_args)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
