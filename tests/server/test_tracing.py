"""One trace per request across the Serve replica, the hosts, the shards and the store, exported
over OTLP/HTTP to a real receiver on loopback; the caller's ``traceparent`` honoured. And with
tracing off (no endpoint), nothing of OpenTelemetry is even imported by the core."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

import memray
from tests.support.serve import Served


class Receiver:
    """An OTLP/HTTP traces endpoint that keeps every span it is sent: (trace id hex, name)."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        spans: list[tuple[str, str]] = []
        self.spans = spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["content-length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        spans.extend((s.trace_id.hex(), s.name) for s in scope.spans)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.mark.long
def test_a_request_is_one_trace_across_replica_hosts_shards_and_store(
    served: Served, receiver: Receiver, tmp_path: Path
) -> None:
    from ray import serve

    from memray.server.deployment import application
    from memray.server.settings import ServerSettings

    config = memray.MemoryConfig(path=str(tmp_path / "traced"), mode="ray", hosts=1, shards=1)
    mem = memray.open(config=config)
    settings = ServerSettings(config=config, auth=False, otlp_endpoint=receiver.url)
    serve.run(application(settings), name="memray-traced", route_prefix="/traced", blocking=False)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    base = served.url + "/traced/v1/apps/t/users/u/conversations/c"
    try:
        with httpx.Client(timeout=60.0, headers=headers) as http:
            assert http.post(base + "/messages", json={"messages": [{"role": "user", "content": "tea in Lisbon"}]})
            assert http.post(base + "/context", json={"query": "tea"}).status_code == 200
            assert http.post(base + "/search", json={"query": "tea"}).status_code == 200
        # a span of each part: the replica's server span, a host actor's, a shard actor's, the store's
        wanted = ["POST /v1/", "host ", "shard ", "store "]
        deadline = time.monotonic() + 90
        names: set[str] = set()
        while time.monotonic() < deadline:  # spans arrive in batches (every few seconds per process)
            names = {name for tid, name in receiver.spans if tid == trace_id}
            if all(any(n.startswith(w) for n in names) for w in wanted):
                break
            time.sleep(0.2)
        for w in wanted:
            assert any(n.startswith(w) for n in names), (w, names)
        assert {tid for tid, _ in receiver.spans} == {trace_id}  # nothing outside the caller's trace
    finally:
        serve.delete("memray-traced")
        mem.close(terminate=True)


def test_tracing_off_imports_nothing(tmp_path: Path) -> None:
    code = (
        "import sys, memray\n"
        "from memray import tracing\n"
        "with memray.open(sys.argv[1], mode='inprocess') as mem:\n"
        "    c = mem.conversation('u', 'c'); c.add({'role': 'user', 'content': 'hi'}); c.search('hi')\n"
        "assert not tracing.state.on\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
