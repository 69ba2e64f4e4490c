"""Fork time: ``mem.fork(path)`` of a memray with many conversations, taken while agents write,
against a raw copy of the same data directory measured in the same run.

    python -m benchmarks.fork --conversations 10000 --messages 5 --writers 2 --repeat 3 \
        --plot benchmarks/results/fork.png

A fresh memray gets ``--conversations`` conversations of ``--messages`` messages each
(``add_many``, then ``wait_indexed``), a working-memory note on every tenth conversation and
long-term entries for every hundredth user. Then, ``--repeat`` times, it forks into a new folder
twice: ``quiet`` (nothing else running) and ``writing`` (``--writers`` threads add ``--rate``
messages/s in all to random conversations, as agents would, for the whole fork):

- ``copy_s``: what ``fork()`` takes to make the copy (flush + store copy + shard snapshots
  linked: ``fork_info["seconds"]``); ``ready_s``: until the fork is open and searchable (the
  fork's actors started, its shards reconciled with its store);
- the floors: ``shutil.copytree`` of the source data directory (after a flush and snapshot, so
  it holds the same data), the same with every file and folder fsynced (the fork is durable when
  it returns, so this is the fair floor), and ``shutil.copyfile`` of the DuckDB file alone. They
  copy bytes only: none is consistent while agents write. ``open_copy_s`` is what opening that
  raw copy as a memray costs (actors started, snapshots loaded): ``ready_s`` of a fork is its copy
  plus such an open plus the reconciliation, so ``copytree_fsync_s + open_copy_s`` is its floor.

``written_per_s`` (messages the writers got acknowledged per second of the fork) says whether
agents stalled meanwhile.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import threading
import time
from typing import Any

import memray
from benchmarks._harness import common_args, emit, in_data_dir, log, plot_bars, ratio, sentence
from memray import MemoryEntry
from memray.files import fsync_dir

APP = "bench"


def fill(mem: memray.Memory, conversations: int, messages: int, rng: random.Random) -> list[memray.ConversationHandle]:
    handles = [
        mem.conversation(user_id=f"user-{c // 10}", conversation_id=f"conv-{c}", app=APP) for c in range(conversations)
    ]
    batch: list[tuple[memray.ConversationHandle, list[dict[str, Any]]]] = []
    for h in handles:
        batch.append(
            (
                h,
                [
                    {
                        "role": "user" if j % 2 == 0 else "assistant",
                        "content": sentence(rng, 10),
                        "sim_time": float(j * 60),
                    }
                    for j in range(messages)
                ],
            )
        )
        if len(batch) * messages >= 5_000:
            mem.add_many(batch)
            batch = []
    if batch:
        mem.add_many(batch)
    for h in handles[::10]:
        h.working_memory.update(f"notes of {h.key.conversation_id}")
    svc = mem.memory_service
    for u in range(0, max(1, conversations // 10), 10):
        svc.add_entries(APP, f"user-{u}", [MemoryEntry(content=sentence(rng, 8)) for _ in range(3)])
    assert mem.wait_indexed(600), "indexing did not finish"
    return handles


def copy_durably(src: str, dst: str) -> None:
    """``copytree``, then fsync every file and folder: a copy that survives a crash, as a fork's does."""
    shutil.copytree(src, dst)
    for d, _, names in os.walk(dst):
        for name in names:
            with open(os.path.join(d, name), "rb+") as f:
                os.fsync(f.fileno())
        fsync_dir(d)


def dir_bytes(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(root) for f in names)


def fork_once(
    mem: memray.Memory, handles: list[memray.ConversationHandle], dst: str, writers: int, rate: float
) -> dict[str, Any]:
    """One fork into ``dst`` while ``writers`` threads add ``rate`` messages/s in all (0: none).
    Returns its timings; the fork is closed and removed."""
    stop = threading.Event()
    counts = [0] * writers

    def write(w: int) -> None:
        wr = random.Random(w)
        batch = 10
        pause = batch * writers / rate
        while not stop.is_set():
            t = time.perf_counter()
            mem.add_many(
                [
                    (handles[wr.randrange(len(handles))], [{"role": "user", "content": sentence(wr, 8)}])
                    for _ in range(batch)
                ]
            )
            counts[w] += batch
            stop.wait(max(0.0, pause - (time.perf_counter() - t)))  # agents at a steady rate

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers if rate > 0 else 0)]
    for th in threads:
        th.start()
    t = time.perf_counter()
    fork = mem.fork(dst)
    ready = time.perf_counter() - t
    stop.set()
    for th in threads:
        th.join()
    info = dict(fork.fork_info or {})
    out = {
        "copy_s": float(info["seconds"]),
        "ready_s": ready,
        "flush_s": float(info["flush_s"]),
        "store_s": float(info["store_s"]),
        "shards_s": float(info["shards_s"]),
        "bytes": dir_bytes(dst),
        "written_per_s": sum(counts) / ready,
    }
    fork.close()
    shutil.rmtree(dst, ignore_errors=True)
    return out


