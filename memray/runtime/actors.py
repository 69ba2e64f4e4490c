"""The one module that makes cores into Ray actors.

- ``HistoryStore`` → one actor per history partition's DuckDB file (the only process that opens
  it), on nodes offering ``store_resource`` when set. Every actor is placed with ``SPREAD``.
- ``VectorShard`` → one actor per shard; ``ConversationHost`` → one async actor per host.

Actors are named ``memray:<data-root-hash>:<role>`` in the configured Ray namespace, so a second
driver that joins the same cluster with the same path reaches the same memory. They reserve no
CPU (``num_cpus=0``): on a 2-core machine they would otherwise starve each other of slots.
Ray's errors are translated here: a dead actor is :class:`~memray.errors.UnavailableError`
naming it; an error raised inside an actor is re-raised as itself.

Actors are given the *names* of the actors they call, never their handles: an actor handle in a
constructor's arguments lives in the object store, and Ray cannot promise that such an argument
survives until a restart (it says so at error level for every such actor). A (re)started actor
looks its peers up by name, so it also reaches a peer that was itself restarted.

Ray's own log lines are kept off the terminal unless ``MemoryConfig.verbose``: they are about
Ray's internals (token auth, signal handlers, worker start-up), not something a memray user
acts on. memray's own warnings and errors are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util import metrics as ray_metrics

from memray import metrics, tracing
from memray.config import PLACEMENT_TIMEOUT_S, EmbedderConfig, IndexConfig, MemoryConfig
from memray.conversation.client import HostClient
from memray.conversation.host import ConversationHost
from memray.errors import StoreError, UnavailableError, ValidationError
from memray.ids import stable_hash
from memray.index.client import ShardClient
from memray.index.keeper import LEVEL_AFTER_S, ShardKeeper
from memray.index.recovery import RecoveringShard
from memray.rpc.gate import PriorityGate
from memray.rpc.ref import Liveness, Placement, Restart, watched
from memray.runtime.collector import raise_thresholds
from memray.runtime.deploy import (
    active_model,
    shard_embedder,
    shard_model,
    shard_path,
    stop_cores,
    store_label,
    store_roles,
)
from memray.runtime.join import RayAuth, running_memray
from memray.service.client import KeyRingClient
from memray.service.keys import KeyRing
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.layout import check_stores, store_files
from memray.store.partitions import StorePartitions
from memray.tracing import state as _tracing

__all__ = [
    "RayRef",
    "RayDeployment",
    "RayConnection",
    "ensure_ray",
    "shutdown_ray",
    "ray_is_up",
    "named_ref",
    "never_cancelled",
    "RAY_SYSTEM_CONFIG",
]

T = TypeVar("T")


class RayRef:
    """An :class:`~memray.rpc.ref.ActorRef` to a Ray actor. A call whose actor Ray has had on no
    node for ``placement_timeout_s`` — or, for a memray actor (``probe``: it answers
    :meth:`Probed.alive`), whose process has answered nothing that long — raises
    UnavailableError (:func:`~memray.rpc.ref.watched`). Once a call has found the actor dead,
    the calls made while Ray restarts it wait until it is alive again (:class:`~memray.rpc.ref.Restart`)."""

    def __init__(
        self, handle: Any, label: str, placement_timeout_s: float = PLACEMENT_TIMEOUT_S, probe: bool = False
    ) -> None:
        self.handle = handle
        self.label = label
        self.placement_timeout_s = placement_timeout_s
        self.liveness = Liveness(self._alive) if probe else None
        back = self._alive if probe else self._answers
        self.restart = Restart(self.placement, back, label, placement_timeout_s, offered=ray.cluster_resources)

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        await self.restart.passed()
        try:
            if _tracing.on and (headers := tracing.carrier()) is not None:  # the actor continues the trace
                remote = self.handle.traced_call.remote(headers, method, args, kwargs)
            else:
                remote = getattr(self.handle, method).remote(*args, **kwargs)
            reply = remote.as_future(_internal=True)
            return await watched(reply, self.placement, self.label, self.placement_timeout_s, liveness=self.liveness)
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        except RayActorError as exc:
            self.restart.began()
            detail = _ANSI.sub("", str(exc)).strip()
            detail = detail.splitlines()[0] if detail else "actor died"
            raise UnavailableError(self.label, detail + await self._stranded()) from exc

    async def _stranded(self) -> str:
        """Why the actor will not come back and what to do, if no live node offers what it asks for."""
        try:
            where = await self.placement()
            return where.stranded(ray.cluster_resources()) if where is not None else ""  # type: ignore[no-untyped-call]
        except Exception:  # the control plane did not answer: Ray's own words only
            return ""

    async def _alive(self) -> None:
        await self.handle.alive.remote()  # (an ObjectRef's future: cancelling it is safe)

    async def _answers(self) -> None:
        """:meth:`_alive` for an actor that is not memray's: Ray's own method of every actor, with
        a builtin (a function of this module would make the actor import it: ~1 s, measured)."""
        await self.handle.__ray_call__.remote(id)

    async def placement(self) -> Placement | None:
        """Where Ray has the actor: one read of the control plane's actor table (0.6–0.8 ms p50 here)."""
        actor_id = self.handle._actor_id
        gcs: Any = getattr(ray._private.worker.global_worker, "gcs_client")  # noqa: B009 (not in Ray's stubs)
        found = await never_cancelled(gcs.async_get_all_actor_info(actor_id=actor_id, timeout=5))
        info = found.get(actor_id)
        if info is None:
            return None
        # private to Ray: a version that moves it fails this call, not the import
        from ray.core.generated import gcs_pb2

        state = str(gcs_pb2.ActorTableData.ActorState.Name(info.state))  # type: ignore[attr-defined]
        placed = state == "ALIVE" or info.address.port != 0  # a worker holds it (maybe still in __init__)
        return Placement(state, placed, dict(info.required_resources))


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Ray colours its error text for terminals


