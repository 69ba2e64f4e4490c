"""The chaos soak's table on docs/reliability.md, rendered from the recorded runs' JSON lines.

    python -m benchmarks.render            # writes it (with every other block) into docs/reliability.md

One column per recorded run (:data:`RUNS`), one row per check or figure; a figure a run did not
record (the older run predates the server's part of the soak) is shown as "—". A test keeps the
page equal to this rendering, so the page says what the files say.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._harness import recorded

ROOT = Path(__file__).resolve().parent.parent

#: (column heading, results file) of each recorded run, newest first.
RUNS = (
    ("30 minutes after the two fixes (the test suite running too)", "benchmarks/results/soak_30min_after_fixes.json"),
    ("30 minutes, the server under load", "benchmarks/results/soak_30min.json"),
    ("10 minutes, the facade only (earlier code)", "benchmarks/results/soak.json"),
)

Run = dict[str, Any]


def _n(x: Any) -> str:
    return f"{x:,}" if isinstance(x, int) else str(x)


def _s(x: Any) -> str:
    return f"{x:.2f} s" if isinstance(x, (int, float)) else "—"


def _kills(r: Run) -> str:
    roles = r.get("kills_by_role", {})
    return f"{r['kills']} (" + ", ".join(f"{role} {n}" for role, n in sorted(roles.items())) + ")"


def _ryw(r: Run) -> str:
    y = r["read_your_writes"]
    return f"{_n(y['context_held'])} / {_n(y['search_held'])} / {_n(y['search_degraded'])}"


def _losses(r: Run) -> str:
    return (
        f"{_n(r['lost_buffered'])}: {_n(r['lost_raised_to_caller'])} raised, {_n(r['lost_in_dead_letters'])} "
        f"listed, {_n(r['unnamed_losses'])} unnamed"
    )


def _server(key: str, fmt: Callable[[Any], str] = _n) -> Callable[[Run], str]:
    def cell(r: Run) -> str:
        server = r.get("server")
        return "—" if not server or key not in server else fmt(server[key])

    return cell


def _statuses(x: dict[str, int]) -> str:
    return ", ".join(f"{code}: {_n(n)}" for code, n in x.items()) or "none"


def _latency(x: dict[str, Any]) -> str:
    return f"{x['p50'] * 1000:.0f} ms / {x['p99'] * 1000:.0f} ms" if x.get("p50") is not None else "—"


def _channels(r: Run) -> str:
    by = r.get("by_channel")
    if not by:
        return "—"
    names = {"all_but_mcp": "facade and REST", "rest": "of which REST", "mcp": "MCP"}
    return "; ".join(
        f"{names.get(ch, ch)} {_n(c.get('acked', c.get('mcp_acked')))} / {_n(c.get('stored', c.get('mcp_stored')))}"
        for ch, c in by.items()
    )


def _rest_erasure(r: Run) -> str:
    e = r.get("rest_erasure") or r.get("server", {}).get("rest_erasure")
    if not e:
        return "—"
    return f"{'yes' if e.get('verified_clean') else 'NO'}, {len(e.get('files_holding_id', []))}"


ROWS: list[tuple[str, Callable[[Run], str]]] = [
    ("git commit; load average at the end (1 min)", lambda r: f"`{r['git_sha']}`; {r['machine']['load_avg'][0]:.0f}"),
    ("kills (by role)", _kills),
    ("acknowledged / stored", lambda r: f"{_n(r['acked'])} / {_n(r['stored'])}"),
    ("acknowledged / stored, per channel", _channels),
    ("durable acks, every one stored at its seq", lambda r: _n(r["acked_durable"])),
    (
        "durable acks lost, duplicated, stored at another seq",
        lambda r: f"{r['lost_durable']}, {r['duplicated']}, {r['seq_mismatch']}",
    ),
    ("buffered acks lost: raised to a caller, listed by `dead_letters()`, unnamed", _losses),
    ("conversations whose stored order is not the order of their acks", lambda r: _n(r["order_violations"])),
    ("contexts holding the message just added / searches finding it / degraded (a shard away)", _ryw),
    (
        "contexts that missed it (of those, not explained by a loss named to a caller)",
        lambda r: f"{_n(r['read_your_writes']['context_missed'])} ({_n(r['ryw_failed'])})",
    ),
    ("reads of another agent's messages", lambda r: _n(r["read_your_writes"]["cross_reads"])),
    ("deleted, stored after all the same", lambda r: f"{_n(r['deleted'])}, {_n(r['deleted_still_stored'])}"),
    (
        "erasure during the kills: `verify_deleted` clean, files holding the user's id",
        lambda r: f"{'yes' if r['erasure']['verified_clean'] else 'NO'}, {len(r['erasure']['files_holding_id'])}",
    ),
    ("the same over REST", _rest_erasure),
    (
        "fork during the kills: durable acks made before it / in the fork at their seqs",
        lambda r: f"{_n(r['fork']['fork_acked'])} / {_n(r['fork']['fork_acked'] - r['fork']['fork_missing'])}",
    ),
    (
        "HTTP requests (REST, MCP)",
        lambda r: (
            _server("requests")(r)
            + ("" if "server" not in r else f" ({_n(r['server']['requests_rest'])}, {_n(r['server']['requests_mcp'])})")
        ),
    ),
    ("HTTP errors by status", _server("errors_by_status", _statuses)),
    (
        "cross-tenant reads; read-only writes let through",
        lambda r: _server("cross_tenant_reads")(r) + "; " + _server("read_only_writes_accepted")(r),
    ),
    ("HTTP latency p50 / p99, quiet", _server("latency_quiet_s", _latency)),
    ("HTTP latency p50 / p99, under kills", _server("latency_chaos_s", _latency)),
    ("kill → next authenticated REST success, p99", _server("p99_rest_ok_after_kill_s", _s)),
    (
        "kill → durable ack on the victim's conversation, p50 / p99",
        lambda r: f"{_s(r['p50_recover_s'])} / {_s(r['p99_recover_s'])}",
    ),
    (
        "kill → found by a complete search, p50 / p99",
        lambda r: f"{_s(r['p50_searchable_s'])} / {_s(r['p99_searchable_s'])}",
    ),
    ("tick, quiet p50 / p99", lambda r: f"{_s(r['tick_baseline_s']['p50'])} / {_s(r['tick_baseline_s']['p99'])}"),
    (
        "tick under kills p50 / p99 (p99 against the quiet p99)",
        lambda r: f"{_s(r['tick_chaos_s']['p50'])} / {_s(r['tick_chaos_s']['p99'])} ({r['p99_tick_ratio']:.1f}x)",
    ),
    (
        "RSS of all memray processes at the end; slope over the last two thirds",
        lambda r: f"{r['rss_total_mb_end']:,.0f} MB; {r['rss_slope_mb_per_min']:+.1f} MB/min",
    ),
    (
        "RSS slope of this driver; open files per process at most",
        lambda r: f"{r['driver_rss_slope_mb_per_min']:+.2f} MB/min; {r['open_files_max']}",
    ),
    ("hosts' queue (acknowledged, not durable) at most", lambda r: _n(r["queue_max"])),
]


def runs() -> list[tuple[str, Run]]:
    out = []
    for heading, rel in RUNS:
        if (ROOT / rel).exists():
            out.append((heading, recorded(rel)))
    return out


def render() -> str:
    recorded = runs()
    lines = ["| check | " + " | ".join(h for h, _ in recorded) + " |", "| --- |" + " --- |" * len(recorded)]
    for label, cell in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(r) for _, r in recorded) + " |")
    return "\n".join(lines)
