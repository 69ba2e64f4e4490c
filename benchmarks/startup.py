"""Start-up and shut-down: seconds of ``memray.open()`` and ``close()`` against Ray's own floor.

    python -m benchmarks.startup --repeat 3                 # ray mode, default 4 hosts / 2 shards
    python -m benchmarks.startup --mode inprocess --repeat 5

Each round, alternating so that a load spike on this shared machine hits both alike:

- floor: ``ray.init`` as memray calls it, then as many no-op actors as memray starts (store +
  shards + hosts; ``_noop.BareSink``, which imports nothing), created together and pinged; then
  the actors killed and ``ray.shutdown()`` (``--mode inprocess``: opening and closing a DuckDB
  file, the one thing an in-process open must do);
- memray: ``memray.open(path)`` (starting its own local Ray), one message added so the close has
  a write to flush, then ``close()``, which stops the actors and the Ray it started.

Reported: every round's seconds, the median, and the median ratio to the floor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import memray
from benchmarks._harness import emit, log, plot_bars, ratio
from benchmarks._noop import BareSink


def floor_ray(actors: int) -> dict[str, float]:
    import ray

    t0 = time.perf_counter()
    ray.init(
        address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR"
    )
    t_init = time.perf_counter()
    cls = ray.remote(BareSink).options(num_cpus=0)
    handles = [cls.remote() for _ in range(actors)]
    ray.get([h.ping.remote() for h in handles])
    t_open = time.perf_counter()
    for h in handles:
        ray.kill(h, no_restart=True)
    ray.shutdown()
    t_close = time.perf_counter()
    return {"init_s": t_init - t0, "open_s": t_open - t0, "close_s": t_close - t_open}


def floor_inprocess(root: str) -> dict[str, float]:
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect(os.path.join(root, "floor.duckdb"))
    con.execute("CREATE TABLE IF NOT EXISTS t (a INTEGER)")
    t_open = time.perf_counter()
    con.close()
    return {"init_s": 0.0, "open_s": t_open - t0, "close_s": time.perf_counter() - t_open}


def one_memray(cfg: memray.MemoryConfig) -> dict[str, float]:
    t0 = time.perf_counter()
    mem = memray.open(config=cfg)
    t_open = time.perf_counter()
    mem.conversation("u1", "c1").add({"role": "user", "content": "hello"})
    t1 = time.perf_counter()
    mem.close()
    return {"open_s": t_open - t0, "close_s": time.perf_counter() - t1}


def _median(rounds: list[dict[str, float]], key: str) -> float:
    return round(statistics.median(r[key] for r in rounds), 3)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["ray", "inprocess"], default="ray")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plot", default=None, help="write a PNG here")
    args = ap.parse_args(argv)
    actors = 1 + args.shards + args.hosts
    floors: list[dict[str, float]] = []
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="memray-startup-") as root:
        for i in range(args.repeat):
            log(f"round {i + 1}/{args.repeat}")
            floors.append(floor_ray(actors) if args.mode == "ray" else floor_inprocess(root))
            cfg = memray.MemoryConfig(
                path=os.path.join(root, f"mem-{i}"), mode=args.mode, hosts=args.hosts, shards=args.shards
            )
            runs.append(one_memray(cfg))
    open_s, close_s = _median(runs, "open_s"), _median(runs, "close_s")
    f_open, f_close = _median(floors, "open_s"), _median(floors, "close_s")
    results = {
        "open_s": open_s,
        "close_s": close_s,
        "rounds": [{k: round(v, 3) for k, v in r.items()} for r in runs],
        "floor": {
            "kind": f"ray.init + {actors} no-op actors, then kill + ray.shutdown"
            if args.mode == "ray"
            else "open + close of a DuckDB file",
            "init_s": _median(floors, "init_s"),
            "open_s": f_open,
            "close_s": f_close,
            "rounds": [{k: round(v, 3) for k, v in r.items()} for r in floors],
        },
        "open_ratio_to_floor": ratio(open_s, f_open),
        "close_ratio_to_floor": ratio(close_s, f_close),
        "targets": {"open_s_max": 5.0, "close_s_max": 3.0, "open_ok": open_s <= 5.0, "close_ok": close_s <= 3.0},
    }
    if args.plot:
        plot_bars(
            args.plot,
            f"memray start/stop ({args.mode}, {args.hosts} hosts / {args.shards} shards)",
            ["open()", "close()"],
            {"memray": [open_s, close_s], "floor": [f_open, f_close]},
            "seconds",
        )
    params = {k: v for k, v in vars(args).items() if k != "plot"}
    return emit("startup", params, results)


if __name__ == "__main__":
    main()