async def never_cancelled(reply: asyncio.Future[T]) -> T:
    """Await ``reply``, a future Ray's GCS client completes from its own thread, without ever
    cancelling it. Ray asserts that such a future is still pending when its answer arrives
    (``_raylet.assign_and_decrement_fut``, which also drops the reference it holds): a caller
    that gave up and cancelled it made Ray print ``Exception ignored in:
    'ray._raylet.assign_and_decrement_fut'`` / ``AssertionError`` (and leak the future). A
    caller cancelled here stops waiting; the answer lands later, unread. (An ``ObjectRef``'s
    future needs none of this: Ray skips one that is done.)"""
    reply.add_done_callback(_retrieved)
    return await asyncio.shield(reply)


def _retrieved(reply: asyncio.Future[Any]) -> None:
    if not reply.cancelled():
        reply.exception()  # an error nobody waits for any more is not logged as "never retrieved"


def named_ref(name: str, namespace: str, label: str, placement_timeout_s: float = PLACEMENT_TIMEOUT_S) -> RayRef:
    """A :class:`RayRef` to the named memray actor ``name`` (looked up in this process)."""
    return RayRef(ray.get_actor(name, namespace=namespace), label, placement_timeout_s, probe=True)


#: The concurrency group of :meth:`Probed.alive`: a thread (or, in an async actor, an event loop)
#: of its own in every memray actor, so a busy actor answers its probes beside its calls.
PROBE = "probe"


class Probed:
    """What every memray actor answers on :data:`PROBE` (the call watch's liveness probe)."""

    @ray.method(concurrency_group=PROBE)
    def alive(self) -> bool:
        return True


def _ray_metric(
    kind: str, name: str, description: str, tag_keys: tuple[str, ...], boundaries: list[float] | None
) -> Any:
    if kind == "counter":
        return ray_metrics.Counter(name, description=description, tag_keys=tag_keys)
    return ray_metrics.Histogram(name, description=description, boundaries=boundaries or [], tag_keys=tag_keys)


metrics.set_backend(_ray_metric)  # every process that runs memray actors imports this module


def shutdown_ray() -> None:
    ray.shutdown()


def ray_is_up() -> bool:
    """This process is connected to Ray (a call on an actor handle would otherwise start a new
    local Ray, in which no memray actor exists)."""
    return bool(ray.is_initialized())


