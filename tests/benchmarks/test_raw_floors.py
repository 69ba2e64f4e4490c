"""The raw floors do the same work as memray's indexes (same top k), so a ratio to them means
something; and the search micro-benchmark runs at a tiny size, so it cannot rot."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from benchmarks._harness import sentence
from benchmarks._raw import RawBm25, RawExact, RawHnsw
from benchmarks.search_micro import main
from memray.ids import Namespace
from memray.index.base import IndexItem
from memray.index.exact import ExactIndex
from memray.index.lexical import bm25_idf
from memray.index.scorer import Search, score
from memray.index.search import Query
from memray.index.space import Space
from memray.text import index_terms


def test_raw_floors_rank_like_memrays_indexes() -> None:
    rng = random.Random(1)
    texts = [sentence(rng, 10) for _ in range(300)]
    space = Space(Namespace("app", "user", "mem", "notes"), 0, 4)  # a shard's namespace
    for i, text in enumerate(texts):
        space.upsert([(IndexItem(space.namespace, str(i), None, text, 0.0), None)])
    raw = RawBm25(texts)
    for q in texts[:20]:  # the same scores in the same order (ties may pick other documents)
        query = " ".join(q.split()[:4])
        (found,) = score([Search(Query(query, None, 10, "lexical"), [space])], 0.0)  # as a shard searches
        terms = list(dict.fromkeys(index_terms(query)))
        stats = space.lexical.stats(terms)
        ideal = sum(bm25_idf(stats.docs, stats.df.get(t, 0)) for t in terms)  # memray's L = min(1, bm25 / ideal)
        bm25 = np.zeros(raw.n)
        for t in terms:
            if t in raw.postings:
                np.add.at(bm25, *raw.postings[t])
        floor_top = [min(1.0, bm25[d] / ideal) for d in raw.topk(query, 10).tolist()]
        assert [h.score for h in found.hits] == pytest.approx(floor_top)
    vecs = np.random.default_rng(1).standard_normal((300, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    exact = ExactIndex(16)
    exact.add(np.arange(300), vecs)
    hnsw = RawHnsw(vecs, 16, 200, 300)
    for q in vecs[:20]:
        assert exact.search(q, 10)[0][0].tolist() == RawExact(vecs).topk(q, 10).tolist()
        assert len(set(hnsw.topk(q, 10).tolist()) & set(RawExact(vecs).topk(q, 10).tolist())) >= 9


def test_search_micro_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    result = main(["--n", "300", "--namespaces", "30", "--queries", "10"])
    assert json.loads(capsys.readouterr().out.strip()) == result
    assert result["conversation"]["n"] == 10 and result["app_p50_to_raw_numpy"] is not None
