"""OpenTelemetry traces across memray's processes, and nothing at all when tracing is off.

Tracing is off until :func:`enable` (or :func:`configure`, which enables it when an OTLP endpoint
is given or set in ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``).
While it is off, :data:`state` ``.on`` is False and every hook below is one attribute read: the
typed clients (:meth:`memray.rpc.client.Client._call`) and the facade's loop hop check it before
anything else, so a read costs what it cost without this module. ``opentelemetry`` is imported
only by :func:`enable`; the core imports and runs without it.

While it is on, a call made inside a recording span (a REST request's, or one a library user
opened) gets a client span named ``"<actor> <method>"`` (``"shard 0 search"``, ``"history store
get_messages"``); a call to a Ray actor carries the span's context (W3C ``traceparent``) with it,
and the actor opens its own span under it (``memray.runtime.actors``: ``traced_call``), so one
trace spans the Serve replica, the hosts, the shards and the store. The carrier also names the
OTLP endpoint the caller exports to: an actor process exports its spans to the same place
without being configured itself. Calls made outside any span (background persistence,
snapshots, recovery) make no spans.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, TypeVar

from memray.errors import MissingExtraError

__all__ = [
    "state",
    "enable",
    "configure",
    "span",
    "carrier",
    "attached",
    "carried",
    "adopt",
    "disable",
    "flush",
    "recording",
    "ENDPOINT_KEY",
]

T = TypeVar("T")

#: The carrier key naming the OTLP endpoint the caller exports to (beside ``traceparent``).
ENDPOINT_KEY = "memray-otlp-endpoint"


class _State:
    """Whether tracing is on in this process (``on``), and what it needs when it is."""

    __slots__ = ("on", "provider", "tracer", "endpoint", "propagator")

    def __init__(self) -> None:
        self.on = False
        self.provider: Any = None
        self.tracer: Any = None
        self.endpoint: str | None = None
        self.propagator: Any = None


#: The one switch the hot paths read.
state = _State()


def enable(tracer_provider: Any = None, endpoint: str | None = None) -> None:
    """Turn tracing on in this process with ``tracer_provider`` (default: the global one).
    ``endpoint`` is the OTLP endpoint this process exports to, passed on to the actors it calls."""
    # optional dependency: opentelemetry-api (the [serve] extra), read only once tracing is on
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    provider = tracer_provider or trace.get_tracer_provider()
    state.provider = provider
    state.tracer = provider.get_tracer("memray")
    state.propagator = TraceContextTextMapPropagator()
    state.endpoint = endpoint
    state.on = True


def disable() -> None:
    """Turn tracing off in this process (spans already finished are still exported)."""
    state.on = False
    state.provider = None
    state.tracer = None
    state.endpoint = None


def configure(endpoint: str | None = None, service_name: str = "memray") -> bool:
    """Export spans over OTLP/HTTP to ``endpoint`` (default: the ``OTEL_EXPORTER_OTLP_*``
    environment variables) and turn tracing on; without an endpoint, do nothing. True if on.
    Needs the ``serve`` extra (the OpenTelemetry SDK and its OTLP exporter)."""
    endpoint = endpoint or _endpoint_from_env()
    if not endpoint:
        return False
    if state.on and state.endpoint == endpoint:
        return True
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise MissingExtraError("opentelemetry-sdk", "serve") from exc
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=_traces_url(endpoint))))
    enable(provider, endpoint)
    return True


def _endpoint_from_env() -> str | None:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")


def _traces_url(endpoint: str) -> str:
    """OTLP/HTTP's traces path on a base endpoint (``http://host:4318`` → ``.../v1/traces``)."""
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"


def flush(timeout_ms: int = 5000) -> None:
    """Export the spans this process has finished (before it exits, or for a test)."""
    force = getattr(state.provider, "force_flush", None)
    if force is not None:
        force(timeout_ms)


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, kind: str = "internal") -> Iterator[Any]:
    """A span named ``name`` under the current one (a root if there is none). Check
    ``state.on`` before calling: this is the slow path."""
    from opentelemetry.trace import SpanKind  # optional dependency (the [serve] extra): tracing is on

    with state.tracer.start_as_current_span(
        name, kind=getattr(SpanKind, kind.upper()), attributes=dict(attributes or {})
    ) as current:
        yield current


def recording() -> bool:
    """True when the current context holds a sampled span (one of this process, or a caller's
    carried here): calls inside it are traced."""
    if not state.on:
        return False
    from opentelemetry import trace  # optional dependency (the [serve] extra): tracing is on

    context = trace.get_current_span().get_span_context()
    return bool(context.is_valid and context.trace_flags.sampled)


def carrier() -> dict[str, str] | None:
    """The current span's context as W3C headers (plus the OTLP endpoint), or None when tracing
    is off or no span is current: what a call to another process carries."""
    if not recording():
        return None
    out: dict[str, str] = {}
    state.propagator.inject(out)
    if state.endpoint:
        out[ENDPOINT_KEY] = state.endpoint
    return out


@contextlib.contextmanager
def attached(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Make the context in ``headers`` (``traceparent``) current for the block; nothing when
    tracing is off or no context is given."""
    if not state.on or not headers:
        yield
        return
    from opentelemetry import context  # optional dependency (the [serve] extra): tracing is on

    token = context.attach(state.propagator.extract(dict(headers)))
    try:
        yield
    finally:
        context.detach(token)


def adopt(headers: Mapping[str, str]) -> None:
    """In a process called with a carrier (an actor): export where the caller exports, if this
    process was not configured itself."""
    endpoint = headers.get(ENDPOINT_KEY)
    if endpoint and not state.on:
        configure(endpoint, service_name="memray")


async def _in_context(headers: dict[str, str], coro: Coroutine[Any, Any, T]) -> T:
    with attached(headers):
        return await coro


def carried(coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """``coro`` run under the current trace context wherever it is awaited (the facade's loop
    thread does not share the caller's context variables). ``coro`` itself when not tracing."""
    headers = carrier()
    return coro if headers is None else _in_context(headers, coro)