class RayConnection(NamedTuple):
    """What :func:`ensure_ray` did: the ``config`` to open memray with (a running memray's Ray,
    namespace and shape when it joined one) and whether this call connected this process to Ray."""

    config: MemoryConfig
    connected: bool


def ensure_ray(config: MemoryConfig) -> RayConnection:
    """Connect this process to the Ray of ``config``'s memray: the Ray of the memray already
    running on the data directory (:func:`~memray.runtime.join.running_memray`; joined with its
    authentication, whatever Ray's mode), else ``config.address``, else a new local Ray.

    Call it from the main thread when there is one: Ray installs its SIGTERM handler there (and
    warns when it cannot). Unless ``config.verbose``, Ray logs only errors (Ray Serve only
    warnings) and actors' output stays in Ray's log files (``/tmp/ray/session_latest/logs``)."""
    running = running_memray(config)  # raises, naming the holder, if a memray holds it that cannot be shared
    if running is not None and config.address not in (None, running.address):
        running = None  # another cluster was asked for: its store may live on another node
    if running is not None:
        config = running.joined(config)
    if ray.is_initialized():
        here = _gcs_address()
        if running is not None and here != running.address:
            raise StoreError(
                f"cannot join {running.who}: this process is already connected to another Ray ({here}); "
                "open it from a process not connected to Ray, or call ray.shutdown() first"
            )
        return RayConnection(config, False)
    kwargs: dict[str, Any] = {
        "namespace": config.namespace,
        "ignore_reinit_error": True,
        "log_to_driver": config.verbose,
        "logging_level": logging.INFO if config.verbose else logging.ERROR,
    }
    if not config.verbose:  # Serve's driver-side lines (started, deploying, deleting) too
        logging.getLogger("ray.serve").setLevel(logging.WARNING)
    if running is not None:
        running.check_reachable()
        if running.auth is not None:
            _authenticate(running.auth.environment(os.environ, running.who))
        ray.init(address=running.address, **kwargs)
    elif config.address:
        ray.init(address=config.address, **kwargs)
    else:
        # "local": a new Ray of our own, even where another one on this machine (`ray start`, a
        # test's Cluster) would otherwise be joined, and refuse num_cpus
        ray.init(
            address="local",
            num_cpus=config.num_cpus or os.cpu_count(),
            include_dashboard=False,
            _system_config=RAY_SYSTEM_CONFIG,
            **kwargs,
        )
    if not config.verbose:
        _drop_ray_notices(_BY_DESIGN)
    return RayConnection(config, True)


#: Ray's settings for a local Ray that memray starts (``ensure_ray``; on a cluster, its operator's
#: choice: docs/reliability.md). ``timeout_ms_task_wait_for_death_info``: how long Ray holds a
#: call whose actor's process died, waiting to learn why, before failing it; on a 1 s timer, so
#: 1–2 s by default. memray's actors have ``max_task_retries=0`` and memray retries what is safe
#: to retry itself, so the wait only delayed the retry: a durable add stalled that much longer
#: across a store restart (``benchmarks/restart_micro.py``). KubeRay sets it to 0 for Ray Serve.
RAY_SYSTEM_CONFIG: dict[str, Any] = {"timeout_ms_task_wait_for_death_info": 0}


def _authenticate(environment: dict[str, str]) -> None:
    """Set Ray's authentication ``environment`` (:meth:`RayAuth.environment`) for this process (and
    the processes it starts). Ray reads these variables once, into a cached configuration and a
    cached token: both are re-read, as Ray itself does when it turns token authentication on."""
    if not environment:
        return
    # private to Ray: a version that moves it fails this call (authentication on), not the import
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # (not in the stubs)

    os.environ.update(environment)
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


#: Ray notices that memray's design triggers on purpose. The raylet warns once more than 4x its
#: CPU count of worker processes exist; memray's actors reserve no CPU (see the module docstring),
#: so a 2-core machine running the store, shards, hosts and a job's Ray Data pool passes that
#: line with nothing wrong and nothing for the user to change.
_BY_DESIGN = ("worker processes have been started on node",)