def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    rng = random.Random(args.seed)
    src = os.path.join(root, "source")
    cfg = memray.MemoryConfig(path=src, mode=args.mode, address=args.address, hosts=args.hosts, shards=args.shards)
    mem = memray.open(config=cfg)
    runs: dict[str, list[dict[str, Any]]] = {"quiet": [], "writing": []}
    floors: list[float] = []
    file_floors: list[float] = []
    synced: list[float] = []
    opens: list[float] = []
    try:
        t0 = time.perf_counter()
        handles = fill(mem, args.conversations, args.messages, rng)
        log(f"filled {args.conversations} conversations in {time.perf_counter() - t0:.1f} s")
        for r in range(args.repeat):
            mem.flush()
            mem.internals.run(mem.internals.router.snapshot())
            t = time.perf_counter()
            shutil.copytree(src, os.path.join(root, f"raw-{r}"))
            floors.append(time.perf_counter() - t)
            t = time.perf_counter()
            shutil.copyfile(cfg.store_path, os.path.join(root, f"raw-{r}.duckdb"))
            file_floors.append(time.perf_counter() - t)
            t = time.perf_counter()
            copy_durably(src, os.path.join(root, f"raw-{r}-fsync"))
            synced.append(time.perf_counter() - t)
            t = time.perf_counter()  # what opening a memray of this size costs, fork or not
            memray.open(config=cfg.model_copy(update={"path": os.path.join(root, f"raw-{r}")})).close(terminate=True)
            opens.append(time.perf_counter() - t)
            for extra in (f"raw-{r}", f"raw-{r}-fsync"):
                shutil.rmtree(os.path.join(root, extra))
            os.unlink(os.path.join(root, f"raw-{r}.duckdb"))
            runs["quiet"].append(fork_once(mem, handles, os.path.join(root, f"fork-q{r}"), 0, 0.0))
            runs["writing"].append(fork_once(mem, handles, os.path.join(root, f"fork-w{r}"), args.writers, args.rate))
            log(
                f"round {r}: raw copytree {floors[-1]:.2f} s; quiet fork copy {runs['quiet'][-1]['copy_s']:.2f} s "
                f"ready {runs['quiet'][-1]['ready_s']:.2f} s; writing fork copy {runs['writing'][-1]['copy_s']:.2f} s "
                f"ready {runs['writing'][-1]['ready_s']:.2f} s"
            )
        source_bytes = dir_bytes(src)
        store_bytes = os.path.getsize(cfg.store_path)
    finally:
        mem.close()
    med = statistics.median

    def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
        keys = ("copy_s", "ready_s", "flush_s", "store_s", "shards_s", "written_per_s")
        out: dict[str, Any] = {k: round(med(r[k] for r in rows), 3) for k in keys}
        out["copy_s_all"] = [round(r["copy_s"], 3) for r in rows]
        out["fork_dir_bytes"] = rows[-1]["bytes"]
        return out

    floor = med(floors)
    quiet, writing = summary(runs["quiet"]), summary(runs["writing"])
    return {
        "quiet": quiet,
        "writing": writing,
        "floor": {
            "copytree_s": round(floor, 3),
            "copytree_fsync_s": round(med(synced), 3),
            "open_copy_s": round(med(opens), 3),
            "duckdb_copyfile_s": round(med(file_floors), 3),
            "source_dir_bytes": source_bytes,
            "duckdb_bytes": store_bytes,
        },
        "ratio_quiet_copy_to_copytree": ratio(quiet["copy_s"], floor),
        "ratio_writing_copy_to_copytree": ratio(writing["copy_s"], floor),
        "ratio_quiet_copy_to_copytree_fsync": ratio(quiet["copy_s"], med(synced)),
        "ratio_quiet_ready_to_copytree_fsync_plus_open": ratio(quiet["ready_s"], med(synced) + med(opens)),
        "ratio_writing_copy_to_copytree_fsync": ratio(writing["copy_s"], med(synced)),
    }


def plot(path: str, result: dict[str, Any]) -> None:
    floor = result["floor"]
    labels = ["quiet copy", "writing copy", "copytree+fsync", "quiet ready", "writing ready", "copytree+fsync+open"]
    values = [
        result["quiet"]["copy_s"],
        result["writing"]["copy_s"],
        floor["copytree_fsync_s"],
        result["quiet"]["ready_s"],
        result["writing"]["ready_s"],
        floor["copytree_fsync_s"] + floor["open_copy_s"],
    ]
    plot_bars(
        path,
        "fork time (s) vs a raw copy of the data directory (and opening it)",
        labels,
        {"seconds": values},
        "seconds",
        log_y=True,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(ap)
    ap.add_argument("--conversations", type=int, default=10_000)
    ap.add_argument("--messages", type=int, default=5, help="messages per conversation")
    ap.add_argument("--writers", type=int, default=2, help="threads adding messages during the 'writing' forks")
    ap.add_argument("--rate", type=float, default=2_000.0, help="messages/s the writers add in all")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--shards", type=int, default=2)
    args = ap.parse_args(argv)
    result = in_data_dir(args, "memray-bench-fork-", lambda root: run(args, root))
    if args.plot:
        plot(args.plot, result)
    params = {k: v for k, v in vars(args).items() if k not in ("plot", "dir")}
    return emit("fork", params, result)


if __name__ == "__main__":
    main()
