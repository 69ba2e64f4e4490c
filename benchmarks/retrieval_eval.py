"""Recall@1/5/10 of memray's retrieval modes on a conversational set, per embedder.

    python -m benchmarks.retrieval_eval [--embedders hash] [--plot out.png]
    python -m benchmarks.retrieval_eval --embedders hash,openai --base-url http://host:8000/v1 --model bge-m3 --dim 1024

Loads the set of :mod:`benchmarks.retrieval_data` (``benchmarks/data/conversational_retrieval.jsonl``;
regenerated on the fly if missing; ``--users`` takes the first N users), writes every turn through
the real facade (``memray.open(mode="inprocess")``: one conversation per session, message id =
turn id), waits until everything is indexed, then asks each question with
``conv.search(question, limit=10, mode=..., scope="user")`` (all the user's sessions) in every
mode. A question scores recall@k = share of its evidence turns among the top k. The floor,
computed on the same set, is what an agent gets without retrieval: the user's k most recent
turns. The fake OpenAI server's vectors are hash vectors, so ``openai`` is only meaningful
against a real endpoint (``--base-url``, ``--model``, ``--dim``; key from ``OPENAI_API_KEY``).

Prints one JSON line; ``--plot`` writes a PNG.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from typing import Any

import numpy as np

import memray
from benchmarks.index_crossover import git_sha
from benchmarks.retrieval_data import load
from memray.config import EmbedderConfig
from memray.models import RetrievalMode

MODES: tuple[RetrievalMode, ...] = ("vector", "lexical", "hybrid")
KS = (1, 5, 10)


def split(records: list[dict[str, Any]], users: int | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    turns = [r for r in records if r["type"] == "turn"]
    questions = [r for r in records if r["type"] == "question"]
    if users is not None:
        keep = sorted({t["user"] for t in turns})[:users]
        turns = [t for t in turns if t["user"] in keep]
        questions = [q for q in questions if q["user"] in keep]
    return turns, questions


def recall(ranked: list[str], evidence: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


def summarise(per_question: list[tuple[dict[str, Any], list[str]]], times: list[float] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {f"recall@{k}": round(float(np.mean([recall(r, q["evidence"], k) for q, r in per_question])), 4)
                           for k in KS}
    styles: dict[str, list[float]] = defaultdict(list)
    for q, r in per_question:
        styles[q["style"]].append(recall(r, q["evidence"], 5))
    out["recall@5_by_style"] = {s: round(float(np.mean(v)), 4) for s, v in sorted(styles.items())}
    if times:
        out["p50_ms"] = round(float(np.percentile(times, 50)) * 1e3, 2)
    return out


def floor_recent(turns: list[dict[str, Any]], questions: list[dict[str, Any]]) -> dict[str, Any]:
    """No retrieval: the user's 10 most recent turns, newest first."""
    by_user: dict[str, list[str]] = defaultdict(list)
    for t in turns:  # records are in session, turn order
        by_user[t["user"]].append(t["id"])
    return summarise([(q, by_user[q["user"]][::-1]) for q in questions])


def evaluate(embedder: EmbedderConfig, turns: list[dict[str, Any]], questions: list[dict[str, Any]]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memray-retrieval-eval-") as path:
        config = memray.MemoryConfig(path=path, mode="inprocess", hosts=1, shards=2, debounce_ms=0, embedder=embedder)
        with memray.open(config=config) as mem:
            sessions: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
            for t in turns:
                sessions[(t["user"], t["session"])].append({"id": t["id"], "role": t["role"], "content": t["text"]})
            t0 = time.perf_counter()
            mem.add_many([(mem.conversation(user_id=u, conversation_id=s, app="eval"), msgs)
                          for (u, s), msgs in sessions.items()])
            if not mem.wait_indexed(600):
                raise RuntimeError("indexing did not finish in 600 s")
            ingest_s = time.perf_counter() - t0
            out: dict[str, Any] = {"model_id": mem._embedder.model_id if mem._embedder else None,
                                   "ingest_s": round(ingest_s, 2)}
            for mode in MODES:
                rows, times = [], []
                for q in questions:
                    conv = mem.conversation(user_id=q["user"], conversation_id="s0", app="eval")
                    t0 = time.perf_counter()
                    hits = conv.search(q["question"], limit=max(KS), mode=mode, scope="user")
                    times.append(time.perf_counter() - t0)
                    if hits.degraded:
                        raise RuntimeError(f"search degraded: {hits.reason}")
                    rows.append((q, [h.message.id for h in hits]))
                out[mode] = summarise(rows, times)
            return out


def embedder_config(name: str, args: argparse.Namespace) -> EmbedderConfig:
    if name == "hash":
        return EmbedderConfig(kind="hash", dim=args.hash_dim)
    if name == "openai":
        if not args.base_url or not args.model:
            raise SystemExit("--embedders openai needs --base-url and --model (a real endpoint; the fake "
                             "server's vectors are hash vectors, so its numbers would mean nothing)")
        return EmbedderConfig(kind="openai", base_url=args.base_url, model=args.model, dim=args.dim,
                              send_dimensions=args.send_dimensions)
    raise SystemExit(f"unknown embedder {name!r}: use hash or openai")


def plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [(f"{e}/{m}", result["embedders"][e][m]) for e in result["embedders"] for m in MODES]
    groups.append(("floor: recent", result["floor_recent"]))
    x = np.arange(len(groups))
    fig, ax = plt.subplots(figsize=(8, 4))
    for n, k in enumerate(KS):
        ax.bar(x + (n - 1) * 0.27, [g[1][f"recall@{k}"] for g in groups], 0.27, label=f"recall@{k}")
    ax.set_xticks(x, [g[0] for g in groups], rotation=20)
    ax.set_ylim(0, 1)
    ax.set_title(f"retrieval_eval: {result['questions']} questions, {result['turns']} turns")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="JSONL set (default: the committed one)")
    parser.add_argument("--users", type=int, default=None, help="only the first N users")
    parser.add_argument("--embedders", default="hash", help="comma-separated: hash, openai")
    parser.add_argument("--hash-dim", type=int, default=EmbedderConfig().dim)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--dim", type=int, default=1536)
    parser.add_argument("--send-dimensions", action="store_true")
    parser.add_argument("--plot", default=None, help="write a PNG here")
    args = parser.parse_args(argv)
    turns, questions = split(load(args.data), args.users)
    result: dict[str, Any] = {
        "benchmark": "retrieval_eval", "git_sha": git_sha(), "turns": len(turns), "questions": len(questions),
        "users": len({t["user"] for t in turns}), "scope": "user", "default_mode": memray.IndexConfig().mode,
        "floor_recent": floor_recent(turns, questions),
        "embedders": {name: evaluate(embedder_config(name, args), turns, questions) for name in args.embedders.split(",")},
    }
    print(json.dumps(result))
    if args.plot:
        plot(result, args.plot)
    return result


if __name__ == "__main__":
    main()
