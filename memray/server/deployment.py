"""The Ray Serve application, and the ``memray serve`` process around it.

:class:`MemrayIngress` is a Serve deployment whose replicas each open the memray of the data
directory in Ray mode: the actors are named (:mod:`memray.runtime.actors`), so every replica
reaches the same store, hosts and shards, and ``--replicas`` scales the HTTP side alone. Each
replica answers with the app of :func:`memray.server.api.build_app` (FastAPI, built once the
memray is open: Serve's ``__serve_build_asgi_app__``).

:func:`serve` is ``memray serve``: it opens the memray (starting a local Ray, or joining
``--address``), so its process owns the actors and the key ring; starts Serve's HTTP proxy on
``--host``/``--port``; deploys the application; and waits for Ctrl-C (or SIGTERM), then deletes
the application, shuts Serve down, closes the memray (flushing everything acknowledged) and, if it
started a local Ray, stops it: nothing it started is left running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pydantic
import ray
from pydantic import BaseModel, ConfigDict
from ray import serve
from ray.serve.schema import ProxyStatus

import memray
from memray import tracing
from memray.config import MemoryConfig
from memray.errors import UnavailableError
from memray.facade.memory import Memory
from memray.runtime.actors import ensure_ray, shutdown_ray
from memray.server.api import build_app
from memray.server.auth import KeyCache
from memray.server.settings import ServerSettings

__all__ = [
    "MemrayIngress",
    "ServeArgs",
    "build",
    "application",
    "deploy",
    "start_proxy",
    "run_application",
    "serve_forever",
    "APP_NAME",
]

APP_NAME = "memray"
#: How long :func:`start_proxy` waits for Serve to replace a first proxy that missed its ready check.
PROXY_READY_S = 120.0


@serve.deployment(ray_actor_options={"num_cpus": 0})
@serve.ingress()
class MemrayIngress:
    """One replica: the memray opened in Ray mode (joining the running actors), its key cache."""

    async def __init__(self, settings: ServerSettings) -> None:  # type: ignore[misc]  # Serve awaits it
        self.settings = settings
        tracing.configure(settings.otlp_endpoint)
        self.mem: Memory = await asyncio.to_thread(memray.open, config=settings.config)
        self.keys = KeyCache(self.mem.keys, stale_s=settings.key_ring_stale_s) if settings.auth else None

    def __serve_build_asgi_app__(self) -> Any:
        return build_app(self.mem, self.keys, self.settings)

    def __del__(self) -> None:
        mem = getattr(self, "mem", None)
        if mem is not None and not mem.closed:
            mem.close(terminate=False)  # the actors belong to `memray serve`: flush and leave them


class ServeArgs(BaseModel):
    """The ``args`` of the application in a Serve config (``serve.yaml``: ``import_path:
    memray.server.deployment:build``); ``address: auto`` makes the actors detached and shared."""

    model_config = ConfigDict(extra="forbid")

    path: str
    address: str | None = "auto"
    stores: int = 1
    store_resource: str | None = None
    hosts: int = 2
    shards: int = 1
    replicas: int = 1
    auth: bool = True
    max_body_bytes: int = ServerSettings.max_body_bytes
    allowed_origins: list[str] = []
    allowed_hosts: list[str] = []
    request_timeout_s: float = ServerSettings.request_timeout_s
    max_requests_per_key: int = ServerSettings.max_requests_per_key
    key_ring_stale_s: float = ServerSettings.key_ring_stale_s
    max_ongoing_requests: int = ServerSettings.max_ongoing_requests
    max_queued_requests: int = ServerSettings.max_queued_requests
    otlp_endpoint: str | None = None
    mcp_app: str = "default"

    @pydantic.field_validator("auth")
    @classmethod
    def _keys_required(cls, auth: bool) -> bool:
        if not auth:
            raise ValueError(
                "auth: false is refused in a Serve config: it deploys onto the cluster's HTTP proxies "
                "(http_options.host), which are not loopback; run `memray serve --no-auth` on 127.0.0.1 "
                "for a keyless local server, or keep auth: true and make a key with `memray keys create`"
            )
        return auth

    def settings(self) -> ServerSettings:
        config = MemoryConfig(
            path=self.path,
            mode="ray",
            address=self.address,
            stores=self.stores,
            store_resource=self.store_resource,
            hosts=self.hosts,
            shards=self.shards,
        )
        return ServerSettings(
            config,
            replicas=self.replicas,
            auth=self.auth,
            max_body_bytes=self.max_body_bytes,
            allowed_origins=tuple(self.allowed_origins) or ServerSettings.allowed_origins,
            allowed_hosts=tuple(self.allowed_hosts) or ServerSettings.allowed_hosts,
            request_timeout_s=self.request_timeout_s,
            max_requests_per_key=self.max_requests_per_key,
            key_ring_stale_s=self.key_ring_stale_s,
            max_ongoing_requests=self.max_ongoing_requests,
            max_queued_requests=self.max_queued_requests,
            otlp_endpoint=self.otlp_endpoint,
            mcp_app=self.mcp_app,
        )


def build(args: dict[str, Any]) -> Any:
    """The application a Serve config names (``serve deploy serve.yaml``), from its ``args``."""
    return application(ServeArgs.model_validate(args).settings())


def application(settings: ServerSettings) -> Any:
    """The bound Serve application (``serve.run`` it, or name it in a Serve config)."""
    return MemrayIngress.options(  # type: ignore[attr-defined]  # a serve Deployment
        num_replicas=settings.replicas,
        max_ongoing_requests=settings.max_ongoing_requests,
        max_queued_requests=settings.max_queued_requests,
    ).bind(settings)


def deploy(settings: ServerSettings, host: str, port: int) -> str:
    """Start Serve's HTTP proxy on ``host:port`` in the connected Ray and deploy the app there
    (waiting until its replicas are up); returns the base URL."""
    start_proxy(host, port)
    return run_application(settings, host, port)


def start_proxy(host: str, port: int, ready_s: float = PROXY_READY_S) -> None:
    """``serve.start`` on ``host:port``, returning once its HTTP proxy is healthy.

    Serve gives a new proxy 5 s to say it is ready, kills it if not, and starts another with a
    longer limit; but ``serve.start`` waits only on the first, and raises ``ActorDiedError`` when
    it is killed. On a loaded machine, or while memray's own actors start beside it, the first
    can miss those 5 s: so a proxy killed that way is waited for by Serve's status instead, until
    the controller's next one is healthy (:class:`~memray.errors.UnavailableError` after ``ready_s``)."""
    try:
        serve.start(http_options={"host": host, "port": port})
        return
    except ray.exceptions.ActorDiedError:  # the first proxy missed its ready check: another comes
        pass
    deadline = time.monotonic() + ready_s
    while (proxies := serve.status().proxies) == {} or any(s != ProxyStatus.HEALTHY for s in proxies.values()):
        if time.monotonic() > deadline:
            detail = f"not healthy after {ready_s:.0f} s ({dict(proxies)}); Ray's logs say why (--verbose)"
            raise UnavailableError(f"Serve's HTTP proxy on {host}:{port}", detail, waited_s=ready_s)
        time.sleep(0.2)


