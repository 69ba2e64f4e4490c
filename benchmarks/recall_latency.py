"""Recall latency: p50/p95/p99 of ``search`` (conversation, user and app scope) and ``context``,
against floors measured in the same run, plus recall@10 of the search path against exact search.

    python -m benchmarks.recall_latency --n 10000,100000 --shards 1,2,4 --clients 1,16,64 \
        --plot benchmarks/results/recall_latency.png

For each N (stored messages = vectors) and shard count, a fresh memray is filled with ``add_many``
(large batches) and ``wait_indexed``; then, for each client concurrency (asyncio clients through
the ``a``-twins), every operation runs ``--queries`` times with the default retrieval mode:

- ``search_conversation`` (``conv.asearch``), ``search_user`` (``scope="user"``),
  ``search_app`` (``mem.asearch_app``: fans out to every shard), ``context`` (``conv.acontext``).

Floors, same run, same data:

- ``ray_ping``: a no-op round trip to a shard actor (``VectorShard.ping``) at the same
  concurrency, awaited straight from the client loop (``--mode inprocess``: a ``LocalRef`` call).
- ``inprocess``: the same index queried in this process: the shards' snapshots loaded into
  ``VectorShard`` objects and called directly (query embedding included, as the search path
  embeds its query too); app scope = every shard one after the other, then the merge.
- ``floor_sum`` = ray_ping p50 + in-process p50: the least a remote search can cost. The issue-7
  target (scoped search p50 ≤ 1.5×, p99 ≤ 2× its floor) is checked against it.
- ``raw`` (:mod:`benchmarks._raw`): no memray code at all, over the very vectors (the
  same embedder run here on the same texts) and texts stored: numpy exact top-k plus BM25 top-k
  over the conversation (``search_conversation``), the user's conversations (``search_user``),
  every message (``search_app``; ``search_app_numpy`` is the vector part alone, the issue's
  app-wide floor). ``embed_query`` (the embedder on one query, past its cache) is reported beside it, not
  in it. ``ratio_*_to_raw`` divide by raw (in-process) or by ray_ping + raw (ray mode).

recall@10: ``mode="vector"`` searches through the facade (conversation and app scope) against an
``ExactIndex`` over the same vectors (the embedder run here on the same texts).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from typing import Any

import numpy as np

import memray
from benchmarks._harness import (
    common_args,
    emit,
    in_data_dir,
    log,
    pct_ms,
    plot_bars,
    ratio,
    run_clients,
    sentence,
    time_calls,
)
from benchmarks._raw import raw_search_floors
from memray.embedding.factory import build_embedder
from memray.ids import ConversationKey, conversation_namespace, user_hash
from memray.index.exact import ExactIndex
from memray.index.scorer import top_hits
from memray.index.search import Mode, Query
from memray.index.shard import VectorShard
from memray.runtime.deploy import shard_path

APP = "bench"
OPS = ["search_conversation", "search_user", "search_app", "context"]


class Corpus:
    """``n`` messages over ``conversations`` conversations of ``users`` users."""

    def __init__(self, n: int, users: int, conversations: int, seed: int) -> None:
        rng = random.Random(seed)
        self.keys = [ConversationKey.of(APP, f"user-{c % users}", f"conv-{c}") for c in range(conversations)]
        self.texts = [sentence(rng, 12) for _ in range(n)]
        self.conv_of = [i % conversations for i in range(n)]
        self.rng = rng

    def batches(self, size: int) -> list[list[tuple[ConversationKey, list[dict[str, Any]]]]]:
        out = []
        for start in range(0, len(self.texts), size):
            group: dict[int, list[dict[str, Any]]] = {}
            for i in range(start, min(len(self.texts), start + size)):
                group.setdefault(self.conv_of[i], []).append({"id": f"m{i}", "role": "user", "content": self.texts[i]})
            out.append([(self.keys[c], msgs) for c, msgs in group.items()])
        return out

    def queries(self, count: int) -> list[tuple[int, str]]:
        """(conversation, query text): a stored message with a third of its words dropped."""
        out = []
        for _ in range(count):
            i = self.rng.randrange(len(self.texts))
            words = self.texts[i].split()
            keep = [w for w in words if self.rng.random() > 0.33] or words[:3]
            out.append((self.conv_of[i], " ".join(keep)))
        return out


async def fill(mem: memray.Memory, corpus: Corpus, batch: int) -> float:
    from memray.progress import bar

    t0 = time.perf_counter()
    with bar(len(corpus.texts), "filling", unit="msg") as shown:
        for b in corpus.batches(batch):
            await mem.aadd_many(b)
            shown.update(sum(len(msgs) for _, msgs in b))
    ok = await asyncio.to_thread(mem.wait_indexed, 3600.0)
    if not ok:
        raise RuntimeError("wait_indexed timed out")
    return time.perf_counter() - t0


def local_shards(mem: memray.Memory, cfg: memray.MemoryConfig, dim: int, model_id: str) -> list[VectorShard]:
    """The deployment's shards, snapshotted, loaded here: the same index, queried in-process."""
    mem.internals.run(mem.internals.router.snapshot())
    out = []
    for i in range(cfg.shards):
        shard = VectorShard(i, shard_path(cfg, i), dim, model_id, cfg.index)
        shard.open()
        out.append(shard)
    return out


