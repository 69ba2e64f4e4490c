"""What both jobs share: arguments, connecting to memray, progress files, log and result lines.

Connecting: the DuckDB file can be opened by one process only, so a job never opens it itself.
It joins Ray (``--address`` or a local instance), then :func:`memray.open` in ray mode: the named
actors of a running memray (same path and namespace) are joined; if none run, they are created
and the job closes them when it ends.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

from memray.config import MemoryConfig

__all__ = ["add_common_args", "config_from_args", "connect", "ProgressFile", "log", "emit", "fail_point"]


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", required=True, help="memray data directory")
    parser.add_argument("--config", default=None, help="a MemoryConfig as a JSON file (flags override it)")
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: RAY_ADDRESS or a local Ray)")
    parser.add_argument("--namespace", default=None, help="Ray namespace of memray's actors (default: memray)")
    parser.add_argument("--hosts", type=int, default=None, help="ConversationHost actors when the job starts memray")
    parser.add_argument("--shards", type=int, default=None, help="VectorShard actors (must match the running memray)")
    parser.add_argument("--workers", type=int, default=2, help="actors in the Ray Data pool")
    parser.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs each pool actor reserves")


def config_from_args(args: argparse.Namespace) -> MemoryConfig:
    base: dict[str, Any] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            base = json.load(f)
    updates = {"path": args.path, "mode": "ray", "address": args.address or os.environ.get("RAY_ADDRESS") or base.get("address")}
    for name in ("namespace", "hosts", "shards"):
        if getattr(args, name) is not None:
            updates[name] = getattr(args, name)
    return MemoryConfig.model_validate({**base, **updates})


def connect(config: MemoryConfig) -> tuple[Any, bool]:
    """Join Ray and memray. Returns ``(memory, owned)``; ``owned`` is True when this job created
    memray's actors (nothing was running) and must terminate them when it is done."""
    import ray

    import memray
    from memray.ids import stable_hash

    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"namespace": config.namespace, "log_to_driver": False}
        if config.address:
            ray.init(address=config.address, **kwargs)
        else:
            ray.init(num_cpus=config.num_cpus, include_dashboard=False, **kwargs)
    name = f"memray:{stable_hash(config.root):016x}:store"
    try:
        ray.get_actor(name, namespace=config.namespace)
        running = True
    except ValueError:
        running = False
    log("joining the running memray" if running else "memray is not running: starting it for this job", config.root)
    return memray.open(config=config), not running


class ProgressFile:
    """A job's resumable state, as JSON in ``<root>/jobs/<name>.json``."""

    def __init__(self, root: str, name: str) -> None:
        self.path = os.path.join(root, "jobs", f"{name}.json")

    def load(self) -> dict[str, Any] | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                state: dict[str, Any] = json.load(f)
                return state
        except FileNotFoundError:
            return None

    def save(self, state: dict[str, Any]) -> None:
        """Durability: temp file, fsync, rename over the old one; a crash keeps one whole state."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".progress.", dir=os.path.dirname(self.path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


_T0 = time.monotonic()


def log(message: str, *extra: object) -> None:
    """A progress line on stderr (stdout carries only the final JSON line)."""
    tail = " ".join(str(e) for e in extra)
    print(f"[{time.monotonic() - _T0:8.1f}s] {message}{' ' + tail if tail else ''}", file=sys.stderr, flush=True)


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)


class InjectedFailure(RuntimeError):
    """Raised by :func:`fail_point` (tests kill a job mid-run this way)."""


def fail_point(name: str, count: int = 1) -> None:
    """Raise if ``MEMRAY_JOB_FAIL_AT`` is ``name`` (or ``name:N`` and ``count >= N``)."""
    spec = os.environ.get("MEMRAY_JOB_FAIL_AT", "")
    if not spec:
        return
    at, _, n = spec.partition(":")
    if at == name and count >= int(n or 1):
        raise InjectedFailure(f"injected failure at {name} ({count})")
