"""The fixed costs of an in-process read, part by part, against the raw floor of the same search:
the micro-benchmark behind the choices for in-process ``search()`` and ``context()``.

    python -m benchmarks.read_path_micro --conversations 100 --messages 100 --queries 300

An in-process memray holds ``--conversations`` conversations of ``--messages`` messages. Timed,
each ``--queries`` times (p50/p95/p99 ms):

- ``search`` / ``context``: ``conv.search(q)`` / ``conv.context(q)`` through the sync facade;
- ``loop_search``: ``Recall.search`` awaited on the loop (the facade's hop excluded);
- ``hop``: the sync facade's hop onto the loop thread and back with a no-op coroutine;
- ``embed_query``: the query's hash embedding past the embedding cache (a miss);
- ``shard_search``: the router's search of the conversation with a prepared query;
- ``hydrate``: turning a search's hits into ``Hit`` objects;
- ``context_extras``: the store's answer for one conversation (cached) and, as ``_uncached``,
  the two DuckDB statements it answered with before;
- ``asearch`` / ``asearch_many_of_one`` and ``acontext`` / ``acontext_many_of_one``: from one
  caller's event loop, one at a time, alternately, the single async call (which goes through
  the caller-side coalescer, :mod:`memray.facade.coalesce`) and the explicit batch of that one
  call: ``coalescing_added_ms`` is the difference of their p50s, what coalescing costs at one
  client;
- ``raw``: numpy exact top-k + BM25 over the conversation's very vectors and texts
  (:mod:`benchmarks._raw`; the query vector precomputed, as in ``recall_latency``).

Prints one JSON line; ``ratio_*_to_raw`` divide p50s by the raw floor's.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from typing import Any

from benchmarks._harness import emit, log, pct_ms, ratio, scratch, sentence, time_calls
from benchmarks._raw import RawBm25, RawExact, time_floor

APP = "bench"


def run(args: argparse.Namespace) -> dict[str, Any]:
    import memray
    from memray.conversation.reads import SearchRead
    from memray.conversation.recall import _Found
    from memray.ids import conversation_namespace
    from memray.store import conversations as conv_sql

    rng = random.Random(args.seed)
    mem = memray.open(scratch("memray-read-micro-"), mode="inprocess")
    try:
        convs = [mem.conversation(f"u{c % 20}", f"c{c}", app=APP) for c in range(args.conversations)]
        texts = [[sentence(rng, 12) for _ in range(args.messages)] for _ in convs]
        mem.add_many([(c.key, [{"role": "user", "content": t} for t in ts]) for c, ts in zip(convs, texts)])
        mem.flush()
        mem.wait_indexed()
        qs = [(i % len(convs), " ".join(rng.choice(texts[i % len(convs)]).split()[:3])) for i in range(args.queries)]
        recall, session = mem.internals.recall, mem.internals.session
        embedder = session.embedder
        uncached = getattr(embedder, "embedder", embedder)
        store = session.deployment._stores[0]  # type: ignore[attr-defined]
        log("timing")

        async def noop() -> None:
            return None

        def on_loop(make: Any) -> list[float]:
            async def go() -> list[float]:
                out = []
                for i in range(len(qs)):
                    coro = make(i)
                    t0 = asyncio.get_running_loop().time()
                    await coro
                    out.append(asyncio.get_running_loop().time() - t0)
                return out

            return mem.internals.run(go())

        async def shard_search(i: int) -> None:
            c, q = qs[i]
            encoded = await recall.encoder.encode(q, "hybrid")
            await recall._router.search([conversation_namespace(convs[c].key)], encoded.query(q, 10, None))

        hits = [mem.internals.run(_shard_hits(recall, convs[c].key, q)) for c, q in qs]
        one = [(convs[c].key, "conversation") for c, _ in qs]
        parts: dict[str, Any] = {
            "search": pct_ms(time_floor(len(qs), lambda i: convs[qs[i][0]].search(qs[i][1]))),
            "context": pct_ms(time_floor(len(qs), lambda i: convs[qs[i][0]].context(qs[i][1]))),
            "loop_search": pct_ms(on_loop(lambda i: recall.search(SearchRead(convs[qs[i][0]].key, qs[i][1], 5)))),
            "hop": pct_ms(time_floor(len(qs), lambda i: mem.internals.run(noop()))),
            "embed_query": pct_ms(time_calls(len(qs), lambda i: uncached.embed([qs[i][1]]))),
            "shard_search": pct_ms(on_loop(shard_search)),
            "hydrate": pct_ms(on_loop(lambda i: recall._hydrate_many([_Found(hits[i], {}, False, None)]))),
            "context_extras": pct_ms(time_floor(len(qs), lambda i: store.context_extras([one[i]]))),
            "context_extras_uncached": pct_ms(
                time_floor(len(qs), lambda i: conv_sql.context_extras(store._db, [one[i]]))
            ),
        }
        parts.update(_coalescing(mem, convs, qs))
        vectors = [uncached.embed(ts) for ts in texts]
        raws = [(RawExact(v), RawBm25(ts)) for v, ts in zip(vectors, texts)]
        qv = uncached.embed([q for _, q in qs])

        def raw(i: int) -> None:
            exact, bm25 = raws[qs[i][0]]
            exact.topk(qv[i], 10)
            bm25.topk(qs[i][1], 10)

        parts["raw"] = pct_ms(time_floor(len(qs), raw))
    finally:
        mem.close()
    floor = parts["raw"]["p50_ms"]
    return {
        **parts,
        "coalescing_added_ms": {
            kind: round(parts[kind]["p50_ms"] - parts[f"{kind}_many_of_one"]["p50_ms"], 4)
            for kind in ("asearch", "acontext")
        },
        "ratio_search_to_raw": ratio(parts["search"]["p50_ms"], floor),
        "ratio_context_to_raw": ratio(parts["context"]["p50_ms"], floor),
    }


def _coalescing(mem: Any, convs: list[Any], qs: list[tuple[int, str]]) -> dict[str, Any]:
    """One caller loop, one call at a time: each single async call against the explicit batch
    of that one call, alternately (see the module docstring)."""
    import memray

    async def go() -> dict[str, list[float]]:
        loop = asyncio.get_running_loop()
        out: dict[str, list[float]] = {}
        calls = {
            "asearch": lambda c, q: convs[c].asearch(q),
            "asearch_many_of_one": lambda c, q: mem.asearch_many([memray.SearchCall(convs[c], q)]),
            "acontext": lambda c, q: convs[c].acontext(q),
            "acontext_many_of_one": lambda c, q: mem.acontext_many([memray.ContextCall(convs[c], q)]),
        }
        for c, q in qs[:10]:  # warm-up
            for call in calls.values():
                await call(c, q)
        for c, q in qs:
            for name, call in calls.items():
                t0 = loop.time()
                await call(c, q)
                out.setdefault(name, []).append(loop.time() - t0)
        return out

    return {name: pct_ms(lat) for name, lat in asyncio.run(go()).items()}


async def _shard_hits(recall: Any, key: Any, q: str) -> Any:
    from memray.ids import conversation_namespace

    encoded = await recall.encoder.encode(q, "hybrid")
    result = await recall._router.search([conversation_namespace(key)], encoded.query(q, 5, None))
    return result.hits


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--messages", type=int, default=100, help="messages per conversation")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    return emit("read_path_micro", vars(args), run(args))


if __name__ == "__main__":
    main()
