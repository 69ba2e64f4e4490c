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
from memray.index.exact import ExactIndex
from memray.index.lexical import LexicalIndex
from memray.text import index_terms


def test_raw_floors_rank_like_memrays_indexes() -> None:
    rng = random.Random(1)
    texts = [sentence(rng, 10) for _ in range(300)]
    lexical = LexicalIndex()
    for i, text in enumerate(texts):
        lexical.add(str(i), text)
    raw = RawBm25(texts)
    for q in texts[:20]:  # the same scores in the same order (ties may pick other documents)
        query = " ".join(q.split()[:4])
        memray_top = [score for _, score in lexical.search(query, 10)]
        every = lexical.scores(list(dict.fromkeys(index_terms(query))))
        assert [every[str(i)] for i in raw.topk(query, 10).tolist()] == pytest.approx(memray_top)
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