def _drop_ray_notices(notices: tuple[str, ...]) -> None:
    """Keep these lines of Ray's error channel (which the driver prints to stdout, with colour
    codes, whatever the log level) off the terminal; every other line still shows. Ray offers no
    switch for one message, so this wraps the function its listener thread prints with; if a
    Ray version moves it, nothing is filtered."""
    # private to Ray: a version that moves it fails this call, not the import
    from ray._private import worker as ray_worker

    printer = getattr(ray_worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "memray_filter", False):
        return

    def print_unless_by_design(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        lines = [line for line in data.get("lines", []) if not any(n in str(line) for n in notices)]
        if lines:
            printer({**data, "lines": lines}, *args, **kwargs)

    print_unless_by_design.memray_filter = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = print_unless_by_design


class TracedActor:
    """``traced_call``: a method call that continues its caller's trace (:mod:`memray.tracing`),
    for the actors whose methods are synchronous (threaded actors)."""

    def traced_call(self, headers: dict[str, str], method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tracing.adopt(headers)
        with tracing.attached(headers), tracing.span(_span_name(self, method), kind="server"):
            return getattr(self, method)(*args, **kwargs)


class TracedAsyncActor:
    """:class:`TracedActor` for async actors (an async method makes Ray run every call on the
    actor's event loop, so the two kinds cannot share one class)."""

    async def traced_call(
        self, headers: dict[str, str], method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        tracing.adopt(headers)
        with tracing.attached(headers), tracing.span(_span_name(self, method), kind="server"):
            result = getattr(self, method)(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result


def _span_name(actor: object, method: str) -> str:
    return f"{type(actor).__name__.removesuffix('Actor').lower()} {method}"


class StoreActor(Probed, TracedActor, HistoryStore):
    """Opens its file when the actor starts, and again when Ray restarts it. A threaded actor
    whose calls pass one at a time through a :class:`~memray.rpc.gate.PriorityGate`, each at the priority its
    :class:`~memray.store.history.HistoryStore` method declares (see :func:`_gated`).

    If the file cannot be opened (another process holds it), the actor does not fail its
    creation — Ray would restart it over and over while callers wait — but answers every call
    with that StoreError, at once."""

    def __init__(self, path: str, namespace: str = "", shape: dict[str, int] | None = None) -> None:
        raise_thresholds()
        super().__init__(path)
        self._gate = PriorityGate()
        self._open_error: StoreError | None = None
        # the record by which other processes find and join this memray (memray.runtime.join)
        owner = {
            "mode": "ray",
            "role": "store actor",
            "address": _gcs_address(),
            "namespace": namespace,
            "ray_auth": RayAuth.of_process().record(),
            **(shape or {}),
        }
        try:
            self.open(owner)
        except StoreError as exc:
            self._open_error = exc


def _gcs_address() -> str | None:
    try:
        return str(ray.get_runtime_context().gcs_address)
    except Exception:
        return None


def _gated(name: str) -> Callable[..., Any]:
    method = getattr(HistoryStore, name)
    level = StoreClient.options(name).priority

    @functools.wraps(method)
    def call(self: StoreActor, *args: Any, **kwargs: Any) -> Any:
        if self._open_error is not None:
            raise self._open_error
        with self._gate.hold(level):
            return method(self, *args, **kwargs)

    return call


for _name in StoreClient.calls():  # every store method (the client holds each one), at its declared priority
    setattr(StoreActor, _name, _gated(_name))


class ShardActor(Probed, TracedActor, RecoveringShard):
    """Loads its snapshot when the actor starts or restarts, then a :class:`ShardKeeper` thread
    brings it level with the store (searches degrade until then) and snapshots it every
    ``config.snapshot_every_s`` (see :mod:`memray.index.recovery` for why a thread)."""

    def __init__(
        self,
        shard_id: int,
        path: str,
        dim: int,
        model_id: str,
        config: IndexConfig,
        stores: list[str],
        namespace: str,
        shards: int,
        embedder: EmbedderConfig | None = None,
    ) -> None:
        raise_thresholds()
        # Ray restarts an actor with the arguments it was created with; a re-embedding job may have
        # cut over to another model since: the data directory's record wins (path = <root>/vectors/shard-i).
        dim, model_id, recompute = shard_model(os.path.dirname(os.path.dirname(path)), dim, model_id, embedder)
        super().__init__(shard_id, path, dim, model_id, config, True, recompute)
        self.open()
        # the keeper calls this shard through the actor's own handle: queued with every other call
        own = ShardClient(RayRef(ray.get_runtime_context().current_actor, f"shard {shard_id}"))
        store = partitions(stores, namespace)
        # Leveling after recovery finds the vectors whose shard upsert failed while this shard was
        # away and whose store write landed after the recovery pass read the item: only a restart
        # has such. On a first start every upsert reached it (Ray queues calls to an actor that is
        # starting), and the recovery pass read whatever the store held (memray.index.recovery).
        restarted = ray.get_runtime_context().was_current_actor_reconstructed
        keeper = ShardKeeper(
            own,
            store,
            config.snapshot_every_s,
            shard_id=shard_id,
            shards=shards,
            level_after_s=LEVEL_AFTER_S if restarted else (),
        )
        self._keeper = keeper.start(f"memray-shard-{shard_id}-keeper")

    def close(self) -> None:
        self._keeper.stop(timeout_s=0)  # never join: its pending call on this actor waits for us
        super().close()


class ProbedAsync:
    """:class:`Probed` for async actors: the probe on an event loop of its own."""

    @ray.method(concurrency_group=PROBE)
    async def alive(self) -> bool:
        return True


class HostActor(ProbedAsync, TracedAsyncActor, ConversationHost):
    """A :class:`ConversationHost` given its store's and shards' actor names (see the module
    docstring): it looks them up when it starts or restarts."""

    def __init__(self, host_id: int, config: MemoryConfig, stores: list[str], shards: list[str]) -> None:
        raise_thresholds()
        ns, bound_s = config.namespace, config.placement_timeout_s
        super().__init__(
            host_id,
            config,
            partitions(stores, ns, bound_s),
            [ShardClient(named_ref(name, ns, f"shard {i}", bound_s)) for i, name in enumerate(shards)],
        )


class KeyRingActor(ProbedAsync, TracedAsyncActor, KeyRing):
    """The :class:`KeyRing`, given the name of the first history partition's actor (where the keys are)."""

    def __init__(self, store: str, label: str, namespace: str, placement_timeout_s: float) -> None:
        raise_thresholds()
        super().__init__(StoreClient(named_ref(store, namespace, label, placement_timeout_s)))


def partitions(
    names: list[str],
    namespace: str,
    placement_timeout_s: float = PLACEMENT_TIMEOUT_S,
) -> StorePartitions:
    """The clients of the history partitions' actors ``names`` (in partition order) in the Ray
    namespace ``namespace``."""
    refs = [named_ref(name, namespace, store_label(i, len(names)), placement_timeout_s) for i, name in enumerate(names)]
    return StorePartitions([StoreClient(ref) for ref in refs])


def _check_picklable(embedder: object) -> None:
    """The host actors get the caller's own embedder by pickle (cloudpickle, as Ray does)."""
    try:
        ray.cloudpickle.dumps(embedder)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ValidationError(
            "embedder",
            embedder,
            f"cannot be pickled to the Ray actors ({type(exc).__name__}: {exc})",
            "make it picklable (no locks or open clients: create them lazily), or use mode='inprocess'",
        ) from exc


@functools.cache
def _actor_class(cls: type) -> Any:
    """``cls`` as a Ray actor class, made once per process. Ray exports an actor class the first
    time one is created in a job, naming it by a hash of its disassembled methods (~40 ms a class
    here, in the driver, before any actor starts): made anew for each actor, the second host and
    the second shard paid it again."""
    return ray.remote(concurrency_groups={PROBE: 1})(cls)  # type: ignore[call-overload]


class RayDeployment:
    """The cores as named Ray actors (``mode="ray"``)."""

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self.prefix = f"memray:{stable_hash(config.root):016x}"
        self._keyring: KeyRingClient | None = None

    def store_names(self) -> list[str]:
        """The history partitions' actor names, in partition order (:func:`partitions` makes them
        a :class:`StorePartitions` in any process: a job's pool actors)."""
        return [f"{self.prefix}:{role}" for role in store_roles(self.config.stores)]

    def _options(self, role: str, **extra: Any) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "name": f"{self.prefix}:{role}",
            "namespace": self.config.namespace,
            "get_if_exists": True,
            "num_cpus": 0,
            "max_restarts": -1,
            "max_task_retries": 0,
            "scheduling_strategy": "SPREAD",
        }
        if self.config.address:
            opts["lifetime"] = "detached"  # outlives this driver: other drivers share it
        opts.update(extra)
        return opts

    def _actor(self, cls: type, role: str, label: str, args: tuple[Any, ...], **options: Any) -> RayRef:
        """The named actor ``role`` of ``cls`` (created, or the running one: ``get_if_exists``)."""
        handle = _actor_class(cls).options(**self._options(role, **options)).remote(*args)
        return RayRef(handle, label, self.config.placement_timeout_s, probe=True)

    def create(self) -> None:
        cfg, ns = self.config, self.config.namespace
        if cfg.embedder.kind == "custom":
            _check_picklable(cfg.embedder.custom)
        dim, model_id = active_model(cfg)
        pin = {"resources": {cfg.store_resource: 1}} if cfg.store_resource else {}  # one unit per partition
        shape = {"hosts": cfg.hosts, "shards": cfg.shards}  # recorded: a process that joins routes alike
        stores = [
            self._actor(StoreActor, r, store_label(i, cfg.stores), (p, ns, shape), max_concurrency=32, **pin)
            for i, (r, p) in enumerate(zip(store_roles(cfg.stores), store_files(cfg)))
        ]
        names, shard_names = self.store_names(), [f"{self.prefix}:shard-{i}" for i in range(cfg.shards)]
        shards = [
            self._actor(
                ShardActor,
                f"shard-{i}",
                f"shard {i}",
                (i, shard_path(cfg, i), dim, model_id, cfg.index, names, ns, cfg.shards, shard_embedder(cfg, model_id)),
            )
            for i in range(cfg.shards)
        ]
        hosts = [
            self._actor(HostActor, f"host-{i}", f"host {i}", (i, cfg, names, shard_names), max_concurrency=10_000)
            for i in range(cfg.hosts)
        ]
        self._refs = [*stores, *shards, *hosts]
        self.stores = StorePartitions([StoreClient(ref) for ref in stores])
        self.shards = [ShardClient(ref) for ref in shards]
        self.hosts = [HostClient(ref) for ref in hosts]

    def keyring(self) -> KeyRingClient:
        """The key ring's actor (named, like the others: every process of this memray reaches the
        same one), created on first use."""
        if self._keyring is None:
            cfg = self.config
            args = (self.store_names()[0], store_label(0, cfg.stores), cfg.namespace, cfg.placement_timeout_s)
            ref = self._actor(KeyRingActor, "keys", "key ring", args)
            self._refs.append(ref)
            self._keyring = KeyRingClient(ref)
        return self._keyring

    async def start(self) -> None:
        check_stores(self.config.root, self.config.stores)
        self.create()
        try:
            await self.stores.ping()
        except StoreError:  # a file is held elsewhere: its actor can never serve; a later open retries
            for ref in self._refs[: self.config.stores]:
                ray.kill(ref.handle, no_restart=True)
            raise
        # the hosts start (ledger, embedder) while the shards load their snapshots and catch up
        await asyncio.gather(*(s.ping() for s in self.shards), *(h.start() for h in self.hosts))
        await asyncio.gather(*(self._recovered(s) for s in self.shards))

    async def _recovered(self, shard: ShardClient, timeout_s: float = 30.0) -> None:
        """Wait (bounded) for a shard's first catch-up with the store, so a fresh ``open`` does
        not answer its first searches degraded; past the bound it carries on (degraded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while await shard.is_recovering() and loop.time() < deadline:
            await asyncio.sleep(0.05)

    async def stop(self, terminate: bool) -> list[dict[str, Any]]:
        """:func:`~memray.runtime.deploy.stop_cores` (every wait bounded: an actor that is down or
        restarting cannot hold a driver's close), then with ``terminate`` kill every actor."""
        try:
            return await stop_cores(self, terminate, self.config.write_timeout_s + 30.0)
        finally:
            for ref in self._refs if terminate else []:
                with contextlib.suppress(Exception):
                    ray.kill(ref.handle, no_restart=True)
