from __future__ import annotations

import json
from pathlib import Path

import pytest

from memray.index.fusion import lexical_score
from memray.index.lexical import LexicalIndex


@pytest.fixture
def index() -> LexicalIndex:
    ix = LexicalIndex()
    ix.add("d1", "I prefer dark-mode in my editor.")
    ix.add("d2", "The weather is nice today; let's go outside!")
    ix.add("d3", "Dark chocolate is my favourite snack")
    ix.add("d4", "我喜欢深色模式")
    ix.add("d5", 'He said "hello world" and left?')
    return ix


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [doc for doc, _ in hits]


@pytest.mark.parametrize(
    "query",
    ['"', "?", "-", "'", '"unterminated', "dark -mode", "a AND (b OR", "*", "\\", "", "   ", "NOT", ":::"],
)
def test_any_query_text_is_safe(index: LexicalIndex, query: str) -> None:
    hits = index.search(query, 5)
    assert isinstance(hits, list)


def test_empty_query_returns_nothing(index: LexicalIndex) -> None:
    assert index.search("", 5) == [] and index.search("?!", 5) == []
    assert LexicalIndex().search("dark", 5) == []
    assert index.search("dark", 0) == []


def test_punctuation_does_not_stop_a_word_matching(index: LexicalIndex) -> None:
    assert ids(index.search("mode?", 5)) == ["d1"]
    assert ids(index.search('"dark-mode"', 5))[0] == "d1"  # both terms beat one
    assert set(ids(index.search("dark", 5))) == {"d1", "d3"}
    assert ids(index.search("let's", 5)) == ["d2"]
    assert ids(index.search("HELLO", 5)) == ["d5"]


def test_cjk_is_searchable(index: LexicalIndex) -> None:
    assert ids(index.search("深色", 5)) == ["d4"]
    assert ids(index.search("模式是什么", 5)) == ["d4"]


def test_scores_rank_and_are_positive(index: LexicalIndex) -> None:
    hits = index.search("dark mode editor", 5)
    assert ids(hits)[0] == "d1"
    assert all(score > 0 for _, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert 0 < lexical_score(hits[0][1]) < 1


def test_delete_removes_from_results_and_stats(index: LexicalIndex) -> None:
    avgdl = index.avgdl
    assert index.delete("d3") and not index.delete("d3") and not index.delete("nope")
    assert ids(index.search("chocolate", 5)) == []
    assert ids(index.search("dark", 5)) == ["d1"]
    assert len(index) == 4 and index.avgdl != avgdl


def test_upsert_replaces_text(index: LexicalIndex) -> None:
    index.add("d1", "now about tea")
    assert "d1" not in ids(index.search("dark", 5))
    assert ids(index.search("tea", 5)) == ["d1"]
    assert len(index) == 5


def test_incremental_avgdl_matches_rebuild(index: LexicalIndex) -> None:
    index.add("d2", "short")
    index.delete("d5")
    fresh = LexicalIndex()
    for doc in ("d1", "d2", "d3", "d4"):
        fresh._put(doc, dict(index.terms(doc) or {}))
    assert fresh.avgdl == pytest.approx(index.avgdl)
    assert index.search("dark mode short", 5) == fresh.search("dark mode short", 5)


def test_save_load_round_trip(index: LexicalIndex, tmp_path: Path) -> None:
    index.save(str(tmp_path))
    data = json.loads((tmp_path / "lexical.json").read_text(encoding="utf-8"))
    assert set(data["docs"]) == {"d1", "d2", "d3", "d4", "d5"}
    loaded = LexicalIndex.load(str(tmp_path))
    for q in ("dark", "深色", "hello world", "weather outside"):
        assert loaded.search(q, 5) == index.search(q, 5)
    assert [p.name for p in tmp_path.iterdir()] == ["lexical.json"]
