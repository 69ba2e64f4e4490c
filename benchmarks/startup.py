"""Start-up and shut-down in a fresh process, as a user's script pays them, against Ray's floor.

    python -m benchmarks.startup --repeat 3                 # ray mode, the default hosts / 2 shards
    python -m benchmarks.startup --repeat 3 --hosts 1 --shards 1
    python -m benchmarks.startup --mode inprocess --repeat 5

Each measurement runs in a new Python process (this module re-run with ``--child``, which
imports nothing of memray or Ray before it starts timing), and each
round runs every kind once, in turn, so that a load spike on this shared machine hits all alike:

- ``ray_init``: ``ray.init`` alone as memray calls it, then ``ray.shutdown()`` — the floor of any
  ray-mode open and close;
- ``ray_actors``: the same plus as many no-op actors as memray starts (store + shards + hosts;
  ``_noop.BareSink``, which imports nothing), created together and pinged, then ``ray.shutdown()``;
- ``memray``: ``memray.open(path)`` (starting its own local Ray), one message added so the close
  has a write to flush, then ``close()``, which stops the actors and the Ray it started;
- ``join``: while another process holds a memray open on the path, ``memray.open(path)`` joins it
  (no address given), adds a message and closes (flush, disconnect);
- ``inprocess``: the same open, add and close with ``mode="inprocess"``;
- ``duckdb`` (``--mode inprocess``): opening and closing a DuckDB file, the floor of that.

Each child reports wall seconds and the CPU seconds of its whole process tree (it, and every Ray
process and actor it started; Linux ``/proc``, :class:`TreeCpu`): CPU seconds move much less
with the machine's load than wall seconds do. ``import memray`` is timed apart (``import_s``),
and so is ``import ray`` (``import_ray_s``), which a ray-mode open does first: each is paid once
per script. Reported: every round, the medians, the ratio of each to its floor, and the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

KINDS = ("ray_init", "ray_actors", "memray", "join", "inprocess", "duckdb")
MODE_KINDS = {"ray": "ray_init,ray_actors,memray,join,inprocess", "inprocess": "duckdb,inprocess"}
TARGETS = {"open_s": 4.0, "close_s": 1.0, "join_open_s": 1.0}
ROOT = Path(__file__).resolve().parent.parent


class TreeCpu:
    """CPU seconds (user + system) used by this process and its descendants (every Ray process
    and actor it starts), from Linux ``/proc``. A background thread samples the tree every
    ``every_s``, so a process that exits still counts with its last sample (what it ran in its
    last ``every_s`` is missed)."""

    def __init__(self, every_s: float = 0.2) -> None:
        self.available = os.path.isdir("/proc")
        self._tick = os.sysconf("SC_CLK_TCK") if self.available else 1
        self._seen: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        if self.available:
            threading.Thread(target=self._sample_until_stopped, args=(every_s,), daemon=True).start()

    def _sample_until_stopped(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.sample()

    def sample(self) -> float | None:
        """Sample now; the total so far."""
        if not self.available:
            return None
        stats: dict[int, tuple[int, float]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / self._tick)
        tree, grew = {os.getpid()}, True
        while grew:
            grew = False
            for pid, (ppid, _) in stats.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        with self._lock:
            for pid in tree & stats.keys():
                self._seen[pid] = stats[pid][1]
            return sum(self._seen.values())


class Clock:
    """Wall and tree-CPU seconds of each phase of a child."""

    def __init__(self) -> None:
        self.out: dict[str, float] = {}
        self._cpu_meter = TreeCpu()
        self._wall, self._cpu = time.perf_counter(), self._cpu_meter.sample()

    def lap(self, name: str) -> None:
        wall, cpu = time.perf_counter(), self._cpu_meter.sample()
        self.out[f"{name}_s"] = round(wall - self._wall, 3)
        if cpu is not None and self._cpu is not None:
            self.out[f"{name}_cpu_s"] = round(cpu - self._cpu, 3)
        self._wall, self._cpu = wall, cpu


def _ray_init() -> None:
    import ray

    ray.init(
        address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR"
    )


def child(kind: str, path: str, actors: int, hosts: int, shards: int) -> dict[str, float]:
    """One measurement in this (fresh) process."""
    clock = Clock()
    if kind == "duckdb":  # the one thing an in-process open must do: open a DuckDB file
        import duckdb

        clock.lap("import")
        os.makedirs(path, exist_ok=True)
        con = duckdb.connect(os.path.join(path, "floor.duckdb"))
        con.execute("CREATE TABLE IF NOT EXISTS t (a INTEGER)")
        clock.lap("open")
        con.close()
        clock.lap("close")
        return clock.out
    if kind in ("ray_init", "ray_actors"):
        import ray

        clock.lap("import")
        _ray_init()
        if kind == "ray_actors":
            from benchmarks._noop import BareSink

            cls = ray.remote(BareSink).options(num_cpus=0)
            handles = [cls.remote() for _ in range(actors)]
            ray.get([h.ping.remote() for h in handles])
        clock.lap("open")
        ray.shutdown()
        clock.lap("close")
        return clock.out
    import memray

    clock.lap("import")
    mode = "inprocess" if kind == "inprocess" else "ray"
    if mode == "ray":  # a ray-mode open imports Ray first (import memray does not): apart
        import ray  # noqa: F401

        clock.lap("import_ray")
    mem = memray.open(path, mode=mode, hosts=hosts, shards=shards)
    clock.lap("open")
    mem.conversation(user_id="u1", conversation_id=f"c-{kind}").add({"role": "user", "content": "hello"})
    clock.lap("add")
    mem.close()
    clock.lap("close")
    return clock.out


HOLDER = """
import sys, memray
mem = memray.open(sys.argv[1], hosts=int(sys.argv[2]), shards=int(sys.argv[3]))
print("open", flush=True)
sys.stdin.readline()
mem.close()
"""


def run_child(kind: str, path: str, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "benchmarks.startup", "--child", kind, "--path", path]
    argv += ["--hosts", str(args.hosts), "--shards", str(args.shards)]
    holder = None
    if kind == "join":  # a memray that another process holds open
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, path, str(args.hosts), str(args.shards)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert holder.stdout is not None and holder.stdout.readline() == "open\n", "the holder did not open"
    try:
        out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"{kind} child failed:\n{out.stderr[-3000:]}")
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        if holder is not None:
            holder.communicate("close\n", timeout=120)


def _median(rounds: list[dict[str, float]], key: str) -> float | None:
    values = [r[key] for r in rounds if key in r]
    return round(statistics.median(values), 3) if values else None


def _ratio(value: float | None, floor: float | None) -> float | None:
    return round(value / floor, 3) if value is not None and floor else None


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=None, help="default: as many as memray.open() starts here")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--mode",
        choices=sorted(MODE_KINDS),
        default="ray",
        help="ray: every kind; inprocess: in-process against DuckDB",
    )
    ap.add_argument("--kinds", default=None, help="which measurements, comma-separated (default: the --mode's)")
    ap.add_argument("--plot", default=None, help="write a PNG here")
    ap.add_argument("--child", choices=KINDS, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--path", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hosts is None:  # (a child is always told: it imports nothing of memray before timing)
        from memray.config import default_hosts

        args.hosts = default_hosts(None, None)
    actors = 1 + args.shards + args.hosts
    if args.child is not None:
        result = child(args.child, args.path, actors, args.hosts, args.shards)
        print(json.dumps(result), flush=True)
        return result
    from benchmarks._harness import emit, log, plot_bars  # (not in a child: it imports memray)

    kinds = [k for k in (args.kinds or MODE_KINDS[args.mode]).split(",") if k]
    rounds: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="memray-startup-") as root:
        for i in range(args.repeat):
            for kind in kinds:
                log(f"round {i + 1}/{args.repeat}: {kind}")
                rounds[kind].append(run_child(kind, os.path.join(root, f"{kind}-{i}"), args))
    results: dict[str, Any] = {}
    for kind, runs in rounds.items():
        keys = sorted({k for r in runs for k in r})
        results[kind] = {k: _median(runs, k) for k in keys} | {"rounds": runs}
    results["ratios"] = {  # each to its floor, measured in the same rounds (None: not measured)
        f"{kind}_{phase}_to_{floor}": _ratio(
            results.get(kind, {}).get(f"{phase}_s"), results.get(floor, {}).get(f"{phase}_s")
        )
        for kind, floor in (("memray", "ray_init"), ("memray", "ray_actors"), ("inprocess", "duckdb"))
        for phase in ("open", "close")
    }
    measured = {
        "open_s": results.get("memray", {}).get("open_s"),
        "close_s": results.get("memray", {}).get("close_s"),
        "join_open_s": results.get("join", {}).get("open_s"),
    }
    results["targets"] = {
        name: {"max": bound, "measured": measured[name], "ok": measured[name] <= bound}
        for name, bound in TARGETS.items()
        if measured[name] is not None
    }
    if args.plot:
        shown = [k for k in KINDS if k in results]
        plot_bars(
            args.plot,
            f"start/stop in a fresh process ({args.hosts} hosts / {args.shards} shards)",
            ["open", "close"],
            {k: [results[k]["open_s"], results[k]["close_s"]] for k in shown},
            "seconds",
        )
    params = {k: v for k, v in vars(args).items() if k not in ("plot", "child", "path")}
    return emit("startup", params, results)


if __name__ == "__main__":
    main()
