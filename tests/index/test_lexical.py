from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memray.index.lexical import Bm25Stats, LexicalIndex, ideal_bm25
from memray.text import index_terms
from tests.support.scoring_reference import lexical_score


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
    "query", ['"', "?", "-", "'", '"unterminated', "dark -mode", "a AND (b OR", "*", "\\", "", "   ", "NOT", ":::"]
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
    terms = index_terms("dark mode editor")
    ideal = ideal_bm25(terms, index.stats(terms))
    assert 0 < lexical_score(hits[1][1], ideal) < lexical_score(hits[0][1], ideal) <= 1


def test_a_text_holding_the_whole_query_scores_about_one_whatever_the_collection_size() -> None:
    for filler in (0, 200):
        ix = LexicalIndex()
        ix.add("hit", "I prefer dark mode")
        for i in range(filler):
            ix.add(f"f{i}", f"unrelated note number {i} about the weather")
        terms = index_terms("dark mode")
        score = lexical_score(ix.scores(terms)["hit"], ideal_bm25(terms, ix.stats(terms)))
        assert score == pytest.approx(1.0, abs=0.15)


def test_a_query_term_the_collection_lacks_lowers_the_score() -> None:
    ix = LexicalIndex()
    ix.add("a", "the tent is blue")
    ix.add("b", "a red kite")
    both = index_terms("blue tent")
    with_absent = index_terms("blue tent zeppelin")
    full = lexical_score(ix.scores(both)["a"], ideal_bm25(both, ix.stats(both)))
    partial = lexical_score(ix.scores(with_absent)["a"], ideal_bm25(with_absent, ix.stats(with_absent)))
    assert 0 < partial < full


def test_function_words_match_nothing_and_word_forms_match_each_other() -> None:
    ix = LexicalIndex()
    ix.add("p", "She painted two paintings of the harbour")
    ix.add("c", "I'll be there, we'll see")
    assert ix.search("what is it that they were?", 5) == []  # only function words
    assert ids(ix.search("painting", 5)) == ["p"] and ids(ix.search("paints", 5)) == ["p"]
    assert ix.search("ill", 5) == [] and ix.search("well", 5) == []  # contractions are not words


def test_stats_of_many_namespaces_score_as_one_index_over_their_union() -> None:
    texts = {
        "a1": "kiwi jam recipe",
        "a2": "jam session tonight",
        "b1": "kiwi birds of new zealand",
        "b2": "recipe for bread",
        "b3": "kiwi kiwi kiwi",
    }
    union, part_a, part_b = LexicalIndex(), LexicalIndex(), LexicalIndex()
    for doc, text in texts.items():
        union.add(doc, text)
        (part_a if doc.startswith("a") else part_b).add(doc, text)
    terms = index_terms("kiwi jam recipe")
    stats = Bm25Stats.merge([part_a.stats(terms), part_b.stats(terms)])
    assert stats == union.stats(terms)
    merged = {**part_a.scores(terms, stats), **part_b.scores(terms, stats)}
    assert merged == pytest.approx(union.scores(terms))


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


def _arrays(ix: LexicalIndex, terms: list[str]) -> list[list[list[float]]]:
    """Each term's posting arrays as lists (empty when the term has none)."""
    return [[a.tolist() for a in ix._posting(t) or ()] for t in terms]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["add", "delete", "read"]), st.integers(0, 7), st.integers(0, 5)), max_size=40)
)
def test_posting_arrays_kept_in_step_equal_arrays_built_afresh(ops: list[tuple[str, int, int]]) -> None:
    """Arrays appended to after adds (and dropped on deletes) equal a fresh index's, in order."""
    words = ["dark mode", "mode editor", "dark chocolate snack", "editor theme", "snack time", "dark theme"]
    labels = {f"d{i}": i for i in range(8)}
    ix = LexicalIndex(key=labels.__getitem__)
    terms = sorted({t for w in words for t in index_terms(w)})
    for op, doc, text in ops:
        if op == "add":
            ix.add(f"d{doc}", words[text])
        elif op == "delete":
            ix.delete(f"d{doc}")
        else:
            fresh = LexicalIndex(key=labels.__getitem__)
            for doc_id in ix._docs:  # the same documents in the same order
                fresh.add_terms(doc_id, ix._docs[doc_id])
            assert _arrays(ix, terms) == _arrays(fresh, terms)


def test_reading_a_posting_after_an_add_costs_the_new_documents_not_the_history() -> None:
    """A conversation's namespace gains two messages a tick and is searched each tick: the posting
    entries turned into arrays per tick stay the tick's, however long the history."""
    ix = LexicalIndex(key=lambda d: int(d))
    per_tick = []
    for tick in range(40):
        before = ix.rebuilt
        ix.add(str(2 * tick), f"tell me something new about cooking (turn {tick})")
        ix.add(str(2 * tick + 1), f"noted: tell me something new about cooking (turn {tick})")
        ix.postings(index_terms("something new about cooking"), None)
        per_tick.append(ix.rebuilt - before)
    terms = index_terms("something new about cooking")
    assert terms and all(len(ix._postings[t]) == 80 for t in terms)
    assert per_tick[1:] == [2 * len(terms)] * 39  # (rebuilt whole, the last tick alone would be 80 a term)
