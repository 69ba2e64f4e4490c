"""Each benchmark below runs at tiny size (inprocess mode: no Ray start-up) and prints one
JSON line with its figures and its floor, so none of them rots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memray

ROOT = Path(__file__).resolve().parents[2]

CASES = {
    "ingest": [
        "--conversations",
        "100",
        "--messages",
        "1000",
        "--batch",
        "250",
        "--add-messages",
        "200",
        "--clients",
        "8",
        "--hosts",
        "2",
        "--sustain-s",
        "0.5",
    ],
    "recall_latency": [
        "--n",
        "600",
        "--shards",
        "1,2",
        "--clients",
        "1,4",
        "--queries",
        "16",
        "--recall-queries",
        "5",
        "--conversations",
        "12",
        "--users",
        "4",
    ],
    "simulate_agents": ["--agents", "30", "--turns", "3", "--hosts", "2", "--probes", "2"],
    "fork": [
        "--conversations",
        "60",
        "--messages",
        "3",
        "--repeat",
        "1",
        "--writers",
        "1",
        "--rate",
        "200",
        "--hosts",
        "1",
        "--shards",
        "1",
    ],
    "startup": ["--repeat", "1", "--hosts", "1", "--shards", "1"],
    "stream_scoring": ["--n", "400", "--conversations", "2", "--queries", "20", "--hosts", "1", "--shards", "1"],
}


def run_module(name: str, args: list[str], tmp: Path | None = None) -> dict:
    """``python -m benchmarks.<name> <args>``: its one JSON line (``tmp``: its TMPDIR)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **({"TMPDIR": str(tmp)} if tmp else {})}
    out = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, out.stdout
    return json.loads(lines[0])


def run_bench(name: str, args: list[str], tmp_path: Path) -> dict:
    png = tmp_path / f"{name}.png"
    result = run_module(name, ["--mode", "inprocess", "--plot", str(png), *args])
    assert png.stat().st_size > 1000
    assert result["benchmark"] == name
    assert result["machine"]["cpu_count"] >= 1 and result["git_sha"]
    return result


@pytest.mark.parametrize("name", list(CASES))
def test_benchmark_prints_one_json_line_with_its_floor(name: str, tmp_path: Path) -> None:
    result = run_bench(name, CASES[name], tmp_path)
    if name == "ingest":
        assert result["add_many"]["msgs_per_s"] > 0 and result["add_many"]["durable_lag"]["n"] == 1000
        assert result["add"]["durable_lag"]["n"] == 200
        assert result["floor"]["duckdb"]["raw_arrow_insert_rows_per_s"] > 0
        assert result["add_many"]["ratio_to_raw_arrow_insert"] is not None
        assert result["steady"]["msgs_per_s"] > 0 and result["steady"]["durable_lag"]["n"] > 0
    elif name == "recall_latency":
        assert [(r["n"], r["shards"]) for r in result["results"]] == [(600, 1), (600, 2)]
        for row in result["results"]:
            assert set(row["clients"]) == {"1", "4"}
            for ops in row["clients"].values():
                assert ops["search_conversation"]["n"] == 16 and ops["ray_ping"]["p50_ms"] > 0
                assert ops["search_user"]["ratio_p50_to_floor_sum"] is not None
                assert ops["search_conversation"]["ratio_p50_to_raw"] is not None
                assert ops["search_app"]["ratio_p50_to_raw_numpy"] is not None
            assert row["raw_floor"]["search_conversation"]["p50_ms"] > 0 and row["raw_floor"]["embed_query"]["n"] == 16
            assert row["recall_at_10"]["conversation"] == 1.0  # small namespaces are searched exactly
            assert row["recall_at_10"]["app"] == 1.0
    elif name == "fork":
        for phase in ("quiet", "writing"):
            assert result[phase]["copy_s"] > 0 and result[phase]["ready_s"] >= result[phase]["copy_s"]
        assert result["writing"]["written_per_s"] > 0 and result["quiet"]["written_per_s"] == 0
        assert result["floor"]["copytree_fsync_s"] > 0 and result["ratio_quiet_copy_to_copytree_fsync"] is not None
    elif name == "startup":
        for kind in ("duckdb", "inprocess"):  # (--mode inprocess: no Ray)
            assert result[kind]["open_s"] > 0 and result[kind]["close_s"] > 0 and len(result[kind]["rounds"]) == 1
            assert result[kind]["open_cpu_s"] >= 0 and result[kind]["import_s"] > 0
    elif name == "stream_scoring":
        for layer in ("facade", "shard", "numpy_floor"):
            assert result[layer]["relevance"]["n"] == 20 and result[layer]["stream"]["p50_ms"] > 0
            assert result[layer]["ratio_p50"] is not None
        assert result["items_per_conversation"] == 200
        assert result["raw_hybrid"]["n"] == 20 and result["shard_relevance_p50_to_raw_hybrid_p50"] is not None
    else:
        assert result["verified"] is True and result["missing"] == 0 and result["unexpected"] == 0
        assert result["messages"] == 30 * 3 * 2
        assert result["searchable_lag"]["n"] + result["searchable_lag"]["timeouts"] == 3 * 2
        assert result["searchable_lag"]["timeouts"] == 0
        assert result["durable_lag"]["n"] == 180
        assert result["memory"]["conversations_loaded"] > 0
        assert result["raw_floor"]["calls_ms"] > 0 and result["raw_floor"]["arrow_insert_ms"] > 0
        assert result["tick_ratio_to_raw_floor"] is not None
        floor = result["batched_floor"]
        assert floor["calls_ms"] > 0 and floor["raw_scoring_ms"] > 0 and floor["calls"] == 2 * 2 + 2 + 2
        assert result["tick_ratio_to_batched_floor"] is not None and result["ticks_per_s"] > 0
        assert len(result["tick_ms"]) == len(result["recall_ms"]) == result["ticks"] == 3
        assert result["steady_tick_p50_ms"] is None and result["growth"] is None  # 3 ticks: none steady yet
        assert result["coalescing"]["context_many"]["n"] == 3 and result["coalescing"]["ratio_p50"] is not None
        assert result["resident"]["after_run_mib"] > 0


