"""The ``memray`` command line: ``memray demo [PATH]``, ``memray stats PATH``, ``memray fork SRC DST``,
``memray backfill embeddings|summaries PATH ...``, ``memray serve``, ``memray mcp``, ``memray keys ...``
(the last three in :mod:`memray.server.commands`).

The data directory is every command's first argument (:func:`add_data_dir`; ``--path`` is still
taken, with a deprecation note); a path that is not a data directory is a one-line error.

Results go to stdout; progress (bars when stderr is a terminal, phase lines always) and errors go
to stderr. A memray error (bad input, a store in use) is printed as one line with what to do, and
the command exits with status 2; Ctrl-C is one line and status 130 (a backfill stops cleanly at
the first one, see :mod:`memray.jobs.control`); ``--verbose`` also shows Ray's own log lines.
"""

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
import time
from collections.abc import Sequence
from typing import Literal

import memray
from memray import __version__
from memray.cli_args import DefaultsHelpFormatter, add_data_dir
from memray.errors import MemrayError, ValidationError
from memray.jobs import backfill_embeddings, backfill_summaries
from memray.progress import step
from memray.runtime.join import running_memray
from memray.server.commands import add_parsers
from memray.simulation import simulate, summary_line
from memray.stats import data_stats, render
from memray.store.layout import data_directory

__all__ = ["main", "build_parser", "DefaultsHelpFormatter", "add_data_dir"]


#: The file by which a folder is known to hold an earlier demo's data (and so may be replaced).
DEMO_MARKER = "memray-demo.json"


def _demo_folder(path: str, args: argparse.Namespace) -> None:
    """Make ``path`` the demo's folder: a new or empty one, or one an earlier demo wrote, which is
    replaced (so a demo run twice prints the same); anything else is refused, untouched."""
    fix = "give a new or empty folder (one an earlier memray demo wrote is replaced)"
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValidationError("path", path, "is a file, not a directory", fix)
    if os.path.isdir(path) and os.listdir(path):
        if not os.path.isfile(os.path.join(path, DEMO_MARKER)):
            raise ValidationError("path", path, "holds files that memray demo did not write", fix)
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, DEMO_MARKER), "w", encoding="utf-8") as f:
        json.dump({"agents": args.agents, "turns": args.turns, "mode": args.mode}, f)


def _demo(args: argparse.Namespace) -> int:
    if args.path:
        _demo_folder(args.path, args)
    path = args.path or tempfile.mkdtemp(prefix="memray-demo-")
    where = (
        path
        if args.path or args.keep
        else f"{path} (a temporary folder, removed at the end: --keep or a PATH keeps it)"
    )
    hosts = {"hosts": args.hosts} if args.hosts is not None else {}  # (None: the config's default)
    config = memray.MemoryConfig(
        path=path, mode=args.mode, shards=args.shards, num_cpus=args.num_cpus, verbose=args.verbose, **hosts
    )
    print(f"memray demo: {args.agents} agents, {args.turns} turns, mode={args.mode}, data in {where}", flush=True)
    try:
        t0 = time.monotonic()
        actors = f"{config.hosts} hosts and {config.shards} shards"
        if args.mode == "ray":
            step(f"starting a local Ray with {actors} (10-30 s on a small machine)")
        else:
            step(f"starting {actors} in this process")
        with memray.open(config=config) as mem:
            step(f"ready in {time.monotonic() - t0:.1f} s; running the agents")
            report = asyncio.run(simulate(mem, args.agents, args.turns))
            stats = mem.stats()
            step("flushing and stopping")
    finally:
        if not args.path and not args.keep:
            shutil.rmtree(path, ignore_errors=True)
    report.extras["hosts"] = [
        {k: s[k] for k in ("host", "conversations", "rss_bytes", "commits", "rows")} for s in stats
    ]
    print(summary_line(report))
    if args.json:
        print(json.dumps(dataclasses.asdict(report)))
    return 0 if report.verified else 1


def _stats(args: argparse.Namespace) -> int:
    stats = data_stats(args.path, args.hosts)
    print(json.dumps(stats) if args.json else render(stats))
    return 0


def fork_mode(src: str, stores: int, address: str | None) -> Literal["ray", "inprocess"]:
    """The mode ``memray fork`` opens SRC in when none is given: ray where a memray runs on SRC
    (joined, so its writers go on) or a Ray is named, else in process. Starting a Ray to copy a
    directory nothing runs on took ~11 s of a ~12 s fork; in process it takes ~1 s."""
    if address or running_memray(memray.MemoryConfig(path=src, stores=stores)) is not None:
        return "ray"
    return "inprocess"


