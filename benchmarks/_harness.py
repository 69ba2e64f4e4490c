"""Shared pieces of the benchmarks: machine description, git sha, percentiles, one-line JSON
output, concurrent-client timing, Ray start-up and the no-op actor the floors call, and plots.

Every benchmark prints exactly one JSON line on stdout (``emit``); progress goes to stderr: a
line per phase (``log``) and, on a terminal, a bar with rate and ETA over the measured calls.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import math
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memray.rpc.client import Client

T = TypeVar("T")

__all__ = [
    "git_sha",
    "machine",
    "pct_ms",
    "emit",
    "log",
    "run_clients",
    "host_calls",
    "time_calls",
    "ratio",
    "common_args",
    "start_ray",
    "scratch",
    "sinks",
    "pipelined",
    "raw_arrow_insert",
    "in_data_dir",
    "Sink",
    "words",
    "sentence",
    "plot_bars",
    "plot_lines",
    "markers",
    "block",
    "write_block",
    "recorded",
]

_T0 = time.perf_counter()


def git_sha() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        )
        return (out.stdout.strip() or "unknown") + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


_SHA_AT_START = git_sha()


def machine() -> dict[str, Any]:
    """CPU count, RAM, Python, platform and the load average at the time (this box is shared)."""
    ram = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    ram = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "cpu_count": os.cpu_count(),
        "ram_gib": round(ram / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "load_avg": load,
    }


def pct_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 (nearest rank) of latencies given in seconds, as milliseconds."""
    if not seconds:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "n": 0}
    xs = sorted(seconds)
    n = len(xs)

    def at(q: float) -> float:
        return round(xs[min(n - 1, max(0, math.ceil(q * n) - 1))] * 1000.0, 3)

    return {"p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99), "n": n}


async def gathered(calls: Iterable[Awaitable[T]]) -> list[T]:
    """Every call awaited together, as one coroutine (what ``mem.internals.arun`` takes)."""
    return list(await asyncio.gather(*calls))


def ratio(value: float, floor: float) -> float | None:
    return round(value / floor, 3) if floor > 0 else None


#: Growth with history: tick LAST over tick FIRST (0-based; the first ticks run on an index that
#: is still filling, as the persist debounce holds their messages back).
FIRST, LAST = 3, 8


def growth(tick_ms: Sequence[float]) -> float | None:
    """Tick :data:`LAST` over tick :data:`FIRST` (the target: no growth with history, <= 1.3);
    None for a run of fewer ticks."""
    return ratio(tick_ms[LAST], tick_ms[FIRST]) if len(tick_ms) > LAST else None


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def emit(benchmark: str, params: dict[str, Any], results: dict[str, Any], out: str | None = None) -> dict[str, Any]:
    """Print the one JSON line: benchmark, parameters, git sha (of the tree the run started
    from: an edit made while it ran does not relabel it), machine, results; also write it to
    the file ``out`` if given (a recorded run, ``benchmarks/results/*.json``)."""
    line = {"benchmark": benchmark, "git_sha": _SHA_AT_START, "machine": machine(), "params": params, **results}
    print(json.dumps(line), flush=True)
    if out:
        Path(out).write_text(json.dumps(line) + "\n")
    return line


async def run_clients(clients: int, calls: int, fn: Callable[[int], Awaitable[Any]]) -> tuple[list[float], float]:
    """``clients`` concurrent loops sharing ``calls`` calls of ``fn(i)``; returns each call's
    latency (s) and the wall time (s)."""
    from memray.progress import bar

    lat: list[float] = []
    counter = iter(range(calls))
    shown = bar(calls, f"{clients} clients", unit="call")  # on a terminal only

    async def client() -> None:
        for i in counter:
            t0 = time.perf_counter()
            await fn(i)
            lat.append(time.perf_counter() - t0)
            shown.update(1)  # after the measured span

    t0 = time.perf_counter()
    with shown:
        await asyncio.gather(*(client() for _ in range(clients)))
    return lat, time.perf_counter() - t0


def host_calls(mem: Any, call: Callable[[Any], Awaitable[T]]) -> Awaitable[list[T]]:
    """``call(host)`` on every host of ``mem`` (a :class:`~memray.conversation.client.HostClient`);
    await the result (a list, one per host)."""

    async def all_hosts() -> list[T]:
        return list(await asyncio.gather(*(call(h) for h in mem.internals.deployment.hosts)))

    return mem.internals.arun(all_hosts())  # type: ignore[no-any-return]


def best_us(fn: Callable[[], Any], n: int, repeat: int = 5) -> float:
    """Best of ``repeat`` runs of ``fn``, in microseconds per item (``n`` items per run)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return round(best / n * 1e6, 3)


def time_calls(calls: int, fn: Callable[[int], Any]) -> list[float]:
    """Latency (s) of ``calls`` sequential synchronous calls of ``fn(i)``."""
    out = []
    for i in range(calls):
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=["ray", "inprocess"], default="ray", help="memray mode (floors follow it)")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: start a local Ray)")
    parser.add_argument("--plot", default=None, help="write a PNG here")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", default=None, help="data directory (default: a temporary one)")


def start_ray(address: str | None) -> bool:
    """Start (or join) Ray, a local one as memray starts it, with metrics exported every second;
    True if this call started it."""
    import ray

    from memray.runtime.actors import RAY_SYSTEM_CONFIG

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"namespace": "memray-bench", "log_to_driver": False, "ignore_reinit_error": True}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(
            address="local",  # our own, not another Ray running on this machine
            num_cpus=os.cpu_count(),
            include_dashboard=False,
            _system_config={**RAY_SYSTEM_CONFIG, "metrics_report_interval_ms": 1000},  # memray's own, and metrics
            **kwargs,
        )
    return True


def scratch(prefix: str) -> str:
    """A new temporary directory, removed when this process exits: a run's data never stays in
    the machine's temp dir (the tests run several of these benchmarks on every run)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def in_data_dir(args: argparse.Namespace, prefix: str, work: Callable[[str], Any]) -> Any:
    """Run ``work(root)`` with Ray started if the benchmark's mode needs it, in ``args.dir`` or a
    temporary data directory that is removed after; Ray is shut down if this started it."""
    started = start_ray(args.address) if args.mode == "ray" else False
    root = args.dir or tempfile.mkdtemp(prefix=prefix)
    try:
        return work(root)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
        if started:
            import ray

            ray.shutdown()


class Sink:
    """The floor's actor: methods that do nothing, so a call costs only Ray's round trip and the
    (de)serialisation of its arguments."""

    def noop(self, *args: Any) -> int:
        return 0

    def ping(self) -> bool:
        return True


class AsyncSink:
    """:class:`Sink` as an async actor (like a ``ConversationHost``: many calls in flight).
    ``hold(reply)`` keeps an answer that ``answer(...)`` then returns, so a floor's call carries
    the bytes memray's call carries both ways."""

    def __init__(self) -> None:
        self.held: Any = None

    async def noop(self, *args: Any) -> int:
        return 0

    async def hold(self, reply: Any) -> None:
        self.held = reply

    async def answer(self, *args: Any) -> Any:
        return self.held

    async def ping(self) -> bool:
        return True


class SinkClient(Client):
    """Typed calls to an :class:`AsyncSink` (the floor's stand-in for a host or a shard)."""

    async def noop(self, *args: Any) -> int:
        return await self._call("noop", *args)  # type: ignore[no-any-return]

    async def hold(self, reply: Any) -> None:
        await self._call("hold", reply)

    async def answer(self, *args: Any) -> Any:
        return await self._call("answer", *args)

    async def ping(self) -> bool:
        return await self._call("ping")  # type: ignore[no-any-return]


def sinks(mode: str, n: int) -> list[SinkClient]:
    """``n`` no-op async actors (``mode="inprocess"``: in-process objects behind ``LocalRef``),
    as many as memray has hosts: the floors send them the very payloads memray's calls carry."""
    if mode == "ray":
        import ray

        from memray.runtime.actors import RayRef

        cls = ray.remote(AsyncSink).options(num_cpus=0, max_concurrency=10_000)
        return [SinkClient(RayRef(cls.remote(), f"sink {i}")) for i in range(n)]
    from memray.rpc.local import LocalRef

    return [SinkClient(LocalRef(AsyncSink(), f"sink {i}")) for i in range(n)]


async def pipelined(batches: Sequence[Any], inflight: int, call: Callable[[Any], Awaitable[Any]]) -> float:
    """Issue ``call(batch)`` for every batch with at most ``inflight`` outstanding; seconds."""
    from memray.progress import bar

    sem = asyncio.Semaphore(inflight)
    shown = bar(len(batches), "calls", unit="call")  # on a terminal only

    async def one(b: Any) -> None:
        async with sem:
            await call(b)
        shown.update(1)

    t0 = time.perf_counter()
    with shown:
        await asyncio.gather(*(one(b) for b in batches))
    return time.perf_counter() - t0


def _duck_type(annotation: Any) -> tuple[str, Any]:
    import pyarrow as pa

    text = str(annotation)
    if "int" in text:
        return "BIGINT", pa.int64()
    if "float" in text:
        return "DOUBLE", pa.float64()
    return "VARCHAR", pa.string()


def raw_arrow_insert(path: str, rows: Sequence[Any], batch: int) -> float:
    """The write floor: rows/s of DuckDB taking ``rows`` (named tuples, e.g. ``MessageRow``) into
    a bare table of the same columns — no keys, no upsert — as one Arrow table and one
    ``INSERT INTO t SELECT * FROM arrow`` transaction per ``batch`` rows, in a fresh file at
    ``path``. The Arrow conversion (``zip(*rows)``) is timed with it: memray has to do it too."""
    import duckdb
    import pyarrow as pa

    if not rows:
        return 0.0
    fields = type(rows[0])._fields
    kinds = [_duck_type(type(rows[0]).__annotations__.get(f, "str")) for f in fields]
    con = duckdb.connect(path)
    try:
        con.execute("CREATE TABLE t (" + ", ".join(f"{f} {k[0]}" for f, k in zip(fields, kinds)) + ")")
        t0 = time.perf_counter()
        for i in range(0, len(rows), batch):
            cols = zip(*rows[i : i + batch])
            tbl = pa.table({f: pa.array(c, k[1]) for f, c, k in zip(fields, cols, kinds)})
            con.register("batch_rows", tbl)
            con.execute("BEGIN")
            con.execute("INSERT INTO t SELECT * FROM batch_rows")
            con.execute("COMMIT")
            con.unregister("batch_rows")
        return len(rows) / (time.perf_counter() - t0)
    finally:
        con.close()


# -- text -------------------------------------------------------------------------------------

_VOCAB = [
    w
    for w in (
        "astronomy garden jazz bike sourdough chess sailing pottery bees origami robot bird ink kayak ferment "
        "river mountain coffee tea piano violin novel poem recipe oven bread cheese wine train flight hotel "
        "budget invoice meeting deadline launch release bug test deploy server cluster memory vector index "
        "query search shard actor token model prompt agent tool result error retry backoff latency throughput "
        "colour crimson teal amber violet olive indigo coral saffron slate jade lisbon osaka nairobi quito "
        "tallinn hobart cusco bergen tbilisi monday tuesday friday weekend summer winter morning evening"
    ).split()
]


def words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(_VOCAB) for _ in range(n)]


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(words(rng, n))


