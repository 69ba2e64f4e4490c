"""Memory-stream scoring: search p50/p95/p99 with ``Scoring.stream`` against relevance-only
search, through the facade and inside the shard, with a raw numpy floor over the same vectors.

    python -m benchmarks.stream_scoring --n 20000 --conversations 10 --queries 300 \
        --plot benchmarks/results/stream_scoring.png

A fresh memray holds ``--n`` messages over ``--conversations`` conversations (one agent each:
a memory stream of ``n / conversations`` observations, one per simulated minute, importance in
[0, 1]). Each query is a stored message with a third of its words dropped, asked of its own
conversation with the default (hybrid) retrieval, ``limit=10``, in turn by relevance and by
stream scoring (``now`` = the stream's last minute, all weights 1, decay 0.995 per hour):

- ``facade``: ``conv.search`` from one client (a Ray round trip to the shard in Ray mode);
- ``shard``: the shard's snapshot loaded here and ``VectorShard.search`` called directly (the
  query embedded once beforehand): what scoring costs where it runs;
- ``numpy`` (the floor): one ``float32`` matrix of the conversation's vectors, ``M @ q``, the
  relevance clip, the stream formula over arrays of the same columns, ``argpartition`` top 10.
  It is what brute force costs with no lexical part, no filters and no payloads.
- ``raw_hybrid`` (:mod:`benchmarks._raw`): numpy exact top-k plus BM25 top-k over the
  same conversation's vectors and texts: the raw floor of the default (hybrid, relevance) search;
  ``shard_relevance_p50_to_raw_hybrid_p50`` and ``facade_relevance_p50_to_raw_hybrid_p50`` divide by it.

``ratio_p50`` is stream p50 over relevance p50 in each layer; the two are timed back to back
for the same query (alternating which goes first), so a shared machine's load hits both alike.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import memray
from benchmarks._harness import common_args, emit, in_data_dir, log, pct_ms, plot_bars, ratio, sentence
from benchmarks._raw import RawBm25, RawExact, time_floor
from memray import Scoring
from memray.embedding.factory import build_embedder
from memray.ids import conversation_namespace, user_hash
from memray.index.scorer import stream_scores
from memray.index.shard import VectorShard
from memray.ranking import Stream
from memray.runtime.deploy import shard_path

APP = "bench"
MINUTE = 60.0


def fill(mem: memray.Memory, n: int, conversations: int, batch: int, rng: random.Random) -> list[list[str]]:
    texts: list[list[str]] = [[] for _ in range(conversations)]
    pending: list[tuple[memray.ConversationHandle, list[dict[str, Any]]]] = []
    handles = [mem.conversation(user_id=f"agent-{c}", conversation_id="stream", app=APP) for c in range(conversations)]
    for i in range(n):
        c = i % conversations
        t = len(texts[c])
        text = sentence(rng, 12)
        texts[c].append(text)
        pending.append(
            (
                handles[c],
                [
                    {
                        "id": f"m{i}",
                        "role": "user",
                        "content": text,
                        "sim_time": t * MINUTE,
                        "importance": round(rng.random(), 2),
                    }
                ],
            )
        )
        if len(pending) >= batch:
            mem.add_many(pending)
            pending = []
    if pending:
        mem.add_many(pending)
    assert mem.wait_indexed(600), "indexing did not finish"
    return texts


def paired(n: int, call: Callable[[int, bool], Any]) -> tuple[list[float], list[float]]:
    """Latencies of ``call(i, stream)`` for i < n, relevance and stream timed back to back for the
    same query (in alternating order), so both see the same machine load; a warm-up pass first."""
    for i in range(min(20, n)):
        call(i, False)
        call(i, True)
    rel: list[float] = []
    stream: list[float] = []
    for i in range(n):
        for kind in (False, True) if i % 2 else (True, False):
            t = time.perf_counter()
            call(i, kind)
            (stream if kind else rel).append(time.perf_counter() - t)
    return rel, stream


def numpy_floor(
    vectors: np.ndarray, columns: np.ndarray, qvec: np.ndarray, stream: Stream | None, k: int
) -> np.ndarray:
    sims = vectors @ qvec
    rel = np.clip(sims, 0.0, 1.0)
    scores = rel if stream is None else stream_scores(rel.astype(np.float64), columns, stream)
    top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
    return top[np.argsort(-scores[top])]


def run(args: argparse.Namespace, root: str) -> dict[str, Any]:
    rng = random.Random(args.seed)
    cfg = memray.MemoryConfig(
        path=root, mode=args.mode, address=args.address, hosts=args.hosts, shards=args.shards, debounce_ms=20
    )
    mem = memray.open(config=cfg)
    try:
        t0 = time.perf_counter()
        texts = fill(mem, args.n, args.conversations, args.batch, rng)
        log(f"filled {args.n} messages in {time.perf_counter() - t0:.1f} s")
        per = [len(t) for t in texts]
        queries = []
        for _ in range(args.queries):
            c = rng.randrange(args.conversations)
            words = texts[c][rng.randrange(per[c])].split()
            queries.append((c, " ".join(w for j, w in enumerate(words) if j % 3)))
        handles = [
            mem.conversation(user_id=f"agent-{c}", conversation_id="stream", app=APP) for c in range(args.conversations)
        ]
        nows = [(p - 1) * MINUTE for p in per]
        scorings = [Scoring.stream(now=now) for now in nows]

        def facade(i: int, stream: bool) -> Any:
            c, text = queries[i]
            return handles[c].search(text, limit=args.k, scoring=scorings[c] if stream else None)

        facade_rel, facade_stream = paired(len(queries), facade)
        log("facade measured; loading the shards here")

        mem.internals.run(mem.internals.router.snapshot())
        embedder = build_embedder(cfg.embedder)
        assert embedder is not None
        shards = [
            VectorShard(i, shard_path(cfg, i), embedder.dim, embedder.model_id, cfg.index) for i in range(cfg.shards)
        ]
        for s in shards:
            s.open()
        encoded = [mem.internals.run(mem.internals.encoder.encode(q, cfg.index.mode)) for _, q in queries]
        namespaces = [conversation_namespace(h.key) for h in handles]
        shard_of = [shards[user_hash(APP, h.key.user_id) % len(shards)] for h in handles]

        def in_shard(i: int, stream: bool) -> Any:
            c, text = queries[i]
            q = encoded[i].query(text, args.k, None, (), scorings[c].to_stream() if stream else None)
            return shard_of[c].search([namespaces[c]], q)

        shard_rel, shard_stream = paired(len(queries), in_shard)

        mats, cols, docs = [], [], []
        for c, ns in enumerate(namespaces):
            space = shard_of[c]._spaces[ns]
            labels, vecs = space.vectors.items()
            mats.append(np.ascontiguousarray(vecs))
            cols.append(space.columns.rows(labels))
            docs.append([space.docs[int(label)] for label in labels])

        def floor(i: int, stream: bool) -> Any:
            c = queries[i][0]
            return numpy_floor(
                mats[c],
                cols[c],
                np.asarray(encoded[i].vector, dtype=np.float32),
                scorings[c].to_stream() if stream else None,
                args.k,
            )

        np_rel, np_stream = paired(len(queries), floor)
        raw = [
            (RawExact(mats[c]), RawBm25([texts[c][int(d[1:]) // args.conversations] for d in docs[c]]))
            for c in range(len(mats))
        ]

        def raw_hybrid(i: int) -> None:
            c, text = queries[i]
            raw[c][0].topk(np.asarray(encoded[i].vector, dtype=np.float32), args.k)
            raw[c][1].topk(text, args.k)

        raw_rel = time_floor(len(queries), raw_hybrid)
    finally:
        mem.close()

    def layer(rel: list[float], stream: list[float]) -> dict[str, Any]:
        a, b = pct_ms(rel), pct_ms(stream)
        return {"relevance": a, "stream": b, "ratio_p50": ratio(b["p50_ms"], a["p50_ms"])}

    out = {
        "facade": layer(facade_rel, facade_stream),
        "shard": layer(shard_rel, shard_stream),
        "numpy_floor": layer(np_rel, np_stream),
        "raw_hybrid": pct_ms(raw_rel),
        "items_per_conversation": per[0],
    }
    for name in ("shard", "facade"):
        out[f"{name}_relevance_p50_to_raw_hybrid_p50"] = ratio(
            out[name]["relevance"]["p50_ms"], out["raw_hybrid"]["p50_ms"]
        )
    out["stream_facade_p50_to_numpy_stream_p50"] = ratio(
        out["facade"]["stream"]["p50_ms"], out["numpy_floor"]["stream"]["p50_ms"]
    )
    out["stream_shard_p50_to_numpy_stream_p50"] = ratio(
        out["shard"]["stream"]["p50_ms"], out["numpy_floor"]["stream"]["p50_ms"]
    )
    return out


def plot(path: str, result: dict[str, Any]) -> None:
    layers = ["facade", "shard", "numpy_floor"]
    series = {kind: [result[layer][kind]["p50_ms"] for layer in layers] for kind in ("relevance", "stream")}
    plot_bars(path, "search p50 (ms): relevance vs memory-stream scoring", layers, series, "p50 ms", log_y=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(ap)
    ap.add_argument("--n", type=int, default=20_000, help="messages in all")
    ap.add_argument("--conversations", type=int, default=10, help="memory streams (one agent each)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2_000, help="messages per add_many")
    args = ap.parse_args(argv)
    result = in_data_dir(args, "memray-bench-stream-", lambda root: run(args, root))
    if args.plot:
        plot(args.plot, result)
    params = {k: v for k, v in vars(args).items() if k not in ("plot", "dir")}
    return emit("stream_scoring", params, result)


if __name__ == "__main__":
    main()
