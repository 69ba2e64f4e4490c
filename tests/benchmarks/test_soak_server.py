"""The chaos soak's server figures (:func:`benchmarks.soak_server.traffic_figures`) on a recorded
traffic, no server needed: the time from a kill to the next authenticated REST success counts
only requests sent after the kill, the refusals the tenancy probes expect are not errors, and a
2xx to a cross-tenant probe or a read-only write is what the figures must show."""

from __future__ import annotations

from benchmarks.soak_server import Traffic, traffic_figures


def traffic(*calls: tuple[str, float, float, str]) -> Traffic:
    t = Traffic(t0=0.0)
    for what, sent, seconds, status in calls:
        t.calls.append((what, sent, seconds, status))
    return t


def test_recovery_counts_the_first_rest_success_sent_after_the_kill() -> None:
    t = traffic(
        ("rest add", 9.0, 2.5, "200"),  # sent before the kill, answered after it: not a recovery
        ("rest add", 10.5, 0.1, "503"),
        ("mcp add", 11.0, 0.1, "200"),  # MCP: not a REST request
        ("rest context", 12.0, 0.5, "200"),
        ("rest add", 13.0, 0.1, "200"),
    )
    kills = [{"t": 10.0, "role": "replica"}]
    figures = traffic_figures(t, kills, chaos_from=5.0)
    assert kills[0]["rest_ok_after_s"] == 2.5
    assert figures["p99_rest_ok_after_kill_s"] == 2.5
    assert figures["requests"] == 5 and figures["requests_rest"] == 4 and figures["requests_mcp"] == 1
    assert figures["errors_by_status"] == {"503": 1}
    assert figures["latency_quiet_s"]["n"] == 0 and figures["latency_chaos_s"]["n"] == 4


def test_expected_refusals_are_not_errors_and_a_kill_with_no_success_after_it_says_so() -> None:
    t = traffic(
        ("rest cross-tenant", 1.0, 0.01, "403"),
        ("rest read-only write", 1.5, 0.01, "403"),
        ("rest erased key", 2.0, 0.01, "401"),
        ("rest search", 2.5, 30.0, "ReadTimeout"),
    )
    kills = [{"t": 2.2, "role": "keyring"}]
    figures = traffic_figures(t, kills, chaos_from=0.0)
    assert figures["errors_by_status"] == {"ReadTimeout": 1}
    assert figures["answered_by_status"] == {"401": 1, "403": 2, "ReadTimeout": 1}
    assert kills[0]["rest_ok_after_s"] is None and figures["p99_rest_ok_after_kill_s"] is None
    assert figures["latency_s"] == {"p50": None, "p99": None}
