"""The one module that makes cores into Ray actors.

- ``HistoryStore`` → one actor per DuckDB file (the only process that opens it).
- ``VectorShard`` → one actor per shard; ``ConversationHost`` → one async actor per host.

Actors are named ``memray:<data-root-hash>:<role>`` in the configured Ray namespace, so a second
driver that joins the same cluster with the same path reaches the same memory. They reserve no
CPU (``num_cpus=0``): on a 2-core machine they would otherwise starve each other of slots.
Ray's errors are translated here: a dead actor is :class:`~memray.errors.UnavailableError`
naming it; an error raised inside an actor is re-raised as itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util import metrics as ray_metrics

from memray import metrics
from memray.config import IndexConfig, MemoryConfig
from memray.conversation.host import ConversationHost
from memray.embedding import build_embedder
from memray.errors import UnavailableError, ValidationError
from memray.ids import stable_hash
from memray.index.recovery import RecoveringShard, Scan, ShardKeeper
from memray.runtime.deploy import shard_path
from memray.store.base import IndexRow
from memray.store.history import HistoryStore
from memray.store.rows import Namespace

__all__ = ["RayRef", "RayDeployment", "ensure_ray", "shutdown_ray"]

log = logging.getLogger(__name__)


class RayRef:
    """An :class:`~memray.runtime.ref.ActorRef` to a Ray actor."""

    def __init__(self, handle: Any, label: str) -> None:
        self.handle = handle
        self.label = label

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return await getattr(self.handle, method).remote(*args, **kwargs)
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except RayActorError as exc:
            raise UnavailableError(self.label, str(exc).splitlines()[0] if str(exc) else "actor died") from exc


def _ray_metric(kind: str, name: str, description: str, tag_keys: tuple[str, ...], boundaries: list[float] | None) -> Any:
    if kind == "counter":
        return ray_metrics.Counter(name, description=description, tag_keys=tag_keys)
    return ray_metrics.Histogram(name, description=description, boundaries=boundaries or [], tag_keys=tag_keys)


metrics.set_backend(_ray_metric)  # every process that runs memray actors imports this module


def shutdown_ray() -> None:
    ray.shutdown()


def ensure_ray(config: MemoryConfig) -> bool:
    """Join ``config.address`` or start a local Ray; True if this call started it."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"namespace": config.namespace, "ignore_reinit_error": True, "log_to_driver": False}
    if config.address:
        ray.init(address=config.address, **kwargs)
    else:
        ray.init(num_cpus=config.num_cpus or os.cpu_count(), include_dashboard=False, **kwargs)
    return True


class _PriorityGate:
    """One call at a time into the store, most urgent first: message commits (what durable lag
    waits for), then reads and other writes, then background work (vectors, scans, exports).
    Under load the background waits; nothing is reordered within a level."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._waiting = [0, 0, 0]

    @contextlib.contextmanager
    def hold(self, level: int) -> Iterator[None]:
        with self._cond:
            self._waiting[level] += 1
            while self._busy or any(self._waiting[:level]):
                self._cond.wait()
            self._waiting[level] -= 1
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


_URGENT = {"append_messages"}
_BACKGROUND = {
    "put_embeddings", "mark_embedding_failed", "pending_embeddings", "missing_embeddings",
    "scan_index_rows", "export_parquet", "purge_exports",
}


class StoreActor(HistoryStore):
    """Opens its file when the actor starts, and again when Ray restarts it. A threaded actor
    whose calls pass one at a time through a :class:`_PriorityGate` (see :func:`_gated`)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._gate = _PriorityGate()
        self.open()


def _gated(name: str) -> Callable[..., Any]:
    method = getattr(HistoryStore, name)
    level = 0 if name in _URGENT else 2 if name in _BACKGROUND else 1

    @functools.wraps(method)
    def call(self: StoreActor, *args: Any, **kwargs: Any) -> Any:
        with self._gate.hold(level):
            return method(self, *args, **kwargs)

    return call


for _name, _member in vars(HistoryStore).items():
    if callable(_member) and not _name.startswith("_") and _name != "open":
        setattr(StoreActor, _name, _gated(_name))