def test_growth_is_tick_8_over_tick_3_and_needs_nine_ticks() -> None:
    from benchmarks._harness import growth

    assert growth([9.0, 9.0, 9.0, 2.0, 5.0, 5.0, 5.0, 5.0, 3.0]) == 1.5
    assert growth([2.0] * 8) is None


def test_refs_wire_micro_times_both_forms_beside_the_columns_alone() -> None:
    result = run_module("refs_wire_micro", ["--refs", "2000", "--namespaces", "100"])
    assert result["tuples_ms"] > 0 and result["ref_list_ms"] > 0 and result["floor_ms"] > 0
    assert result["ref_list_over_floor"] is not None


def test_wire_format_micro_times_lists_and_arrow_which_give_the_same_messages() -> None:
    result = run_module("wire_format_micro", ["--messages", "200"])  # (it asserts both forms give the messages)
    for form in ("lists", "arrow", "lists_transport", "arrow_transport"):
        assert result[f"{form}_us_per_message"] > 0
    assert result["arrow_over_lists"] is not None


def test_lexical_micro_scores_every_form_the_same_every_tick() -> None:
    result = run_module("lexical_micro", ["--namespaces", "20", "--ticks", "3", "--bounds", "8"])
    assert result["same_scores"] is True and len(result["by_tick"]) == 3
    assert all(result[f"{form}_us"] > 0 for form in ("arrays", "fused", "fused_always"))
    [row] = result["bounds"]  # both forms, on postings read again unchanged and changed
    assert row["entries_a_term"] == 8
    assert all(row[f"{form}_{read}_us"] > 0 for form in ("entries", "arrays") for read in ("changed", "unchanged"))


def test_text_micro_times_both_forms_of_index_terms_which_agree() -> None:
    result = run_module("text_micro", ["--repeat", "1"])
    assert result["same_terms"] is True and result["texts"] > 1000
    assert result["memray_us"] > 0 and result["rules_us"] > 0 and result["tokenize_us"] > 0


def test_shard_upsert_micro_times_an_upsert_the_shard_holds_beside_its_floor() -> None:
    result = run_module("shard_upsert_micro", ["--namespaces", "20", "--ticks", "3"])
    assert result["held"] == 20 * 2 * 3 and len(result["by_tick"]) == 3
    assert result["upsert_us"] > 0 and result["raw_us"] > 0 and result["ratio_to_raw"] is not None


def test_snapshot_micro_times_a_full_snapshot_and_a_delta_beside_their_floors(tmp_path: Path) -> None:
    result = run_module("snapshot_micro", ["--namespaces", "20", "--ticks", "3", "--repeat", "2"], tmp_path)
    assert not list(tmp_path.iterdir())  # its shard's files went with it (benchmarks._harness.scratch)
    assert result["items"] > 0 and result["snapshot_ms"] > 0 and result["floor_ms"] > 0
    assert result["snapshot_to_floor"] is not None and result["delta_to_floor"] is not None
    # the full snapshots hold every item; each delta after them only one tick's (2 per conversation)
    assert result["segments"] == [result["items"], 40, 40]


def test_write_path_micro_times_the_old_and_the_new_way() -> None:
    result = run_module("write_path_micro", ["--n", "200"])
    assert result["key_pickle_us"]["dataclass_state"] > 0 and result["key_pickle_us"]["reduce_to_strings"] > 0
    assert all(v > 0 for v in result["message_batch_us"].values())
    persist = result["persist_write_us"]
    assert persist["timer_and_task_per_conversation"] > 0 and persist["wheel"] > 0
    assert all(v > 0 for v in result["edge_validation_us"].values())
    assert all(v > 0 for kind in result["store_rows_us"].values() for v in kind.values())
    assert all(v > 0 for v in result["payload_us"].values())
    assert set(result["lag_us"]) == {"per_conversation", "per_write"}


