"""How late a retried call reaches an actor that Ray restarts, against Ray saying it is alive.

    python -m benchmarks.restart_micro --rounds 4 --init-s 1.0

The choice it decided: ``RayRef`` holds the calls made while its actor restarts
(:class:`memray.rpc.ref.Restart`) and memray's local Ray fails a call whose actor died at once
(``RAY_SYSTEM_CONFIG``: ``timeout_ms_task_wait_for_death_info=0``). One actor like memray's
(``max_restarts=-1``, ``max_task_retries=0``) whose constructor takes ``--init-s`` (a store
opening its file); each round SIGKILLs its process while a long call runs on it, and a caller
retries that call as memray's persist chain does (backoff 0.05 s doubling to 0.25 s) through
a ``RayRef``, until it answers. Figures per variant (Ray's death-info wait on or off, the hold
on or off), over the rounds:

- ``alive_s``: kill → Ray's control plane has the actor ``ALIVE`` (the restart itself: the floor);
- ``answered_s``: kill → the retried call answered; ``late_s``: ``answered_s - alive_s``, what
  the caller lost on top of the restart (the figure the choice is about);
- ``failed_calls``: attempts that failed before one answered.

Each variant starts its own local Ray (the death-info wait is a setting of the whole Ray).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import time
from typing import Any

from benchmarks._harness import emit, log

VARIANTS = {  # name: (Ray's death-info wait in ms, calls held while the actor restarts)
    "ray_default": (1000, False),
    "held": (1000, True),
    "no_death_wait": (0, False),
    "memray": (0, True),  # both: what memray does
}


class SlowStart:
    """An actor whose (re)start takes ``init_s``, like a store opening its file."""

    def __init__(self, init_s: float) -> None:
        time.sleep(init_s)

    def pid(self) -> int:
        return os.getpid()

    def hold(self, seconds: float) -> int:
        time.sleep(seconds)
        return os.getpid()


async def one_round(ref: Any, hold: bool) -> dict[str, float]:
    """Kill the actor under a long call; retry it until it answers (see the module docstring)."""
    from memray.errors import UnavailableError

    if not hold:
        ref.restart.began = lambda: None  # the ref as it was: calls go straight into the restart
    pid = await ref.call("pid")
    in_flight = asyncio.ensure_future(ref.call("hold", 5.0))
    await asyncio.sleep(0.1)  # the long call runs
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    alive = asyncio.ensure_future(_alive_again(ref, killed))
    failed, delay, call = 0, 0.05, in_flight
    while True:
        try:
            await call
            break
        except UnavailableError:
            failed += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)
            call = asyncio.ensure_future(ref.call("hold", 0.0))
    answered_s = time.monotonic() - killed
    alive_s = await alive
    return {"alive_s": alive_s, "answered_s": answered_s, "late_s": answered_s - alive_s, "failed_calls": failed}


async def _alive_again(ref: Any, killed: float) -> float:
    """Seconds from the kill until Ray's control plane has the actor ALIVE after a restart."""
    restarted = False
    while True:
        where = await ref.placement()
        if where is not None and where.state != "ALIVE":
            restarted = True
        elif restarted:
            return time.monotonic() - killed
        await asyncio.sleep(0.005)


def variant(name: str, rounds: int, init_s: float) -> dict[str, Any]:
    import ray

    from memray.runtime.actors import RayRef

    death_ms, hold = VARIANTS[name]
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        _system_config={"timeout_ms_task_wait_for_death_info": death_ms},
    )
    try:
        actor: Any = ray.remote(SlowStart)
        handle = actor.options(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=4).remote(init_s)
        ref = RayRef(handle, "slow starter")
        runs = [asyncio.run(one_round(ref, hold)) for _ in range(rounds)]
    finally:
        ray.shutdown()
    out: dict[str, Any] = {"death_info_wait_ms": death_ms, "held": hold}
    for key in ("alive_s", "answered_s", "late_s", "failed_calls"):
        values = [r[key] for r in runs]
        out[key] = {"median": round(statistics.median(values), 3), "max": round(max(values), 3)}
    log(f"{name}: late {out['late_s']}, alive {out['alive_s']}")
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="kills per variant")
    parser.add_argument("--init-s", type=float, default=1.0, help="how long the actor's constructor takes")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    results = {name: variant(name, args.rounds, args.init_s) for name in names}
    return emit("restart_micro", {"rounds": args.rounds, "init_s": args.init_s, "variants": names}, results)


if __name__ == "__main__":
    main()
