"""The docs' tables of recorded runs, each rendered from ``benchmarks/results/*.json``.

Each function returns one block's markdown; :mod:`benchmarks.render` says which page and markers
it goes between and names the files it reads (the same names as here).
"""

from __future__ import annotations

from typing import Any

from benchmarks._harness import recorded

__all__ = [
    "ingest",
    "simulate_agents",
    "recall_latency",
    "reembed",
    "fork",
    "stream_scoring",
    "retrieval_paraphrase",
    "retrieval_locomo",
    "retrieval_synthetic",
    "embedding_rates",
    "startup",
    "call_watch",
    "ingest_targets",
    "write_targets",
    "read_targets",
    "batching_runs",
    "modes",
    "stores",
    "restart",
]

Run = dict[str, Any]


def _s(ms: float) -> str:
    """Milliseconds as seconds, 2 decimals below 10 s."""
    return f"{ms / 1000:.2f} s" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _ms(ms: float) -> str:
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 1 else f"{ms:.3f} ms"


def _lag(d: dict[str, float]) -> str:
    return f"p50 {_s(d['p50_ms'])}, p99 {_s(d['p99_ms'])}"


# -- docs/benchmarks.md ---------------------------------------------------------------------------


def ingest() -> str:
    r = recorded("ingest.json")
    a, st, add, fl, store = r["add_many"], r["steady"], r["add"], r["floor"], r["store"]
    duck, part = fl["duckdb"], store["partitions"]
    rows = [
        "| | memray | floor measured in the same run | ratio |",
        "| --- | --- | --- | --- |",
        f"| `add_many`, messages/s acknowledged ({r['params']['batch'] // 1000}k-message calls, "
        f"{r['params']['inflight']} in flight) | {a['msgs_per_s']:,} | pipelined Ray no-op calls with the same "
        f"payloads: {fl['calls']['add_many_msgs_per_s']:,} | {a['ratio_to_ray_noop']:.3f} |",
        f"| same, durable lag (ack → commit, per message) | {_lag(a['durable_lag'])} | "
        f"`HistoryStore.append_messages` alone: {duck['history_store_rows_per_s']:,} rows/s; raw DuckDB Arrow insert "
        f"of the same rows: {duck['raw_arrow_insert_rows_per_s']:,} rows/s "
        f"| {a['ratio_to_history_store']:.3f} / {a['ratio_to_raw_arrow_insert']:.3f} |",
        f"| steady phase at {st['fraction_of_max']:.2f} of the `add_many` maximum (backpressure on) "
        f"| {st['msgs_per_s']:,} messages/s; durable lag {_lag(st['durable_lag'])} | | |",
        f"| per-conversation `add`, {r['params']['clients']} clients, messages/s | {add['msgs_per_s']:,} "
        f"(p50 {_ms(add['latency']['p50_ms'])}, p99 {_ms(add['latency']['p99_ms'])}) "
        f"| Ray no-op calls, {r['params']['clients']} clients: {fl['calls']['add_msgs_per_s']:,} "
        f"| {add['ratio_to_noop']:.3f} |",
        f"| same, durable lag | {_lag(add['durable_lag'])} | | |",
        f"| the store's own time ({len(part)} {'partition' if len(part) == 1 else 'partitions'}, "
        f"{a['group_commits']} group commits of "
        f"{a['avg_rows_per_commit']:,} rows) | {store['cpu_us_per_row']:.1f} µs CPU per row "
        f"({sum(p['rows_per_cpu_s'] for p in part):,} rows per CPU second), {store['busy_us_per_row']:.1f} µs busy "
        "| | |",
    ]
    return "\n".join(rows)


SIMULATIONS = ("simulate_agents.json", "simulate_agents_inprocess.json", "simulate_agents_10k.json")