class ShardActor(RecoveringShard):
    """Loads its snapshot when the actor starts or restarts, then a :class:`ShardKeeper` thread
    brings it level with the store (searches degrade until then) and snapshots it every
    ``config.snapshot_every_s`` (see :mod:`memray.index.recovery` for why a thread)."""

    def __init__(
        self, shard_id: int, path: str, dim: int, model_id: str, config: IndexConfig, store: RayRef, shards: int,
    ) -> None:
        # Ray restarts an actor with the arguments it was created with; a re-embedding job may have
        # cut over to another model since: the data directory's record wins (path = <root>/vectors/shard-i).
        from memray.embedding.active import read_active_model

        record = read_active_model(os.path.dirname(os.path.dirname(path)))
        if record is not None:
            dim, model_id = record.dim, record.model_id
        super().__init__(shard_id, path, dim, model_id, config, recovering=True)
        self.open()
        self._keeper = ShardKeeper(self._call_self, self._scan(store.handle, shards), config.snapshot_every_s)
        self._keeper.start(f"memray-shard-{shard_id}-keeper")

    @staticmethod
    def _call_self(method: str, *args: Any) -> Any:
        """Run ``method`` as a call on this actor's own handle: queued with every other call."""
        return ray.get(getattr(ray.get_runtime_context().current_actor, method).remote(*args))

    def _scan(self, store: Any, shards: int) -> Scan:
        def scan(after: tuple[Namespace, str] | None, limit: int) -> list[IndexRow]:
            rows: list[IndexRow] = ray.get(
                store.scan_index_rows.remote(self.shard_id, shards, self.model_id, after, limit, True)
            )
            return rows

        return scan

    def close(self) -> None:
        self._keeper.stop(timeout_s=0)  # never join: its pending call on this actor waits for us
        super().close()


def _check_picklable(embedder: object) -> None:
    """The host actors get the caller's own embedder by pickle (cloudpickle, as Ray does)."""
    try:
        ray.cloudpickle.dumps(embedder)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ValidationError("embedder", embedder, f"cannot be pickled to the Ray actors ({type(exc).__name__}: {exc})",
                              "make it picklable (no locks or open clients: create them lazily), or use mode='inprocess'") from exc


class RayDeployment:
    """The cores as named Ray actors (``mode="ray"``)."""

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.prefix = f"memray:{stable_hash(config.root):016x}"

    def _options(self, role: str, **extra: Any) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "name": f"{self.prefix}:{role}", "namespace": self.config.namespace, "get_if_exists": True,
            "num_cpus": 0, "max_restarts": -1, "max_task_retries": 0,
        }
        if self.config.address:
            opts["lifetime"] = "detached"  # outlives this driver: other drivers share it
        opts.update(extra)
        return opts

    def create(self) -> None:
        cfg = self.config
        if cfg.embedder.kind == "custom":
            _check_picklable(cfg.embedder.custom)
        embedder = build_embedder(cfg.embedder)
        dim = embedder.dim if embedder is not None else cfg.embedder.dim
        model_id = embedder.model_id if embedder is not None else "none"
        pin = {"resources": {cfg.store_resource: 0.01}} if cfg.store_resource else {}
        store = ray.remote(StoreActor).options(**self._options("store", max_concurrency=32, **pin)).remote(cfg.store_path)
        self.store = RayRef(store, "history store")
        self.shards = [
            RayRef(
                ray.remote(ShardActor).options(**self._options(f"shard-{i}")).remote(
                    i, shard_path(cfg, i), dim, model_id, cfg.index, self.store, cfg.shards
                ),
                f"shard {i}",
            )
            for i in range(cfg.shards)
        ]
        self.hosts = [
            RayRef(
                ray.remote(ConversationHost).options(**self._options(f"host-{i}", max_concurrency=10_000)).remote(i, cfg, self.store, self.shards),
                f"host {i}",
            )
            for i in range(cfg.hosts)
        ]

    async def start(self) -> None:
        os.makedirs(self.config.root, exist_ok=True)
        self.create()
        await self.store.call("ping")
        await asyncio.gather(*(s.call("ping") for s in self.shards))
        await asyncio.gather(*(self._recovered(s) for s in self.shards))
        await asyncio.gather(*(h.call("start") for h in self.hosts))

    async def _recovered(self, shard: RayRef, timeout_s: float = 30.0) -> None:
        """Wait (bounded) for a shard's first catch-up with the store, so a fresh ``open`` does
        not answer its first searches degraded; past the bound it carries on (degraded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while await shard.call("is_recovering") and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def stop(self, terminate: bool) -> None:
        """Flush; with ``terminate`` also close and kill every actor."""
        if not terminate:
            await asyncio.gather(*(h.call("flush") for h in self.hosts))
            await asyncio.gather(*(s.call("snapshot") for s in self.shards))
            return
        try:
            await asyncio.gather(*(h.call("close") for h in self.hosts))
            # a shard's close is only a snapshot (indexes are derived data): one that is down or
            # restarting must not keep the store from closing nor the actors from being killed
            closed = await asyncio.gather(*(s.call("close") for s in self.shards), return_exceptions=True)
            for shard, result in zip(self.shards, closed):
                if isinstance(result, Exception):
                    log.warning("%s did not close cleanly (%r); it recovers from the store", shard.label, result)
            await self.store.call("close")
        finally:
            for ref in [*self.hosts, *self.shards, self.store]:
                ray.kill(ref.handle, no_restart=True)