def _fork(args: argparse.Namespace) -> int:
    """Open SRC, fork it into DST (memray.runtime.fork), close both; print one JSON line."""
    src = os.path.abspath(args.src)
    stores = data_directory(args.src)
    found = (
        [
            int(m.group(1))
            for name in os.listdir(os.path.join(src, "vectors"))
            if (m := re.fullmatch(r"shard-(\d+)", name))
        ]
        if os.path.isdir(os.path.join(src, "vectors"))
        else []
    )
    shards = args.shards or (max(found) + 1 if found else memray.MemoryConfig().shards)
    mode = args.mode or fork_mode(src, stores, args.address)
    config = memray.MemoryConfig(path=src, mode=mode, address=args.address, hosts=1, shards=shards, stores=stores)
    with memray.open(config=config) as mem:  # joins the memray running on SRC, if one is
        with mem.fork(args.dst) as fork:
            info = dict(fork.fork_info or {})
    print(json.dumps({"src": src, "dst": info.pop("path"), "shards": shards, **info}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memray",
        description="Conversation and long-term memory for AI agents, on Ray.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memray {__version__} (memray-agents)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="run a scripted many-agent simulation and verify the store",
        formatter_class=DefaultsHelpFormatter,
        description="Scripted agents talk, recall with context() and answer; at the end every "
        "acknowledged message is checked in the store. A PATH an earlier demo wrote is replaced, so the same "
        "command prints the same again; any other folder must be new or empty.",
    )
    demo.add_argument("--agents", type=int, default=1000, help="agents, one conversation each")
    demo.add_argument("--turns", type=int, default=6, help="turns per agent (recall questions start at turn 3)")
    demo.add_argument(
        "--mode", choices=["ray", "inprocess"], default="ray", help="Ray actors, or the same cores in this process"
    )
    demo.add_argument(
        "--hosts", type=int, default=None, help="ConversationHost actors (default: one per CPU of Ray, up to 4)"
    )
    demo.add_argument("--shards", type=int, default=2, help="VectorShard actors")
    demo.add_argument(
        "--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all of this machine's)"
    )
    add_data_dir(demo, "data directory, kept afterwards (default: a temporary one, removed at the end)")
    demo.add_argument("--keep", action="store_true", help="keep the temporary data directory and print where it is")
    demo.add_argument(
        "--verbose", action="store_true", help="show Ray's own log lines (info, warnings) and the actors' output"
    )
    demo.add_argument("--json", action="store_true", help="also print the whole report as one JSON line")
    demo.set_defaults(func=_demo)
    stats = sub.add_parser(
        "stats",
        help="what a data directory holds: rows per table, shards, hosts, disk use",
        formatter_class=DefaultsHelpFormatter,
        description="Reads the data directory's files without starting memray; while a ray-mode memray runs "
        "on it, asks that memray (joining it) for what its store holds.",
    )
    add_data_dir(stats, "the data directory (what memray.open was given)")
    stats.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="show how conversations spread over this many hosts (default: those of the memray running on it, "
        "else as many as memray.open would start here)",
    )
    stats.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    stats.set_defaults(func=_stats)
    fork = sub.add_parser(
        "fork",
        help="copy a memray (every conversation, entry, note, summary, index) into a new path",
        formatter_class=DefaultsHelpFormatter,
        description="A consistent copy of the memray at SRC, opened at DST as an independent memray, then "
        "closed; one JSON line of what was copied and how long it took. A memray running on SRC is joined and "
        "forked live (its writers go on); otherwise SRC is opened in this process (--mode ray starts a Ray for it).",
    )
    fork.add_argument("src", metavar="SRC", help="the data directory to fork")
    fork.add_argument("dst", metavar="DST", help="the new data directory (must not exist, or be empty)")
    fork.add_argument(
        "--mode",
        choices=["ray", "inprocess"],
        default=None,
        help="ray: join the memray running on SRC, or start one; inprocess: open SRC in this process "
        "(default: ray when a memray runs on SRC or --address is given, else inprocess)",
    )
    fork.add_argument(
        "--address", default=None, help="the Ray cluster where the memray to fork runs (default: found from SRC)"
    )
    fork.add_argument("--shards", type=int, default=None, help="shard count (default: read from SRC)")
    fork.set_defaults(func=_fork)
    backfill = sub.add_parser(
        "backfill",
        help="batch jobs on Ray Data: re-embed, or bring summaries up to date",
        formatter_class=DefaultsHelpFormatter,
        description="Batch jobs over a data directory, on a Ray Data actor pool: they join the memray running "
        "on it (or start one for the job), are resumable (run the same command again) and print one JSON line.",
    )
    jobs = backfill.add_subparsers(dest="job", required=True, metavar="JOB")

    embeddings = jobs.add_parser(
        "embeddings",
        help="(re-)embed everything with --model and cut over atomically",
        formatter_class=DefaultsHelpFormatter,
        description=backfill_embeddings.__doc__.split("\n\n")[0] if backfill_embeddings.__doc__ else None,
    )
    backfill_embeddings.build_parser(embeddings).set_defaults(func=backfill_embeddings.run_args)
    summaries = jobs.add_parser(
        "summaries",
        help="bring every conversation's summary up to date",
        formatter_class=DefaultsHelpFormatter,
        description=backfill_summaries.__doc__.split("\n\n")[0] if backfill_summaries.__doc__ else None,
    )
    backfill_summaries.build_parser(summaries).set_defaults(func=backfill_summaries.run_args)

    add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except MemrayError as exc:
        print(f"memray {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C (the first one stops a job cleanly)
        resume = "; run the same command again to resume" if args.command == "backfill" else ""
        print(f"memray {args.command}: interrupted{resume}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