def test_read_path_micro_times_each_part_against_the_raw_floor() -> None:
    result = run_module("read_path_micro", ["--conversations", "4", "--messages", "10", "--queries", "8"])
    parts = ("search", "context", "loop_search", "hop", "embed_query", "shard_search", "hydrate", "raw")
    assert all(result[part]["n"] == 8 and result[part]["p50_ms"] > 0 for part in parts)
    assert result["context_extras"]["n"] == 8 and result["context_extras_uncached"]["p50_ms"] > 0
    assert result["ratio_search_to_raw"] is not None and result["ratio_context_to_raw"] is not None
    for kind in ("asearch", "acontext"):
        assert result[kind]["n"] == 8 and result[f"{kind}_many_of_one"]["n"] == 8
        assert isinstance(result["coalescing_added_ms"][kind], float)


def test_facade_overhead_times_sync_calls_against_the_hop_and_the_core_call() -> None:
    result = run_module("facade_overhead", ["--n", "50", "--repeat", "2"])
    parts = ("hop_us", "core_durable_seq_us", "durable_seq_us", "messages_us", "add_us")
    assert all(result[part] > 0 for part in parts), result
    assert result["facade_added_us"] == round(result["durable_seq_us"] - result["core_durable_seq_us"], 2)


def test_user_tick_times_the_examples_tick_in_both_styles_beside_its_full_floor() -> None:
    result = run_module("user_tick", ["--mode", "inprocess", "--agents", "20", "--ticks", "9"])
    for style in ("batches", "coroutines"):
        got = result[style]
        assert len(got["tick_ms"]) == 9 and got["tick_p50_ms"] > 0 and got["ops_per_s"] > 0
        assert got["growth"] is not None and got["recall_hit_rate"] == 1.0
        defaults = memray.MemoryConfig()  # the shape it ran with is recorded: the defaults on this machine
        assert (got["hosts"], got["shards"]) == (defaults.hosts, defaults.shards)
        work = got["shard_work"]  # every message is indexed once at least (two a tick an agent)
        assert work["upserted"] >= 2 * 20 * 9 and work["upsert_us_per_item"] > 0
        assert work["searched"] >= 20 * 9 and work["search_us_per_query"] > 0  # a context a tick an agent
        assert 1 <= work["items_per_upsert"] <= work["upserted"] and 1 <= work["queries_per_search"] <= work["searched"]
    floor = result["full_floor"]
    for part in ("embed_ms", "arrow_insert_ms", "vectors_and_bm25_ms", "raw_scoring_ms"):
        assert floor[part] > 0
    assert floor["ray_calls_ms"] == 0.0 and floor["tick_ms"] > 0
    assert result["tick_ratio_to_full_floor"] is not None and result["coalesced_over_batches"] is not None


def test_user_tick_growth_compares_question_ticks_with_question_ticks() -> None:
    """The example's question ticks (3, 5, 7) recall more than its statement ticks (4, 6, 8):
    tick 8 over tick 3 divides one kind by the other, and read 1.0 here, where the question ticks
    grew 3x."""
    from benchmarks.user_tick import like_for_like

    times = [1.0, 1.0, 1.0, 1.0, 2.0, 1.5, 2.0, 3.0, 2.0]
    assert like_for_like(times) == 3.0  # tick 7 / tick 3 (tick 8 / tick 4: 1.0)
    assert like_for_like(times[:7]) == 1.5  # tick 5 / tick 3 (tick 6 / tick 4: 1.0)
    assert like_for_like(times[:6]) is None  # one statement tick after tick 3: nothing to compare


def test_user_tick_growth_takes_the_mean_of_four_ticks_of_a_kind_not_one() -> None:
    """In a long run one slow tick (the background writes of the adds landing in it) moves the
    growth by a quarter of its excess, not all of it; four slower ticks of a kind move it fully."""
    from benchmarks.user_tick import like_for_like

    level = [1.0] * 3 + [1.0, 2.0] * 11  # 25 ticks: questions (3, 5, ...) 1 s, statements 2 s
    assert like_for_like(level) == 1.0
    spike = level.copy()
    spike[23] = 3.0  # the last question tick
    assert like_for_like(spike) == 1.5  # (1 + 1 + 1 + 3) / 4 over 1
    grown = level.copy()
    for t in (18, 20, 22, 24):  # the last four statement ticks
        grown[t] = 4.0
    assert like_for_like(grown) == 2.0


def test_huge_tick_compares_two_sizes_and_finds_the_store_exactly_as_acknowledged() -> None:
    result = run_module("huge_tick", ["--mode", "inprocess", "--agents", "40", "--base", "10", "--ticks", "2"])
    for size, agents in (("base", 10), ("huge", 40)):
        got = result[size]
        assert len(got["tick_s"]) == 2 and got["ops_per_s"] > 0
        mib = got["driver_mib"]
        assert len(mib["after_tick"]) == 2 and mib["peak"] >= max(mib["after_tick"]) > 0
        assert got["store"] == {
            "acknowledged": 2 * 2 * agents,  # two adds an agent a tick
            "stored": 2 * 2 * agents,
            "missing": 0,
            "unacknowledged": 0,
            "duplicated": 0,
        }
    assert result["tick_ratio"] > 0 and result["targets"]["store_exact"] is True
