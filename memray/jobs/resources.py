"""How many CPUs (and GPUs) a job's actor pool reserves: derived from what the cluster has free,
and checked before anything starts, so a job never waits forever for a slot.

The failure this prevents: Ray Data's read tasks need CPU slots of their own. A pool that
reserves what the read tasks need (two workers x 1 CPU on a 2-CPU machine) leaves them nowhere
to run; the pool then waits for input that never comes, with no error. Reservations are logical
(Ray counts them, the OS does not): a reading slot of a quarter CPU is plenty for Parquet
decoding, and the pool takes what is left, split evenly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memray.errors import ValidationError

__all__ = ["PoolPlan", "plan_pool", "free_resources", "READ_CPUS", "MIN_CPUS_PER_WORKER"]

#: CPUs each Ray Data read task reserves (Ray's default is a whole one).
READ_CPUS = 0.25
#: The least a pool actor may reserve: below it the reservation stops meaning anything.
MIN_CPUS_PER_WORKER = 0.05


@dataclass(frozen=True)
class PoolPlan:
    """A job's actor pool: ``workers`` actors, each reserving ``cpus_per_worker`` CPUs and
    ``gpus_per_worker`` GPUs, running ``threads`` compute threads (a local model's torch
    threads); each read task reserves ``read_cpus``; ``free_cpus`` were free when planned."""

    workers: int
    cpus_per_worker: float
    gpus_per_worker: float
    read_cpus: float
    threads: int
    free_cpus: float

    def describe(self) -> str:
        gpus = f", {self.gpus_per_worker:g} GPU" if self.gpus_per_worker else ""
        return (
            f"{self.workers} workers x {self.cpus_per_worker:.2f} CPUs{gpus} ({self.threads} threads each), "
            f"{self.read_cpus:g} CPU per read task; {self.free_cpus:g} CPUs free"
        )


def plan_pool(
    free_cpus: float,
    free_gpus: float,
    workers: int | None = None,
    cpus_per_worker: float | None = None,
    use_gpus: bool = False,
    read_cpus: float = READ_CPUS,
) -> PoolPlan:
    """The pool for a cluster with ``free_cpus`` / ``free_gpus`` unreserved.

    ``workers`` defaults to one per free GPU when ``use_gpus`` and the cluster has any, else to
    one per whole free CPU; ``cpus_per_worker`` defaults to an even share of what the read tasks
    leave. Raises :class:`ValidationError` (saying what would fit) when the pool plus one read
    task does not fit in what is free."""
    gpus = 1.0 if use_gpus and free_gpus >= 1 else 0.0
    if workers is None:
        workers = max(1, int(free_gpus) if gpus else math.floor(free_cpus))
    if workers < 1:
        raise ValidationError("workers", workers, "must be at least 1")
    if gpus and workers > free_gpus:
        raise ValidationError(
            "workers", workers, f"each worker takes a GPU and {free_gpus:g} are free", f"use --workers {int(free_gpus)}"
        )
    room = free_cpus - read_cpus
    if cpus_per_worker is None:
        cpus_per_worker = math.floor(room / workers * 100) / 100
    need = workers * cpus_per_worker + read_cpus
    if cpus_per_worker < MIN_CPUS_PER_WORKER or need > free_cpus + 1e-9:
        fit = max(0, math.floor(room / max(cpus_per_worker, MIN_CPUS_PER_WORKER)))
        share = math.floor(room / workers * 100) / 100
        hint = (
            f"use --workers {fit} or fewer, or --cpus-per-worker {share:g} or less"
            if fit and share >= MIN_CPUS_PER_WORKER
            else "free some CPUs (another job or Ray Data pool may hold them) or join a bigger cluster"
        )
        raise ValidationError(
            "workers",
            workers,
            f"the pool cannot fit: {workers} x {cpus_per_worker:g} CPUs plus {read_cpus:g} for Ray Data's read "
            f"tasks = {need:g} CPUs, and the cluster has {free_cpus:g} free",
            hint,
        )
    threads = 1 if gpus else max(1, math.floor(cpus_per_worker))
    return PoolPlan(workers, cpus_per_worker, gpus, read_cpus, threads, free_cpus)


def free_resources() -> tuple[float, float]:
    """(CPUs, GPUs) no task or actor of the connected Ray has reserved now."""
    import ray  # memray.jobs imports without Ray (tests/test_layers.py): ray when a job runs

    free = ray.available_resources()  # type: ignore[no-untyped-call]
    return float(free.get("CPU", 0.0)), float(free.get("GPU", 0.0))