def simulate_agents() -> str:
    rows = [
        "| agents × turns | mode | tick p50 / p99 | raw floor tick | ratio | batched floor tick | no-op tick (one "
        "no-op call per agent) | `context` p50 / p99 | durable lag p99 | searchable lag p50 | store = acknowledged "
        "|",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in SIMULATIONS:
        r = recorded(name)
        p = r["params"]
        ctx = "context_many" if "context_many_p50_ms" in r else "context"
        batched = r.get("batched_floor")
        rows.append(
            f"| {p['agents']:,} × {p['turns']} | {p['mode']} | {_s(r['tick_p50_ms'])} / {_s(r['tick_p99_ms'])} "
            f"| {_ms(r['raw_floor']['tick_ms'])} | {r['tick_ratio_to_raw_floor']:.2f} "
            f"| {_ms(batched['tick_ms']) if batched else '—'} | {_ms(r['floor']['tick_of_noop_calls_ms'])} "
            f"| {_ms(r[ctx + '_p50_ms'])} / {_ms(r[ctx + '_p99_ms'])} ({'`' + ctx + '`'}) "
            f"| {_ms(r['durable_lag']['p99_ms'])} | {_ms(r['searchable_lag']['p50_ms'])} "
            f"| {'exact' if r['verified'] else 'NOT exact'} ({r['messages']:,} messages) |"
        )
    m = recorded("simulate_agents_10k.json")["memory"]
    rows += [
        "",
        f"Memory per idle conversation (the 10,000-agent run's last phase: fresh hosts load "
        f"{m['conversations_loaded']:,} of the conversations, {m['messages_per_conversation']} short messages each, "
        f"and the hosts' RSS is compared): **{m['overhead_per_conversation_bytes'] / 1000:.1f} KB per conversation "
        f"beyond its {m['content_bytes_per_conversation']} bytes of text** (host RSS {m['rss_before_mib']:.0f} → "
        f"{m['rss_after_mib']:.0f} MiB).",
    ]
    return "\n".join(rows)


def recall_latency() -> str:
    rows = [
        "| mode | N | clients | conversation search p50 / p99 | ratio p50 / p99 | user-wide p50 | ratio "
        "| app-wide p50 | ratio to raw numpy | `context()` p50 / p99 | conversation searches/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    floors = []
    for name in ("recall_latency.json", "recall_latency_inprocess.json"):
        r = recorded(name)
        for res in r["results"]:
            n = f"{res['n'] // 1000}k"
            raw = res["raw_floor"]
            floors.append(
                f"{r['params']['mode']} {n}: conversation {raw['search_conversation']['p50_ms']:.3f} ms, user-wide "
                f"{raw['search_user']['p50_ms']:.3f} ms, app-wide numpy {raw['search_app_numpy']['p50_ms']:.2f} ms"
            )
            for clients, c in res["clients"].items():
                cs, us, ap, cx = c["search_conversation"], c["search_user"], c["search_app"], c["context"]
                rows.append(
                    f"| {r['params']['mode']} | {n} | {clients} | {cs['p50_ms']:.2f} / {cs['p99_ms']:.2f} "
                    f"| {cs['ratio_p50_to_raw']:.2f} / {cs['ratio_p99_to_raw']:.2f} | {us['p50_ms']:.2f} "
                    f"| {us['ratio_p50_to_raw']:.2f} | {ap['p50_ms']:.1f} | {ap['ratio_p50_to_raw_numpy']:.2f} "
                    f"| {cx['p50_ms']:.1f} / {cx['p99_ms']:.1f} | {cs['per_s']:,.0f} |"
                )
    pings = [
        f"{res['n'] // 1000}k, {clients} {'client' if clients == '1' else 'clients'} {c['ray_ping']['p50_ms']:.2f} ms"
        for res in recorded("recall_latency.json")["results"]
        for clients, c in res["clients"].items()
    ]
    recalls = [
        f"{res['recall_at_10']['conversation']:.3f} / {res['recall_at_10']['app']:.3f}"
        for name in ("recall_latency.json", "recall_latency_inprocess.json")
        for res in recorded(name)["results"]
    ]
    rows += [
        "",
        f"Raw floors (p50): {'; '.join(floors)}. Ray no-op round trip (p50): {', '.join(pings)}. "
        f"recall@10 against exact search, conversation / app-wide, by run: {', '.join(recalls)}.",
    ]
    return "\n".join(rows)


def reembed() -> str:
    runs = [recorded("reembed.json"), recorded("reembed_20k.json")]

    def row(label: str, cell: Any) -> str:
        return f"| {label} | " + " | ".join(cell(r) for r in runs) + " |"

    return "\n".join(
        [
            "| | " + " | ".join(f"{r['params']['rows']:,} rows (`{r['git_sha']}`)" for r in runs) + " |",
            "| --- |" + " --- |" * len(runs),
            row("the embedder, one process, one worker's threads", lambda r: f"{r['embedder_rows_per_s']} rows/s"),
            row(
                f"**floor: that × {runs[0]['workers']} workers**",
                lambda r: f"{r['floor_rows_per_s']}",
            ),
            row("embedder processes side by side, same moment", lambda r: f"{r['parallel_rows_per_s']}"),
            row(
                "**the job's bulk phase, from start** (pool start-up and model loading included)",
                lambda r: f"**{r['job_rows_per_s']} ({r['ratio']:.2f} of the floor)**",
            ),
            row(
                "the job once its first batch is written",
                lambda r: f"{r['job_steady_rows_per_s']} ({r['ratio_steady']:.2f})",
            ),
            row(
                "pool start-up / the model's own load",
                lambda r: f"{r['job_startup_s']:.1f} s / {r['embedder_load_s']:.1f} s",
            ),
            row(
                "the whole job incl. export, staging, catch-up and cutover",
                lambda r: f"{r['job_total_rows_per_s']} rows/s ({r['job_seconds']:.0f} s)",
            ),
            "",
            f"The pool: {runs[0]['workers']} workers × {runs[0]['cpus_per_worker']} CPU, {runs[0]['threads']} "
            f"{'thread' if runs[0]['threads'] == 1 else 'threads'} each (sized from the CPUs that were free).",
        ]
    )


def fork() -> str:
    rows = [
        "| mode | copy, quiet | copy, agents writing | floor: copytree + fsync | ready, quiet | ready, writing "
        "| floor: copytree + fsync + open | writers kept, messages/s | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in ("fork.json", "fork_inprocess.json"):
        r = recorded(name)
        p, q, w, f = r["params"], r["quiet"], r["writing"], r["floor"]
        rows.append(
            f"| {p['mode']} ({p['hosts']} hosts, {p['shards']} shards) | **{q['copy_s']:.2f} s** "
            f"({r['ratio_quiet_copy_to_copytree_fsync']:.2f}×) | {w['copy_s']:.1f} s | {f['copytree_fsync_s']:.2f} s "
            f"| {q['ready_s']:.1f} s ({r['ratio_quiet_ready_to_copytree_fsync_plus_open']:.2f}×) "
            f"| {w['ready_s']:.1f} s "
            f"| {f['copytree_fsync_s'] + f['open_copy_s']:.1f} s | {w['written_per_s']:.0f} "
            f"| {r['machine']['load_avg'][0]:.0f} |"
        )
    return "\n".join(rows)


def stream_scoring() -> str:
    r = recorded("stream_scoring.json")

    def row(label: str, d: Run, bold: bool = False) -> str:
        ratio = f"**{d['ratio_p50']:.2f}**" if bold else f"{d['ratio_p50']:.2f}"
        rel, st = d["relevance"], d["stream"]
        return (
            f"| {label} | {rel['p50_ms']:.2f} ({rel['p99_ms']:.1f}) | {st['p50_ms']:.2f} ({st['p99_ms']:.1f}) "
            f"| {ratio} |"
        )

    return "\n".join(
        [
            "| layer | relevance | stream | stream / relevance |",
            "| --- | --- | --- | --- |",
            row("`conv.search` through Ray, one client", r["facade"], bold=True),
            row("`VectorShard.search` in-process (where scoring runs)", r["shard"]),
            row(
                "floor: numpy over the same vectors (matrix product, clip, stream formula, argpartition)",
                r["numpy_floor"],
            ),
            "",
            f"The shard's stream search is {r['stream_shard_p50_to_numpy_stream_p50']:.0f}× the bare numpy floor, "
            f"through Ray {r['stream_facade_p50_to_numpy_stream_p50']:.0f}×.",
        ]
    )


_KS = (1, 3, 5, 10, 15)


def _recall_row(label: str, d: Run, bm25: float | None) -> str:
    ks = " | ".join(f"{d[f'recall@{k}']:.3f}" for k in _KS)
    ratio = f"{d['recall@10'] / bm25:.2f}" if bm25 else ""
    hit = d.get("unrelated_any_hit")
    return f"| {label} | {ks} | {ratio} | {'' if hit is None else hit} |"


def retrieval(dataset: str) -> str:
    """One dataset's recall table of ``retrieval_eval.json``."""
    r = recorded("retrieval_eval.json")
    ds, default = r["datasets"][dataset], r["params"]["default_embedder"]
    rows = [
        "| scope / embedder / mode | R@1 | R@3 | R@5 | R@10 | R@15 | ÷ BM25 (R@10) | unrelated hit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for scope in ("conversation", "user", "app"):
        if scope not in ds["floor_bm25"] or not any(scope in e["calibrated"] for e in ds["embedders"].values()):
            continue
        bm25 = ds["floor_bm25"][scope]
        rows.append(_recall_row(f"{scope} / plain BM25", bm25, None))
        for name, e in ds["embedders"].items():
            cal, tuned = e["calibrated"][scope], e["tuned"][scope]
            modes = ("vector", "lexical", "hybrid") if name == default else ("vector", "hybrid")
            for mode in modes:
                label = f"{scope} / {name} / {mode}"
                if mode == "hybrid" and name == default:
                    label = f"**{label} (the default)**"
                rows.append(_recall_row(label, cal[mode], bm25["recall@10"]))
            weight = e["tuned"]["vector_weight"]
            rows.append(
                _recall_row(f"{scope} / {name} / hybrid, tuned weight {weight:g}", tuned["hybrid"], bm25["recall@10"])
            )
    return "\n".join(rows)


def retrieval_paraphrase() -> str:
    return retrieval("paraphrase")


def retrieval_locomo() -> str:
    return retrieval("locomo")


def retrieval_synthetic() -> str:
    return retrieval("synthetic")


def embedding_rates() -> str:
    r = recorded("retrieval_eval.json")
    syn = r["datasets"]["synthetic"]["embedders"]
    rates = ", ".join(f"{name} {e['sentences_per_s']:,}/s" for name, e in syn.items())
    thresholds = ", ".join(f"{name} {e['calibrated']['threshold']:g}" for name, e in syn.items())
    weights = ", ".join(f"{name} {e['calibrated']['vector_weight']:.3f}" for name, e in syn.items())
    floor = syn[r["params"]["default_embedder"]]["floor_tokenizer_sentences_per_s"]
    se = recorded("static_embedder.json")
    return (
        f"Embedding rate on the synthetic set's turns, one call, in the retrieval run: {rates} (the default's floor, "
        f"its tokenizer alone on the same texts: {floor:,}/s). Calibrated thresholds: {thresholds}; vector weights: "
        f"{weights}.\n\nThe default embedder alone (`static_embedder.json`, one core): "
        f"{se['cold_sentences_per_s']:,} chat-length texts/s with an empty word table, "
        f"{se['warm_sentences_per_s']:,} once its words are known, {se['one_by_one_per_s']:,} one text at a time, "
        f"{se['memoised_sentences_per_s']:,} given again from its memo of the texts it embedded last; "
        f"its floor, the tokenizer alone on the same texts, {se['floor_tokenizer_sentences_per_s']:,}/s."
    )


def startup() -> str:
    r = recorded("startup.json")
    m, ri, ra, j, ip = r["memray"], r["ray_init"], r["ray_actors"], r["join"], r["inprocess"]
    return "\n".join(
        [
            "| | open | close |",
            "| --- | --- | --- |",
            f"| ray mode ({r['params']['hosts']} hosts, {r['params']['shards']} shards, a local Ray started by "
            f"`open`) | {m['open_s']:.2f} s | {m['close_s']:.2f} s |",
            f"| floor: `ray.init` / `ray.shutdown()` alone | {ri['open_s']:.2f} s | {ri['close_s']:.2f} s |",
            f"| floor: the same with as many no-op actors | {ra['open_s']:.2f} s | {ra['close_s']:.2f} s |",
            f"| joining a running memray | {j['open_s']:.2f} s | {j['close_s']:.2f} s |",
            f"| in-process | {ip['open_s']:.2f} s | {ip['close_s']:.2f} s |",
            "",
            f"Median of {r['params']['repeat']} rounds; ray-mode `open()` is "
            f"{r['ratios']['memray_open_to_ray_actors']:.2f}× `ray.init` with the no-op actors and "
            f"{r['ratios']['memray_open_to_ray_init']:.2f}× `ray.init` alone. The no-op actors alone take "
            f"{ra['open_s'] / ri['open_s']:.2f}× `ray.init`: each actor is a process that starts Python and imports "
            f"Ray, and Ray starts as many of them at once as the machine has CPUs ({r['machine']['cpu_count']} here).",
        ]
    )


def call_watch() -> str:
    r = recorded("call_watch.json")
    one, many = r["clients"]["1"], r["clients"]["16"]

    def cell(c: Run, kind: str, key: str, fmt: str) -> str:
        values = [rd[kind][key] for rd in c["rounds"]]
        return f"{format(c[kind][key], fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"

    pc = r["placement_check"]
    return "\n".join(
        [
            "| | floor | unwatched | watched | watched / unwatched |",
            "| --- | --- | --- | --- | --- |",
            "| 1 client, p50 ms | "
            + " | ".join(cell(one, k, "p50_ms", ".2f") for k in ("floor", "unwatched", "watched"))
            + f" | {one['watched_p50_to_unwatched']:.2f} |",
            "| 16 clients, calls/s | "
            + " | ".join(cell(many, k, "calls_per_s", ",.0f") for k in ("floor", "unwatched", "watched"))
            + f" | {many['watched_rate_to_unwatched']:.2f} |",
            "",
            f"The watch's own cost over a reply already there: {r['cpu']['watched_us']:.1f} µs per call "
            f"({r['cpu']['plain_await_us']:.2f} µs for a plain await). Reading the actor's row in Ray's actor table, "
            f"what a call still waiting after 2 s does once a second: {pc['p50_ms']:.2f} ms at p50, "
            f"{pc['p95_ms']:.1f} ms at p95.",
        ]
    )


# -- docs/performance.md --------------------------------------------------------------------------


def _met(ok: bool, detail: str = "") -> str:
    return ("yes" if ok else "no") + (f": {detail}" if detail else "")


def _by(measured: float, target: float) -> str:
    """ "yes", or "no: by N×" for a figure below its minimum."""
    return _met(measured >= target, "" if measured >= target else f"by {target / measured:.1f}×")


def _span(values: list[float], fmt: str = ".2f") -> str:
    lo, hi = min(values), max(values)
    return f"{lo:{fmt}}×" if f"{lo:{fmt}}" == f"{hi:{fmt}}" else f"{lo:{fmt}}–{hi:{fmt}}×"


def ingest_targets() -> str:
    ing, sim, big = recorded("ingest.json"), recorded("simulate_agents.json"), recorded("simulate_agents_10k.json")
    rl = recorded("recall_latency.json")
    a, t = ing["add_many"], ing["targets"]
    mem = big["memory"]
    runs = [recorded(n) for n in SIMULATIONS]
    exact = all(r["verified"] and not r["missing"] and not r["unexpected"] for r in runs)

    def ratios(clients: str, key: str) -> list[float]:
        return [
            res["clients"][clients][kind][key]
            for res in rl["results"]
            for kind in ("search_conversation", "search_user")
            if clients in res["clients"]
        ]

    p50_1, p99_1 = ratios("1", "ratio_p50_to_floor_sum"), ratios("1", "ratio_p99_to_floor_sum")
    p50_16, p99_16 = ratios("16", "ratio_p50_to_floor_sum"), ratios("16", "ratio_p99_to_floor_sum")
    scoped_ok = [x <= 1.5 for x in p50_1 + p50_16] + [x <= 2 for x in p99_1 + p99_16]
    reembeds = [recorded("reembed.json"), recorded("reembed_20k.json")]
    burst, sim_lag = a["durable_lag"]["p99_ms"], sim["durable_lag"]["p99_ms"]
    return "\n".join(
        [
            "| target (2 cores, 24 GiB) | measured | met |",
            "| --- | --- | --- |",
            f"| ≥ {t['add_many_msgs_per_s_min']:,} messages/s through `add_many`, "
            f"{ing['params']['conversations'] // 1000}k conversations, ≤ {ing['params']['hosts']} hosts "
            f"| {a['msgs_per_s']:,}/s ({a['ratio_to_ray_noop']:.3f} of Ray's own no-op call rate with the same "
            f"payloads) | {_by(a['msgs_per_s'], t['add_many_msgs_per_s_min'])} |",
            f"| durable lag p99 ≤ 1 s | {_s(burst)} in the ingest burst; {_s(sim_lag)} in the "
            f"{sim['params']['agents']:,}-agent simulation ({sim['params']['mode']} mode) "
            f"| {'yes' if burst <= 1000 else 'no'} in the burst, "
            f"{'yes' if sim_lag <= 1000 else 'no'} in the simulation |",
            f"| ≤ 16 KB per idle conversation beyond content | {mem['overhead_per_conversation_bytes'] / 1000:.1f} KB "
            f"({mem['messages_per_conversation']} buffered messages each) "
            f"| {_met(mem['overhead_per_conversation_bytes'] <= 16_000)} |",
            f"| exactly the acknowledged messages in the store | {'exact' if exact else 'NOT exact'} in every recorded "
            f"simulation | {_met(exact)} |",
            f"| scoped search p50 ≤ 1.5× floor, p99 ≤ 2× (floor: a Ray no-op round trip + the same search "
            f"in-process) | 1 client: p50 {_span(p50_1)}, p99 {_span(p99_1)}; 16 clients: p50 {_span(p50_16)}, "
            f"p99 {_span(p99_16)} (conversation and user-wide, 10k and 100k) "
            f"| {'yes' if all(scoped_ok) else 'no' if not any(scoped_ok) else 'partly'} |",
            f"| re-embedding ≥ 70% of embedder × workers | {_span([r['ratio'] for r in reembeds])} with "
            f"{reembeds[0]['params']['model'].split(':')[-1]}, pool start-up and model loading included "
            f"({_span([r['ratio_steady'] for r in reembeds])} once the first batch is written) "
            f"| {_met(all(r['ratio'] >= r['target_ratio'] for r in reembeds))} |",
        ]
    )


def write_targets() -> str:
    small, big = recorded("simulate_agents_inprocess.json"), recorded("simulate_agents_10k.json")
    sim = recorded("simulate_agents.json")
    ing, st = recorded("ingest.json"), recorded("startup.json")

    def tick(r: Run) -> str:
        bf, t = r["batched_floor"], r["targets"]
        ms = "ms" if t["tick_ms_max"] < 1000 else "s"
        limit = f"{t['tick_ms_max']} ms" if ms == "ms" else f"{t['tick_ms_max'] / 1000:g} s"
        verdict = _met(
            t["tick_ok"] and t["tick_ratio_ok"], f"{r['tick_ratio_to_batched_floor']:.1f}× the batched floor"
        )
        mode = "in-process" if r["params"]["mode"] == "inprocess" else "in ray mode"
        return (
            f"| {r['params']['agents']:,}-agent tick {mode} "
            f"≤ {limit} and ≤ {t['tick_ratio_to_batched_floor_max']:g}× its batched floor "
            f"| {_s(r['tick_p50_ms'])} p50 (p99 {_s(r['tick_p99_ms'])}, {r['params']['turns']} ticks); batched floor "
            f"{_ms(bf['tick_ms'])} ({bf['calls']} calls carrying the tick's bytes {_ms(bf['calls_ms'])} + raw scoring "
            f"{_ms(bf['raw_scoring_ms'])}); one call per agent + an Arrow insert {_ms(r['raw_floor']['tick_ms'])} "
            f"| {verdict} |"
        )

    a, steady = ing["add_many"], ing["steady"]
    ctx = [
        f"{r['params']['agents']:,} agents {r['params']['mode']}: {r['context_p99_over_p50']:.2f}×"
        for r in (sim, small, big)
    ]
    coal = [
        f"{r['coalescing']['ratio_p50']:.2f}× {r['params']['mode']} ({r['params']['agents']:,} agents)"
        for r in (big, small)
    ]
    m, ri, ra = st["memray"], st["ray_init"], st["ray_actors"]
    opens = st["targets"]
    why = "`ray.init` alone is past the open target on this machine" if ri["open_s"] > opens["open_s"]["max"] else ""
    return "\n".join(
        [
            "| target (2 cores, 24 GiB) | measured | met |",
            "| --- | --- | --- |",
            tick(small),
            tick(big),
            f"| concurrent `acontext()` ≤ 1.3× one `context_many` | {', '.join(coal)} "
            f"| {_met(all(r['targets']['coalesced_ok'] for r in (big, small)))} |",
            f"| `context()` p99 ≤ 2× p50 | {'; '.join(ctx)} "
            f"| {_met(all(r['context_p99_over_p50'] <= 2 for r in (sim, small, big)))} |",
            f"| `add_many` ≥ 0.8 of pipelined Ray no-op calls, same payloads | {a['ratio_to_ray_noop']:.2f} "
            f"({a['msgs_per_s']:,} vs {ing['floor']['calls']['add_many_msgs_per_s']:,} messages/s) "
            f"| {_by(a['ratio_to_ray_noop'], 0.8)} |",
            f"| durable lag p99 ≤ 1 s at ≥ 80% of the maximum rate, backpressure on | p99 "
            f"{_s(steady['durable_lag']['p99_ms'])} at {steady['fraction_of_max']:.2f} of the maximum "
            f"| {_met(steady['durable_lag']['p99_ms'] <= 1000)} |",
            f"| ray-mode `open()` ≤ {opens['open_s']['max']:g} s, `close()` ≤ {opens['close_s']['max']:g} s, in a "
            f"fresh process | open {m['open_s']:.2f} s against `ray.init` alone {ri['open_s']:.2f} s and `ray.init` + "
            f"no-op actors {ra['open_s']:.2f} s; close {m['close_s']:.2f} s (floor {ri['close_s']:.2f} s); joining a "
            f"running memray {st['join']['open_s']:.2f} s; in-process open {st['inprocess']['open_s']:.2f} s, close "
            f"{st['inprocess']['close_s']:.2f} s | {_met(opens['open_s']['ok'] and opens['close_s']['ok'], why)} |",
        ]
    )


def read_targets() -> str:
    ray, inp = recorded("recall_latency.json"), recorded("recall_latency_inprocess.json")
    rp, sm, rv = recorded("read_path_micro.json"), recorded("search_micro.json"), recorded("retrieval_eval.json")

    def at(run: Run, n: int, clients: str) -> Run:
        res = next(x for x in run["results"] if x["n"] == n)
        return dict(res["clients"][clients], raw_floor=res["raw_floor"])

    ns = [x["n"] for x in ray["results"]]
    inproc = [
        f"{_ratio(at(inp, n, '1')['search_conversation']['ratio_p50_to_raw'])} at {n // 1000}k "
        f"({at(inp, n, '1')['search_conversation']['p50_ms']:.2f} vs "
        f"{at(inp, n, '1')['raw_floor']['search_conversation']['p50_ms']:.3f} ms)"
        for n in ns
    ]
    parts = (
        f"`read_path_micro`: {rp['search']['p50_ms']:.2f} ms = shard {rp['shard_search']['p50_ms']:.2f} + hop "
        f"{rp['hop']['p50_ms']:.2f} + hydration {rp['hydrate']['p50_ms']:.2f} + query embedding "
        f"{rp['embed_query']['p50_ms']:.2f} + the rest, raw {rp['raw']['p50_ms']:.3f} ms "
        f"({rp['ratio_search_to_raw']:.0f}×)"
    )
    one = next(m for m in sm["many"] if m["batch"] == 1)
    shard = (
        f"the shard alone in `search_micro` {sm['conversation_p50_to_raw']:.1f}×, "
        f"{one['many_p50_to_raw']:.1f}× in a `search_many` call of one"
    )
    inproc_ok = all(at(inp, n, "1")["search_conversation"]["ratio_p50_to_raw"] <= 3 for n in ns)

    def ray_cells(clients: str, key: str) -> str:
        return ", ".join(f"{_ratio(at(ray, n, clients)['search_conversation'][key])} at {n // 1000}k" for n in ns)

    one_ok_p50 = all(at(ray, n, "1")["search_conversation"]["ratio_p50_to_raw"] <= 1.5 for n in ns)
    one_ok_p99 = all(at(ray, n, "1")["search_conversation"]["ratio_p99_to_raw"] <= 2 for n in ns)
    many_ok = all(at(ray, n, "16")["search_conversation"]["ratio_p50_to_raw"] <= 2 for n in ns)
    top = max(ns)
    app_ray, app_inp = at(ray, top, "1"), at(inp, top, "1")
    app16 = at(ray, top, "16")["search_app"]["ratio_p50_to_raw_numpy"]
    app_ok = (
        app_ray["search_app"]["ratio_p50_to_raw_numpy"] <= 2 and app_inp["search_app"]["ratio_p50_to_raw_numpy"] <= 2
    )
    default = rv["params"]["default_embedder"]
    quality = []
    quality_ok = True
    for ds in ("locomo", "synthetic"):
        d = rv["datasets"][ds]
        bm25 = d["floor_bm25"]["user"]["recall@10"]
        hybrid = d["embedders"][default]["calibrated"]["user"]["hybrid"]["recall@10"]
        quality_ok = quality_ok and hybrid >= bm25
        quality.append(f"{ds} {hybrid:.3f} (plain BM25 {bm25:.3f})")
    return "\n".join(
        [
            "| target | measured | met |",
            "| --- | --- | --- |",
            f"| in-process conversation search p50 ≤ 3× raw (numpy + BM25, same namespace) | {', '.join(inproc)}; "
            f"{parts}; {shard} | {_met(inproc_ok)} |",
            f"| Ray mode, 1 client: p50 ≤ 1.5× (Ray no-op + raw), p99 ≤ 2× | p50 {ray_cells('1', 'ratio_p50_to_raw')}; "
            f"p99 {ray_cells('1', 'ratio_p99_to_raw')} | p99 {'yes' if one_ok_p99 else 'no'}, "
            f"p50 {'yes' if one_ok_p50 else 'no'} |",
            f"| Ray mode, 16 clients: p50 ≤ 2× | {ray_cells('16', 'ratio_p50_to_raw')} | {_met(many_ok)} |",
            f"| app-wide search, {top // 1000}k vectors on {ray['params']['shards'][0]} shards: p50 ≤ 2× raw exact "
            f"numpy | {_ratio(app_ray['search_app']['ratio_p50_to_raw_numpy'])} in Ray mode "
            f"({app_ray['search_app']['p50_ms']:.1f} vs {app_ray['raw_floor']['search_app_numpy']['p50_ms']:.1f} ms), "
            f"{_ratio(app_inp['search_app']['ratio_p50_to_raw_numpy'])} in-process "
            f"({app_inp['search_app']['p50_ms']:.1f} vs {app_inp['raw_floor']['search_app_numpy']['p50_ms']:.1f} ms); "
            f"at 16 clients {_ratio(app16)} | {'yes at 1 client' if app_ok else 'no'} |",
            f"| the default's recall@10 (user-wide, {default} hybrid) ≥ plain BM25's | {', '.join(quality)} "
            f"| {_met(quality_ok)} |",
        ]
    )


def _ratio(x: float) -> str:
    return f"{x:.2f}×" if x < 10 else f"{x:.1f}×"


# -- docs/batching.md -----------------------------------------------------------------------------


def batching_runs() -> str:
    """The simulations' ticks against their floors, and coalescing against the explicit batch."""
    rows = ["| what | measured | floor (same run) | ratio |", "| --- | --- | --- | --- |"]
    for name in ("simulate_agents_10k.json", "simulate_agents_inprocess.json"):
        r = recorded(name)
        p, bf = r["params"], r["batched_floor"]
        per_agent = r["raw_floor"]["tick_ms"]
        rows.append(
            f"| {p['agents']:,}-agent tick, {'in-process' if p['mode'] == 'inprocess' else 'ray mode'} "
            f"({p['turns']} ticks) | {_s(r['tick_p50_ms'])} p50 | batched floor {_ms(bf['tick_ms'])} (calls "
            f"{_ms(bf['calls_ms'])} + raw scoring {_ms(bf['raw_scoring_ms'])}); one call per agent: {_ms(per_agent)} "
            f"| {r['tick_ratio_to_batched_floor']:.1f}× the batched floor; {_ratio(r['tick_ratio_to_raw_floor'])} the "
            "per-agent floor |"
        )
    for name in ("simulate_agents_10k.json", "simulate_agents_inprocess.json"):
        r = recorded(name)
        c = r["coalescing"]
        rows.append(
            f"| {r['params']['agents']:,} concurrent `acontext()` vs one `context_many`, "
            f"{'in-process' if r['params']['mode'] == 'inprocess' else 'ray mode'} "
            f"| {_s(c['concurrent_acontext']['p50_ms'])} vs {_s(c['context_many']['p50_ms'])} p50 | — "
            f"| {c['ratio_p50']:.2f}× |"
        )
    return "\n".join(rows)


# -- docs/getting-started.md ----------------------------------------------------------------------


def modes() -> str:
    """What each mode costs to open and close, from the start-up run."""
    r = recorded("startup.json")
    m, ri, j, ip = r["memray"], r["ray_init"], r["join"], r["inprocess"]
    actors = r["params"]["hosts"] + r["params"]["shards"] + 1
    return "\n".join(
        [
            '| | `mode="inprocess"` | `mode="ray"` (the default) |',
            "| --- | --- | --- |",
            "| what runs | every core in your process, on a background event loop | the store, the shards and the "
            f"hosts as Ray actors (one process each: {actors} with the {r['params']['hosts']} hosts and "
            f"{r['params']['shards']} shards timed below; by default a host per CPU, up to 4) |",
            f"| `open()` in a fresh process | {ip['open_s']:.2f} s | {m['open_s']:.1f} s, of which `ray.init` alone "
            f"takes {ri['open_s']:.1f} s; then each actor process starts Python and imports memray |",
            f"| `close()` | {ip['close_s']:.2f} s | {m['close_s']:.2f} s, of which `ray.shutdown()` alone is "
            f"{ri['close_s']:.2f} s |",
            "| opening a memray another process runs | refused: the error says to open it in ray mode | joins it: "
            f"{j['open_s']:.2f} s, plus {j['import_ray_s']:.2f} s to import Ray once per process; its `close()` "
            f"(flush, disconnect) {j['close_s']:.2f} s |",
            "| sharing | one process | every process on the machine (and on a cluster) that opens the same path |",
            "| throughput | one process's cores; the GIL "
            "| one process per host and shard: scales with cores and nodes |",
            "",
            f"(Medians of {r['params']['repeat']} rounds on a 2-core machine, each open and close in a fresh process; "
            f"`import memray` took {m['import_s']:.2f} s once per script.)",
        ]
    )


# -- docs/cluster.md ------------------------------------------------------------------------------


def stores() -> str:
    """One partition against two, from the pair of ingest runs."""
    runs = [recorded("ingest_stores1.json"), recorded("ingest_stores2.json")]

    def cells(fn: Any) -> str:
        return " | ".join(fn(r) for r in runs)

    def parts(r: Run, key: str, fmt: str = ",") -> str:
        return " and ".join(format(p[key], fmt) for p in r["store"]["partitions"])

    return "\n".join(
        [
            "| | " + cells(lambda r: f"`stores={r['params']['stores']}`") + " |",
            "| --- | --- | --- |",
            "| rows / commits per partition | " + cells(lambda r: f"{parts(r, 'rows')} / {parts(r, 'commits')}") + " |",
            "| per partition, rows per CPU second | " + cells(lambda r: parts(r, "rows_per_cpu_s")) + " |",
            "| per partition, rows per busy (wall) second | " + cells(lambda r: parts(r, "rows_per_busy_s")) + " |",
            "| store-side CPU per row, busiest partition (critical path) | "
            + cells(lambda r: f"{r['store']['cpu_us_per_row']:.2f} µs")
            + " |",
            "| same, wall | " + cells(lambda r: f"{r['store']['busy_us_per_row']:.1f} µs") + " |",
            "| store-side CPU per row, all partitions | "
            + cells(lambda r: f"{r['store']['total_cpu_us_per_row']:.2f} µs")
            + " |",
            "| `add_many` messages/s acknowledged | " + cells(lambda r: f"{r['add_many']['msgs_per_s']:,}") + " |",
            "| `HistoryStore.append_messages` floor, same run | "
            + cells(lambda r: f"{r['floor']['duckdb']['history_store_rows_per_s']:,} rows/s")
            + " |",
        ]
    )


# -- docs/reliability.md --------------------------------------------------------------------------

_RESTART_VARIANTS = {
    "ray_default": "Ray's defaults",
    "held": "the hold alone",
    "no_death_wait": "the death-info setting alone",
    "memray": "both (what memray does)",
}


#: The recorded runs of ``benchmarks/snapshot_micro.py``, by history.
SNAPSHOT_RUNS = ("snapshot_micro.json", "snapshot_micro_24.json")


def snapshots() -> str:
    """A full shard snapshot and a delta of one tick, as the history grows."""
    rows = [
        "| items held | full snapshot (floor) | delta of one tick: 2 messages a conversation (floor) |",
        "| --- | --- | --- |",
    ]
    for name in SNAPSHOT_RUNS:
        r = recorded(name)
        rows.append(
            f"| {r['items']:,} | {_ms(r['snapshot_ms'])} ({_ms(r['floor_ms'])}) "
            f"| {_ms(r['delta_snapshot_ms'])} ({_ms(r['delta_floor_ms'])}) |"
        )
    return "\n".join(rows)


def lexical() -> str:
    """The lexical part of a conversation search in each form, over the second half of the ticks."""
    r = recorded("lexical_micro.json")
    forms = [
        ("numpy arrays per term (appended to and reweighted every tick)", "arrays_us"),
        ("cached entries up to 40 entries a query term (320 when changed), arrays above (memray)", "fused_us"),
        ("cached entries at any size", "fused_always_us"),
        ("for scale: a raw BM25 top 7 over the same texts (its adds not timed)", "raw_topk_us"),
    ]
    rows = ["| form | µs a conversation a tick (two adds, a search), median |", "| --- | --- |"]
    rows += [f"| {label} | {r[key]:.1f} |" for label, key in forms]
    return "\n".join(rows)


def restart() -> str:
    """How late a retried call reaches a restarted actor, by variant."""
    r = recorded("restart_micro.json")
    rows = [
        "| variant | after Ray has the actor alive: median (max) | calls failed per restart, median |",
        "| --- | --- | --- |",
    ]
    for key in r["params"]["variants"]:
        v = r[key]
        rows.append(
            f"| {_RESTART_VARIANTS.get(key, key)} | {_ms(v['late_s']['median'] * 1000)} "
            f"({_ms(v['late_s']['max'] * 1000)}) | {v['failed_calls']['median']:g} |"
        )
    return "\n".join(rows)