def inprocess_floor(
    shards: list[VectorShard],
    embedder: Any,
    corpus: Corpus,
    qs: list[tuple[int, str]],
    k: int,
    mode: Mode,
    calibration: tuple[float, float],
) -> dict[str, Any]:
    model_id = embedder.model_id

    def shard_of(key: ConversationKey) -> VectorShard:
        return shards[user_hash(key.app, key.user_id) % len(shards)]

    def conv(i: int) -> None:
        key = corpus.keys[qs[i][0]]
        vec = embedder.embed([qs[i][1]])[0] if mode != "lexical" else None
        shard_of(key).search([conversation_namespace(key)], Query(qs[i][1], vec, k, mode, None, model_id, *calibration))

    def user(i: int) -> None:
        key = corpus.keys[qs[i][0]]
        vec = embedder.embed([qs[i][1]])[0] if mode != "lexical" else None
        shard_of(key).search_user(
            key.app, key.user_id, "conv", Query(qs[i][1], vec, k, mode, None, model_id, *calibration)
        )

    def app(i: int) -> None:
        vec = embedder.embed([qs[i][1]])[0] if mode != "lexical" else None
        hits = [
            h
            for s in shards
            for h in s.search_app(APP, "conv", Query(qs[i][1], vec, k, mode, None, model_id, *calibration)).hits
        ]
        top_hits(hits, k)

    return {
        "search_conversation": pct_ms(time_calls(len(qs), conv)),
        "search_user": pct_ms(time_calls(len(qs), user)),
        "search_app": pct_ms(time_calls(len(qs), app)),
    }


def recall_at_k(
    mem: memray.Memory, corpus: Corpus, embedder: Any, vectors: np.ndarray, count: int, k: int
) -> dict[str, float]:
    """recall@k of vector-mode search through the facade vs exact search over the same vectors."""
    qs = corpus.queries(count)
    qv = embedder.embed([q for _, q in qs])
    conv_ix: dict[int, ExactIndex] = {}
    members: dict[int, np.ndarray] = {}
    conv_of = np.array(corpus.conv_of)
    everything = ExactIndex(embedder.dim, capacity=len(corpus.texts))
    everything.add(np.arange(len(corpus.texts)), vectors)
    conv_r, app_r = [], []
    for (c, q), v in zip(qs, qv):
        if c not in conv_ix:
            members[c] = np.nonzero(conv_of == c)[0]
            conv_ix[c] = ExactIndex(embedder.dim, capacity=len(members[c]))
            conv_ix[c].add(members[c], vectors[members[c]])
        truth = {f"m{i}" for i in conv_ix[c].search(v, k)[0][0].tolist()}
        key = corpus.keys[c]
        got = {
            h.message.id
            for h in mem.conversation(key.user_id, key.conversation_id, key.app).search(
                q, limit=k, mode="vector", min_score=0.0
            )
        }
        conv_r.append(len(truth & got) / max(1, len(truth)))
        truth = {f"m{i}" for i in everything.search(v, k)[0][0].tolist()}
        got = {h.message.id for h in mem.search_app(APP, q, limit=k, mode="vector", min_score=0.0)}
        app_r.append(len(truth & got) / max(1, len(truth)))
    return {"conversation": round(float(np.mean(conv_r)), 4), "app": round(float(np.mean(app_r)), 4)}


