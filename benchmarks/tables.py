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
        f"{se['warm_sentences_per_s']:,} once its words are known, {se['one_by_one_per_s']:,} one text at a time; "
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
            f"{r['ratios']['memray_open_to_ray_actors']:.2f}× `ray.init` with the no-op actors.",
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
