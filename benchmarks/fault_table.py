"""The reliability table of the docs, from a run of :mod:`benchmarks.faults` (its JSON lines).

    python -m benchmarks.fault_table benchmarks/results/faults.json

(``python -m benchmarks.render`` puts :func:`rendered`, the recorded run's table, on
docs/reliability.md.) Prints a Markdown table, one row per scenario in the order run: the figures every scenario
reports (:data:`benchmarks.faults.FIGURES`) and, in the last column, the scenario's own.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks._harness import RESULTS

__all__ = ["table", "rendered", "main"]

#: scenario -> (the fault, the adds it catches)
FAULTS = {
    "none_durable": ("none (the floor)", "`durable=True`"),
    "host_durable": ("SIGKILL a ConversationHost at 40% acked", "`durable=True`"),
    "host_add_many": ("SIGKILL a ConversationHost at 40% acked", "`add_many(durable=True)`"),
    "host_buffered": ("SIGKILL a ConversationHost at 40% acked", "`durable=False`"),
    "store_durable": ("SIGKILL the HistoryStore at 40% acked", "`durable=True`"),
    "store_buffered": ("SIGKILL the HistoryStore at 40% acked", "`durable=False`"),
    "shard_ingest": ("SIGKILL a VectorShard at 40% acked", "`durable=False`"),
    "store_restart": ("SIGKILL the HistoryStore, again and again, under one writer", "`durable=True`"),
    "paused_store": ("SIGSTOP the store under a 100-message add, SIGKILL its host, SIGCONT", "`durable=True`"),
    "fork_open": ("`fork()` under 4 writers, opened in-process and written at once", "`durable=False`"),
    "shard_search": ("SIGKILL a VectorShard during searches (4 clients)", "—"),
    "reopen": ("close in Ray, reopen in-process, reopen in Ray", "—"),
}

HEAD = (
    "| fault | adds | acknowledged | stored | seq returned ≠ stored | lost | duplicated "
    "| stall (Ray's restart) | also |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


def table(lines: list[dict[str, Any]]) -> str:
    rows = [HEAD]
    for line in lines:
        fault, adds = FAULTS[line["scenario"]]
        cells = [fault, adds, *(_n(line[k]) for k in ("acked", "stored", "seq_mismatch")), _lost(line)]
        cells += [_n(line["duplicated"]), _stall(line), _also(line)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _n(value: Any) -> str:
    return "—" if value is None else f"{value:,}"


def _lost(line: dict[str, Any]) -> str:
    if line["lost"] and "lost_recorded" in line:
        named = line["lost_reported_to_flush"]
        return f"{line['lost']:,} (dead letters {line['lost_recorded']:,}, named by flush {named:,})"
    return _n(line["lost"])


def _stall(line: dict[str, Any]) -> str:
    if line["stall_s"] is None:
        return "—"
    restart = line.get("restart_s")
    if isinstance(restart, list):  # one per kill
        return f"max {line['stall_s']:.2f} s: {_seconds(line['stalls_s'])} ({_seconds(restart)})"
    return f"{line['stall_s']:.2f} s" + (f" ({restart:.2f} s)" if restart else "")


def _seconds(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _also(line: dict[str, Any]) -> str:
    scenario = line["scenario"]
    if scenario == "shard_search":
        return (
            f"{line['searches']:,} searches: {line['raised']} raised, "
            f"{line['outcomes'].get('degraded', 0):,} degraded, {line['wrong_top_hit']} wrong top hits; "
            f"complete again {line['recovery_s']} s after the kill"
        )
    if scenario == "reopen":
        return f"{line['conversations']:,} conversations, vectors {' / '.join(f'{v:,}' for v in line['vectors'])}"
    if scenario == "fork_open":
        written, leaked = line["branch_written"], line["leaked"]
        return f"fork took {line['fork_s']} s; {written} written to the branch, {leaked} reached the source"
    if scenario == "paused_store":
        return f"caller error: {line['caller_error'] or 'none'}"
    also = f"{sum(line['caller_errors'].values())} caller errors, add p99 {line['add_ms']['p99_ms'] / 1000:.1f} s"
    if scenario == "shard_ingest":
        also += (
            f"; after `wait_indexed()`: {line['vectors_missing_from_shards']} vectors missing, "
            f"{line['found_by_vector']}/{line['sampled']} sampled found by vector, "
            f"{line['found_lexically']}/{line['sampled']} lexically"
        )
    return also


def rendered() -> str:
    """The table of the recorded run, ``benchmarks/results/faults.json``."""
    text = (RESULTS / "faults.json").read_text(encoding="utf-8")
    return table([json.loads(line) for line in text.splitlines() if line.startswith("{")])


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="the JSON lines python -m benchmarks.faults printed")
    args = parser.parse_args(argv)
    with open(args.run, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.startswith("{")]
    text = table(lines)
    print(text)
    return text


if __name__ == "__main__":
    main()
