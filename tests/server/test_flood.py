"""One tenant cannot stall another, with ``benchmarks/serve_flood.py``'s measurement
against the served app: app acme's *read-only* key holds 300 ``GET /mcp`` streams and more slow
requests than its bound, while app globex lists its conversations: every one of globex's requests
is answered (10 s client timeout); the ratio of its median to the unloaded one is the benchmark's."""

from __future__ import annotations

import asyncio
import json

from benchmarks.serve_flood import Tenants, flood
from memray.server.settings import ServerSettings
from tests.support.serve import APP, OTHER, Served

STREAMS = 300
BOUND = ServerSettings.max_requests_per_key  # the served app runs with the default
OVER = 16  # slow requests past the bound: each must be refused at once


def test_one_tenants_streams_and_slow_requests_do_not_stall_another(served: Served) -> None:
    tenants = Tenants(
        served.url,
        served.keys["reader"],
        f"/v1/apps/{APP}/users/ada/conversations/sec/search",
        served.keys["other"],
        f"/v1/apps/{OTHER}/users/victim/conversations",
        served.keys["admin"],
    )
    out = asyncio.run(flood(tenants, STREAMS, BOUND, OVER, samples=40))
    print(json.dumps(out))
    # a stateless server offers no SSE stream to hold (405); the burst past the key's bound is 429
    assert set(out["streams"]) <= {405, 429} and out["streams"][405] >= BOUND
    assert sum(out["streams"].values()) == STREAMS
    assert out["slow_requests"] == {200: BOUND, 429: OVER}
    # globex was answered, each request within the client's 10 s, while the flood held every slot
    # it could (latencies_s raises on a timeout or an error status): before the front door it
    # waited until the streams closed. How much slower it is under the flood is a speed figure:
    # benchmarks/serve_flood.py records it (target <= 1.5x), not a pass/fail test on a shared machine.
    assert out["flooded_max_ms"] < 10_000 and out["flooded_p50_ms"] > 0