async def measure_clients(mem: memray.Memory, corpus: Corpus, clients: int, queries: int, k: int) -> dict[str, Any]:
    qs = corpus.queries(max(queries, 4 * clients))
    handles = [mem.conversation(key.user_id, key.conversation_id, key.app) for key in corpus.keys]
    shards = mem.internals.deployment.shards
    router = mem.internals.router

    def ping(i: int) -> Any:
        key = corpus.keys[qs[i][0]]
        return shards[router.shard_of(key.app, key.user_id)].ping()

    calls = {
        "ray_ping": ping,
        "search_conversation": lambda i: handles[qs[i][0]].asearch(qs[i][1], limit=k),
        "search_user": lambda i: handles[qs[i][0]].asearch(qs[i][1], limit=k, scope="user"),
        "search_app": lambda i: mem.asearch_app(APP, qs[i][1], limit=k),
        "context": lambda i: handles[qs[i][0]].acontext(qs[i][1], limit=10, semantic_limit=5),
    }
    out: dict[str, Any] = {}
    for name, fn in calls.items():
        await run_clients(clients, min(len(qs), 2 * clients), fn)  # warm
        lat, wall = await run_clients(clients, len(qs), fn)
        out[name] = {**pct_ms(lat), "per_s": round(len(qs) / wall, 1)}
    return out


def one_config(args: argparse.Namespace, root: str, n: int, shards: int) -> dict[str, Any]:
    # neighbour support off: recall@k is measured against exact nearest neighbours
    cfg = memray.MemoryConfig(
        path=os.path.join(root, f"n{n}-s{shards}"),
        mode=args.mode,
        hosts=args.hosts,
        shards=shards,
        address=args.address,
        index=memray.IndexConfig(neighbour_weight=0.0),
    )
    embedder = build_embedder(cfg.embedder)
    assert embedder is not None
    corpus = Corpus(n, args.users, args.conversations, args.seed)
    mem = memray.open(config=cfg)
    try:
        log(f"n={n} shards={shards}: filling")
        fill_s = asyncio.run(fill(mem, corpus, args.batch))
        log(f"filled in {fill_s:.1f}s; in-process floor")
        local = local_shards(mem, cfg, embedder.dim, embedder.model_id)
        floor_qs = corpus.queries(args.queries)
        floor = inprocess_floor(
            local, embedder, corpus, floor_qs, args.k, cfg.index.mode, mem.internals.encoder.calibration
        )
        del local
        log("raw floors")
        vectors = embedder.embed(corpus.texts)
        raw = raw_search_floors(
            vectors, corpus.texts, corpus.conv_of, [key.user_id for key in corpus.keys], embedder, floor_qs, args.k
        )
        per_clients = {}
        for c in args.clients:
            log(f"n={n} shards={shards}: {c} clients")
            per_clients[str(c)] = asyncio.run(measure_clients(mem, corpus, c, args.queries, args.k))
        rec = recall_at_k(mem, corpus, embedder, vectors, args.recall_queries, args.k)
    finally:
        mem.close(terminate=True)
    remote = args.mode == "ray"
    for ops in per_clients.values():
        ping = ops["ray_ping"]
        for op in OPS:
            fl = floor["search_conversation"] if op == "context" else floor[op]
            rw = raw["search_conversation"] if op == "context" else raw[op]
            base50 = rw["p50_ms"] + (ping["p50_ms"] if remote else 0.0)
            base99 = rw["p99_ms"] + (ping["p99_ms"] if remote else 0.0)
            ops[op]["ratio_p50_to_raw"] = ratio(ops[op]["p50_ms"], base50)
            ops[op]["ratio_p99_to_raw"] = ratio(ops[op]["p99_ms"], base99)
            if op == "search_app":
                ops[op]["ratio_p50_to_raw_numpy"] = ratio(ops[op]["p50_ms"], raw["search_app_numpy"]["p50_ms"])
            p50_floor = ping["p50_ms"] + fl["p50_ms"]
            p99_floor = ping["p99_ms"] + fl["p99_ms"]
            ops[op]["ratio_p50_to_ray_ping"] = ratio(ops[op]["p50_ms"], ping["p50_ms"])
            ops[op]["ratio_p50_to_inprocess"] = ratio(ops[op]["p50_ms"], fl["p50_ms"])
            ops[op]["ratio_p50_to_floor_sum"] = ratio(ops[op]["p50_ms"], p50_floor)
            ops[op]["ratio_p99_to_floor_sum"] = ratio(ops[op]["p99_ms"], p99_floor)
    return {
        "n": n,
        "shards": shards,
        "fill_s": round(fill_s, 2),
        "fill_msgs_per_s": round(n / fill_s),
        "inprocess_floor": floor,
        "raw_floor": raw,
        "clients": per_clients,
        "recall_at_10": rec,
    }


