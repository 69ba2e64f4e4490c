"""``python -m benchmarks.soak`` in its short form (12 s of kills, one every 4 s, longer if three kills
have not been made and probed by then, a few agents, the server on one replica), on the test session's Ray (and
its Serve proxy, when the server tests started it), so the chaos soak does not rot and its promises are checked
in every run: nothing acknowledged durably — by the facade, over REST or over MCP — is lost, nothing is stored
twice or at another seq, every buffered loss is named, reads see their own writes, no key reads another app's
data or writes with a read-only key, erased users are gone, a fork holds what was acked."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.soak import main

pytestmark = pytest.mark.ray


@pytest.mark.long
def test_a_short_soak_of_three_kills_loses_nothing_silently(ray_session: None, tmp_path: Path) -> None:
    short = "--minutes 0.2 --kill-every 4 --min-kills 3 --agents 6 --baseline-s 2 --sample-s 2 --replicas 1"
    line = main([*short.split(), "--dir", str(tmp_path)])
    assert line["kills"] >= 3 and line["kills_not_recovered"] == 0, line["kills_by_role"]
    # the killer takes the roles in turn, in an order its seed fixes: a host, a replica, the key ring first
    assert {"host", "replica", "keyring"} <= set(line["kills_by_role"]), line["kills_by_role"]
    assert line["acked"] > 100 and line["acked_durable"] > 0, line
    assert line["lost_durable"] == line["duplicated"] == line["seq_mismatch"] == 0, line
    assert line["unnamed_losses"] == line["order_violations"] == line["reported_but_stored"] == 0, line
    assert line["lost_buffered"] == line["lost_in_dead_letters"] == line["lost_raised_to_caller"], line
    ryw = line["read_your_writes"]
    assert line["ryw_failed"] == 0 and ryw["cross_reads"] == 0, (ryw, line["ryw_miss_samples"], line["kills_at_s"])
    assert line["read_your_writes"]["context_held"] > 0 and line["read_your_writes"]["search_held"] > 0
    assert line["deleted"] > 0 and line["deleted_still_stored"] == 0, line
    assert line["erasure"]["verified_clean"] and line["erasure"]["files_holding_id"] == [], line["erasure"]
    assert line["fork"]["ok"] and line["fork"]["fork_missing"] == line["fork"]["fork_seq_mismatch"] == 0, line["fork"]
    assert line["p99_recover_s"] is not None and line["p99_tick_ratio"] is not None, line
    rest, mcp, server = line["by_channel"]["rest"], line["by_channel"]["mcp"], line["server"]
    assert rest["acked_durable"] > 0 and rest["lost_durable"] == rest["seq_mismatch"] == rest["duplicated"] == 0, rest
    assert mcp["mcp_acked"] > 0 and mcp["mcp_stored"] == mcp["mcp_acked"], mcp
    assert mcp["mcp_seq_mismatch"] == mcp["mcp_duplicated"] == 0, mcp
    assert server["read_your_writes"].get("rest_context_held", 0) > 0, server["read_your_writes"]
    assert server["read_your_writes"].get("mcp_context_held", 0) > 0, server["read_your_writes"]
    assert server["cross_tenant_probes"] > 0 and server["cross_tenant_reads"] == 0, server["tenancy_answers"]
    assert server["read_only_writes"] > 0 and server["read_only_writes_accepted"] == 0, server["tenancy_answers"]
    assert line["rest_erasure"]["ok"] and line["rest_erasure"]["verified_clean"], line["rest_erasure"]
    assert line["rest_erasure"]["files_holding_id"] == [], line["rest_erasure"]
    assert line["rest_erasure"]["erased_key_answered"] == "401", line["rest_erasure"]
    assert server["latency_s"]["p99"] is not None and server["p99_rest_ok_after_kill_s"] is not None, server