def run_application(settings: ServerSettings, host: str, port: int) -> str:
    """Deploy the app on the running Serve (waiting until its replicas are up); the base URL."""
    serve.run(application(settings), name=APP_NAME, route_prefix="/", blocking=False)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve_forever(settings: ServerSettings, host: str, port: int, log: Any = print) -> int:
    """``memray serve``: open, deploy, wait for Ctrl-C or SIGTERM, stop cleanly; exit status.

    Start-up overlaps what does not depend on the rest: once Ray is up, Serve's controller and
    proxy start while the memray's actors do (and the key ring's actor while the replicas do).
    Serve's own log lines stay out of the terminal unless ``--verbose``, as Ray's do
    (:func:`~memray.runtime.actors.ensure_ray`)."""
    t0 = time.monotonic()
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    connection = ensure_ray(settings.config)  # joins the memray running on PATH, if one does
    settings = dataclasses.replace(settings, config=connection.config)
    started_ray = connection.connected and not connection.config.address
    t_ray = time.monotonic()
    mem: Memory | None = None
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="memray-serve-start") as pool:
            proxy = pool.submit(start_proxy, host, port)
            mem = memray.open(config=settings.config)  # joins the Ray just started: its actors are this process's
            mem.keys.prepare()
            proxy.result()
        t_open = time.monotonic()
        url = run_application(settings, host, port)
        t_app = time.monotonic()
        auth = "keys required (memray keys create)" if settings.auth else "NO AUTH (--no-auth)"
        phases = f"Ray {t_ray - t0:.1f} s, actors and proxy {t_open - t_ray:.1f} s, replicas {t_app - t_open:.1f} s"
        log(f"memray serve: ready in {t_app - t0:.1f} s ({phases}) on {url} ({auth}); REST {url}/v1, "
            f"MCP {url}/mcp, docs {url}/docs; Ctrl-C stops", file=sys.stderr, flush=True)  # fmt: skip
        while not stop.wait(0.5):
            pass
        log("memray serve: stopping", file=sys.stderr, flush=True)
    finally:
        try:
            serve.delete(APP_NAME)  # the replicas finish the requests they hold
            if not started_ray:  # (a Ray this started goes with its Serve below: shutting Serve
                # down first only makes Ray print that the controller's shutdown task failed)
                serve.shutdown()  # type: ignore[no-untyped-call]
        finally:
            if mem is not None:
                mem.close(terminate=started_ray)  # a memray this joined keeps its actors
            if started_ray:
                shutdown_ray()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return 0