def targets(rows: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """Scoped search p50 ≤ 1.5× and p99 ≤ 2× floor_sum (at every measured point).
    Against the raw floors: conversation search p50 ≤ 3× raw in-process; in Ray mode
    ≤ 1.5× (ray_ping + raw) at 1 client with p99 ≤ 2×, and p50 ≤ 2× at 16 clients; app-wide
    search p50 ≤ 2× raw numpy over the same vectors (at 100k vectors on 2 shards)."""
    worst50 = worst99 = 0.0
    for r in rows:
        for ops in r["clients"].values():
            for op in ("search_conversation", "search_user"):
                worst50 = max(worst50, ops[op]["ratio_p50_to_floor_sum"] or 0.0)
                worst99 = max(worst99, ops[op]["ratio_p99_to_floor_sum"] or 0.0)
    out: dict[str, Any] = {
        "scoped_p50_ratio_worst": worst50,
        "scoped_p99_ratio_worst": worst99,
        "p50_ok": worst50 <= 1.5,
        "p99_ok": worst99 <= 2.0,
    }
    raw: dict[str, Any] = {}
    for r in rows:
        at = f"n={r['n']},shards={r['shards']}"
        for c, ops in r["clients"].items():
            conv, app = ops["search_conversation"], ops["search_app"]
            if mode == "inprocess" and c == "1":
                raw[f"{at},conv_p50_le_3x"] = [conv["ratio_p50_to_raw"], (conv["ratio_p50_to_raw"] or 0) <= 3.0]
            if mode == "ray" and c == "1":
                raw[f"{at},conv_p50_le_1.5x"] = [conv["ratio_p50_to_raw"], (conv["ratio_p50_to_raw"] or 0) <= 1.5]
                raw[f"{at},conv_p99_le_2x"] = [conv["ratio_p99_to_raw"], (conv["ratio_p99_to_raw"] or 0) <= 2.0]
            if mode == "ray" and c == "16":
                raw[f"{at},c16,conv_p50_le_2x"] = [conv["ratio_p50_to_raw"], (conv["ratio_p50_to_raw"] or 0) <= 2.0]
            if c == "1":
                raw[f"{at},app_p50_le_2x_numpy"] = [
                    app["ratio_p50_to_raw_numpy"],
                    (app["ratio_p50_to_raw_numpy"] or 0) <= 2.0,
                ]
    out["issue11_raw"] = raw
    return out


def plot(path: str, rows: list[dict[str, Any]]) -> None:
    labels, series = [], {op: [] for op in ["ray_ping", *OPS]}  # type: dict[str, list[float]]
    series["inprocess (conversation)"] = []
    for r in rows:
        for c, ops in r["clients"].items():
            labels.append(f"N={r['n']:,} s={r['shards']} c={c}")
            for op in ["ray_ping", *OPS]:
                series[op].append(ops[op]["p50_ms"])
            series["inprocess (conversation)"].append(r["inprocess_floor"]["search_conversation"]["p50_ms"])
    plot_bars(path, "recall latency p50 (ms) vs floors", labels, series, "p50 ms", log_y=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="10000,100000", help="stored messages (vectors), comma-separated")
    ap.add_argument("--shards", default="1,2,4")
    ap.add_argument("--clients", default="1,16,64")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--conversations", type=int, default=100)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument(
        "--queries", type=int, default=200, help="calls per operation and concurrency (at least 4x clients)"
    )
    ap.add_argument("--recall-queries", type=int, default=50)
    ap.add_argument("--batch", type=int, default=20_000, help="messages per add_many call while filling")
    ap.add_argument("--k", type=int, default=10)
    common_args(ap)
    args = ap.parse_args(argv)
    args.n = [int(x) for x in str(args.n).split(",")]
    args.shards = [int(x) for x in str(args.shards).split(",")]
    args.clients = [int(x) for x in str(args.clients).split(",")]
    rows = in_data_dir(
        args, "memray-recall-", lambda root: [one_config(args, root, n, s) for n in args.n for s in args.shards]
    )
    if args.plot:
        plot(args.plot, rows)
    params = {k: v for k, v in vars(args).items() if k not in ("plot", "dir")}
    return emit(
        "recall_latency",
        params,
        {
            "floor": "ray_ping (no-op shard round trip, same concurrency) + inprocess (same index, direct call); "
            "raw: numpy exact + BM25 over the same vectors and texts (benchmarks._raw)",
            "results": rows,
            "targets": targets(rows, args.mode),
        },
    )


if __name__ == "__main__":
    main()
