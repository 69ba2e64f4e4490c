"""What both jobs share: arguments, connecting to memray, progress files, log and result lines.

Connecting: the DuckDB file can be opened by one process only, so a job never opens it itself.
It joins Ray (``--address`` or a local instance), then :func:`memray.open` in ray mode: the named
actors of a running memray (same path and namespace) are joined; if none run, they are created
and the job closes them when it ends.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import tempfile
import time
import warnings
from typing import Any

import memray
from memray.cli_args import add_data_dir
from memray.config import MemoryConfig
from memray.ids import stable_hash
from memray.store.layout import data_directory

__all__ = ["add_common_args", "config_from_args", "connect", "ProgressFile", "log", "emit", "fail_point", "pool_args"]


def add_common_args(parser: argparse.ArgumentParser) -> None:
    add_data_dir(parser, "the memray data directory (required)")
    parser.add_argument(
        "--config", default=None, help="a MemoryConfig as a JSON file, flags override it (default: none)"
    )
    parser.add_argument("--address", default=None, help="Ray cluster to join (default: RAY_ADDRESS or a local Ray)")
    parser.add_argument("--namespace", default=None, help="Ray namespace of memray's actors (default: memray)")
    parser.add_argument(
        "--hosts",
        type=int,
        default=None,
        help="ConversationHost actors when the job starts memray (default: 4, or the --config's)",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=None,
        help="VectorShard actors, must match the running memray (default: 2, or the --config's)",
    )
    parser.add_argument(
        "--stores",
        type=int,
        default=None,
        help="history partitions (default: the count the data directory records, or the --config's)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="actors in the Ray Data pool (default: one per free CPU, or per free GPU for a local model)",
    )
    parser.add_argument(
        "--cpus-per-worker",
        type=float,
        default=None,
        help="CPUs each pool actor reserves (default: an even share of the free CPUs)",
    )
    parser.add_argument("--verbose", action="store_true", help="show Ray's and Ray Data's own log lines")


def config_from_args(args: argparse.Namespace) -> MemoryConfig:
    base: dict[str, Any] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            base = json.load(f)
    stores = data_directory(args.path)  # an existing memray's, or a one-line error naming the path
    updates = {
        "path": args.path,
        "mode": "ray",
        "address": args.address or os.environ.get("RAY_ADDRESS") or base.get("address"),
        "verbose": bool(getattr(args, "verbose", False) or base.get("verbose", False)),
    }
    for name in ("namespace", "hosts", "shards", "stores"):
        if getattr(args, name, None) is not None:
            updates[name] = getattr(args, name)
    if "stores" not in updates and "stores" not in base:
        updates["stores"] = stores
    return MemoryConfig.model_validate({**base, **updates})


def connect(config: MemoryConfig) -> tuple[Any, bool]:
    """Join Ray and memray. Returns ``(memory, owned)``; ``owned`` is True when this job created
    memray's actors (nothing was running) and must terminate them when it is done."""
    import ray  # memray.jobs imports without Ray (tests/test_layers.py): ray when a job runs

    from memray.runtime.actors import ensure_ray

    config = ensure_ray(config).config  # a running memray's Ray, namespace and shape; quiet unless verbose
    role = "store" if config.stores == 1 else "store-0"  # the first history partition's actor
    name = f"memray:{stable_hash(config.root):016x}:{role}"
    try:
        ray.get_actor(name, namespace=config.namespace)
        running = True
    except ValueError:
        running = False
    log("joining the running memray" if running else "memray is not running: starting it for this job", config.root)
    return memray.open(config=config), not running


def pool_args(workers: int, verbose: bool) -> dict[str, Any]:
    """``map_batches`` arguments for a job's actor pool, and Ray Data's console kept quiet.

    - The pool starts ``workers`` actors and may shrink to one: a fixed size warns whenever the
      input has fewer blocks than workers (small exports).
    - ``max_restarts=0``: Ray Data passes its pool actors their function through the object
      store, which Ray cannot promise to keep for a restart (it says so at error level). A job
      whose pool actor dies fails instead, and resumes where it stopped when run again. Ray Data
      2.60 takes it only among the extra remote arguments it has deprecated (for removal in
      2.64); that notice is for this code, not for the job's user, so it is not shown.
    - Unless ``verbose``, Ray Data's console shows errors only (not each dataset's start, plan
      and end); its log file in the Ray session's ``logs/ray-data`` keeps everything. Only Ray's
      own console handler is quieted: a handler someone else attached to ``ray.data`` (the
      application's; pytest attaches its capture handler to every logger that does not
      propagate) keeps its level.
    """
    import ray.data  # 580 ms (python -X importtime), and memray.jobs imports without Ray

    warnings.filterwarnings("ignore", message=r".*`ray_remote_args` is deprecated")
    ray.data.DataContext.get_current().enable_progress_bars = False  # the job draws its own bar
    if not verbose:
        for handler in logging.getLogger("ray.data").handlers:
            if _ray_console(handler):
                handler.setLevel(logging.ERROR)
    return {
        "compute": ray.data.ActorPoolStrategy(min_size=1, max_size=workers, initial_size=workers),
        "max_restarts": 0,
    }


def _ray_console(handler: logging.Handler) -> bool:
    """Whether ``handler`` is a console handler Ray made (not a file, not another's handler)."""
    return (
        type(handler).__module__.startswith("ray.")
        and isinstance(handler, logging.StreamHandler)
        and not isinstance(handler, logging.FileHandler)
    )


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
    """Raise if ``MEMRAY_JOB_FAIL_AT`` is ``name`` (or ``name:N`` and ``count >= N``); with
    ``name:N:sigint``, send this process a SIGINT instead (once), as a Ctrl-C would."""
    spec = os.environ.get("MEMRAY_JOB_FAIL_AT", "")
    if not spec:
        return
    at, _, rest = spec.partition(":")
    n, _, action = rest.partition(":")
    if at == name and count >= int(n or 1):
        if action == "sigint":
            del os.environ["MEMRAY_JOB_FAIL_AT"]
            signal.raise_signal(signal.SIGINT)
            return
        raise InjectedFailure(f"injected failure at {name} ({count})")
