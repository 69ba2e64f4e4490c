"""The fault suite: real SIGKILLs of memray's own actor processes (hosts, the store, shards)
during ingest and during searches, then closing and reopening across modes. Each test runs one
scenario of ``benchmarks/faults.py`` at a small size and checks its figures; the same code at a
large size produces the README's reliability table. ``MEMRAY_FAULT_SCALE=10`` runs them bigger.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.faults import (
    ingest_under_fault,
    kill_and_time,
    open_memory,
    searches_under_fault,
    store_restarts,
)
from memray.models.wire import RefList
from tests.support.stranded import stranded

# an exception escaping into Ray's own callbacks (an unraisable one) fails the run, not just a warning
pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")]

SCALE = int(os.environ.get("MEMRAY_FAULT_SCALE", "1"))
# 40 messages per conversation: more than a host's buffer window (32), so a retried add must ask
# the store for the seqs its first attempt got
SIZE = dict(conversations=12 * SCALE, messages=40, batch=10, threads=4)


@pytest.fixture(scope="module")
def run(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = str(tmp_path_factory.mktemp("faults"))
    state = {"path": path, "mem": open_memory(path)}
    yield state
    state["mem"].close(terminate=True)


def ingest(run: dict[str, Any], scenario: str) -> dict[str, Any]:
    figures = ingest_under_fault(run["mem"], scenario, **SIZE)
    assert (figures["recovery_s"] or 0) > 0, "the kill did not happen mid-ingest"
    assert figures["duplicated"] == 0 and figures["seq_mismatch"] == 0 and figures["gaps"] == 0, figures
    assert not figures["caller_errors"], figures  # callers were retried through the outage, never failed
    assert figures["acked"] == SIZE["conversations"] * SIZE["messages"]
    return figures


@pytest.mark.parametrize("scenario", ["host_durable", "store_durable", "store_buffered"])
def test_a_kill_loses_nothing_acknowledged_and_duplicates_nothing(run: dict[str, Any], scenario: str) -> None:
    figures = ingest(run, scenario)
    assert figures["lost"] == 0 and figures["stored"] == figures["acked"], figures


def test_durable_adds_through_store_restarts_complete_and_keep_their_seqs(run: dict[str, Any]) -> None:
    """Each kill catches an add, which answers once the store is back (how long it took is the
    benchmark's ``stall_s``, read against ``restart_s``: Ray's restart)."""
    figures = store_restarts(run["mem"], restarts=2)
    assert not figures["caller_errors"] and len(figures["stalls_s"]) == 2, figures
    assert all(stall > 0 for stall in figures["stalls_s"]), figures  # every kill caught an add
    assert figures["acked"] == figures["stored"] > 0 and figures["lost"] == 0, figures
    assert figures["seq_mismatch"] == 0 and figures["duplicated"] == 0, figures


def test_a_killed_host_loses_only_buffered_messages_and_says_so(run: dict[str, Any]) -> None:
    figures = ingest(run, "host_buffered")
    assert figures["lost"] > 0, "nothing was inside the debounce window at the kill: the case was not tested"
    assert figures["lost_recorded"] == figures["lost"], figures  # every loss is a dead letter
    assert figures["lost_reported_to_flush"] == figures["lost"], figures  # and named to the next flush
    assert figures["hosts_lost_on_restart"] >= figures["lost"], figures
    assert figures["seq_reused"] == 0, figures  # a lost message's seq is never given to another
    assert figures["lost_max_age_s"] < 2.0, figures  # only what was inside the debounce window


def test_a_killed_shard_gets_every_vector_back(run: dict[str, Any]) -> None:
    figures = ingest(run, "shard_ingest")
    assert figures["lost"] == 0 and figures["wait_indexed"] is True, figures
    assert figures["vectors_missing_from_shards"] == 0, figures
    assert figures["found_by_vector"] == figures["sampled"] == figures["found_lexically"], figures


def test_searches_during_a_shard_kill_degrade_and_never_raise(run: dict[str, Any]) -> None:
    figures = searches_under_fault(run["mem"], conversations=8 * SCALE, messages=6)
    assert figures["raised"] == 0 and figures["wrong_top_hit"] == 0, figures
    assert figures["recovery_s"] is not None, figures


@pytest.mark.long
def test_the_benchmark_prints_one_json_line_per_scenario(
    ray_session: None, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from benchmarks.fault_table import table
    from benchmarks.faults import FIGURES, main

    png = tmp_path / "faults.png"
    main(
        [
            "--scenarios",
            "host_buffered,reopen",
            "--conversations",
            "4",
            "--messages",
            "10",
            "--batch",
            "5",
            "--threads",
            "2",
            "--hosts",
            "1",
            "--shards",
            "1",
            "--dir",
            str(tmp_path / "data"),
            "--plot",
            str(png),
        ]
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [line["scenario"] for line in lines] == ["host_buffered", "reopen"]  # one line per scenario
    for line in lines:
        assert line["benchmark"] == "faults" and line["git_sha"] and line["params"]["conversations"] == 4
        assert list(line)[5:11] == list(FIGURES)  # the figures every scenario reports, first
    buffered, reopened = lines
    assert buffered["acked"] == 40 and buffered["lost_recorded"] == buffered["lost"]
    assert buffered["stored"] + buffered["lost"] == 40 and buffered["seq_mismatch"] == buffered["duplicated"] == 0
    assert buffered["stall_s"] > 0 and buffered["restart_s"] > 0
    # closed in Ray after a host kill, reopened in process and in Ray again: every message at its
    # seq in every conversation, each shard's vectors the same three times (the fault suite's
    # reopen check; it lives here, where the scenario writes what it reopens)
    assert reopened["acked"] == reopened["stored"] == buffered["stored"] and reopened["lost"] == 0
    assert reopened["conversation_mismatches"] == reopened["seq_mismatch"] == reopened["duplicated"] == 0, reopened
    assert reopened["conversations"] == 4 and len(set(reopened["vectors"])) == 1, reopened
    assert reopened["vectors"][0] >= reopened["stored"], reopened  # every stored message has its vector
    assert png.stat().st_size > 1000
    rows = table(lines).splitlines()[2:]  # the docs' reliability table, from these lines
    assert [row.split(" | ")[2] for row in rows] == ["40", f"{reopened['acked']:,}"], rows


def test_a_restarted_host_levels_the_shards_with_what_its_last_incarnation_committed(run: dict[str, Any]) -> None:
    """A host killed after its pipeline marked a message embedded in the store and before its
    shard upsert landed: no sweep of pending items finds it. The restarted host finds its
    ``.open`` marker and levels every shard with the store."""
    mem = run["mem"]
    conv = mem.conversation(user_id="leveled-after-restart", conversation_id="c")
    conv.add({"role": "user", "content": "hello"}, durable=True)  # its host is running
    go = mem.internals.run
    ref, shard = stranded(mem, conv.key, "I am allergic to peanuts", seq=2)
    kill_and_time(mem, mem.internals.host_for(conv.key))  # its restarted process answered a call: it started
    host = mem.internals.host_for(conv.key)
    deadline = time.monotonic() + 120
    while go(host.stats())["leveled_on_restart"] is None:  # in the background, after its start
        assert time.monotonic() < deadline, "the restarted host did not level the shards"
        time.sleep(0.05)
    # (a shard Ray restarted earlier in this run levels itself too, and may have sent it first:
    # the in-process test shows the host's leveling alone sends it)
    assert go(shard.missing_from(RefList([ref]), vectors=True)) == []
    found = conv.search("what food allergy do I have?", limit=1)
    assert [h.message.id for h in found] == [ref[1]]