# -- plots ------------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_bars(
    path: str, title: str, labels: list[str], series: dict[str, list[float]], ylabel: str, log_y: bool = False
) -> None:
    """Grouped bars: one group per label, one bar per series."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.0, 0.35 * len(labels) * max(1, len(series)) / 2)), 5.0), dpi=90)
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(labels))], values, width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(labels))])
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    _finish(plt, fig, ax, path, title, ylabel, log_y)


def _finish(plt: Any, fig: Any, ax: Any, path: str, title: str, ylabel: str, log_y: bool) -> None:
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if log_y:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_lines(
    path: str,
    title: str,
    xs: list[float],
    series: dict[str, list[float]],
    xlabel: str,
    ylabel: str,
    log_y: bool = False,
) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=90)
    for name, ys in series.items():
        ax.plot(xs[: len(ys)], ys, marker="o", label=name)
    ax.set_xlabel(xlabel)
    _finish(plt, fig, ax, path, title, ylabel, log_y)


def markers(name: str, command: str) -> tuple[str, str]:
    """The comments around a docs block rendered from recorded results (``command`` writes it)."""
    return f"<!-- {name}: begin ({command}) -->", f"<!-- {name}: end -->"


def block(text: str, begin: str, end: str) -> str:
    """What a page holds between ``begin`` and ``end``."""
    return text[text.index(begin) + len(begin) : text.index(end)].strip()


def write_block(page: Path, begin: str, end: str, body: str) -> None:
    """Put ``body`` between ``begin`` and ``end`` on ``page`` (the rest of the page kept)."""
    text = page.read_text(encoding="utf-8")
    start, stop = text.index(begin) + len(begin), text.index(end)
    page.write_text(text[:start] + "\n" + body + "\n" + text[stop:], encoding="utf-8")


RESULTS = Path(__file__).resolve().parent / "results"


def recorded(name: str) -> dict[str, Any]:
    """The last JSON line of a recorded run, ``benchmarks/results/<name>`` (a file may hold the
    progress lines of a run before its result)."""
    lines = [x for x in (RESULTS / Path(name).name).read_text(encoding="utf-8").splitlines() if x.startswith("{")]
    return dict(json.loads(lines[-1]))


# Ports for servers the benchmarks and tests start: below Linux's ephemeral range (32768-60999, where
# the OS places every ``bind(port=0)``, Ray's gRPC servers included) and above Ray's worker ports
# (10002-19999). A port the OS picked and this process released could be given to such a server before
# ours binds it: that happened (a serve proxy "failed to bind" while a test run started Ray workers).
PORTS = range(20000, 32768)


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now, from ``PORTS``: no ``bind(0)`` elsewhere
    takes it before our server binds it. Tried from a random place (a generator of its own, seeded
    by the OS: a benchmark's ``random.seed`` must not make processes started together, test
    workers, try the same ports in the same order)."""
    start = random.Random().randrange(len(PORTS))
    for i in range(len(PORTS)):
        port = PORTS[(start + i) % len(PORTS)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 in {PORTS.start}-{PORTS.stop - 1}")
