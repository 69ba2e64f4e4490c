"""BM25 as the product runs it: each search goes through the scoring kernel over a shard's
namespace (memray.index.scorer over memray.index.space.Space), not a side path of the index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memray.ids import Namespace
from memray.index import lexical
from memray.index.base import IndexItem
from memray.index.lexical import Bm25Stats, LexicalIndex
from memray.index.scorer import Search, score
from memray.index.search import Query
from memray.index.space import Space
from memray.text import index_terms

NS = Namespace("app", "user", "mem", "notes")


def space_of(texts: dict[str, str], ns: Namespace = NS) -> Space:
    """A namespace of a shard holding ``texts`` (no vectors), as a shard's upsert writes it."""
    space = Space(ns, 0, 4)
    for doc, text in texts.items():
        put(space, doc, text)
    return space


def put(space: Space, doc: str, text: str) -> None:
    space.upsert([(IndexItem(space.namespace, doc, None, text, 0.0), None)])


def search(spaces: Space | list[Space], text: str, k: int = 5) -> list[tuple[str, float]]:
    """(doc_id, score) of a lexical search as a shard runs it (the scoring kernel), best first;
    a score is the lexical part L (min(1, BM25 / the query's ideal), docs/scoring.md)."""
    sources = spaces if isinstance(spaces, list) else [spaces]
    (found,) = score([Search(Query(text, None, k, "lexical"), sources)], 0.0)
    return [(h.doc_id, h.score) for h in found.hits]


@pytest.fixture
def index() -> Space:
    return space_of(
        {
            "d1": "I prefer dark-mode in my editor.",
            "d2": "The weather is nice today; let's go outside!",
            "d3": "Dark chocolate is my favourite snack",
            "d4": "我喜欢深色模式",
            "d5": 'He said "hello world" and left?',
        }
    )


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [doc for doc, _ in hits]


@pytest.mark.parametrize(
    "query", ['"', "?", "-", "'", '"unterminated', "dark -mode", "a AND (b OR", "*", "\\", "", "   ", "NOT", ":::"]
)
def test_any_query_text_is_safe(index: Space, query: str) -> None:
    hits = search(index, query)
    assert isinstance(hits, list)


def test_empty_query_returns_nothing(index: Space) -> None:
    assert search(index, "") == [] and search(index, "?!") == []
    assert search(space_of({}), "dark") == []
    assert search(index, "dark", 0) == []


def test_punctuation_does_not_stop_a_word_matching(index: Space) -> None:
    assert ids(search(index, "mode?")) == ["d1"]
    assert ids(search(index, '"dark-mode"'))[0] == "d1"  # both terms beat one
    assert set(ids(search(index, "dark"))) == {"d1", "d3"}
    assert ids(search(index, "let's")) == ["d2"]
    assert ids(search(index, "HELLO")) == ["d5"]


def test_cjk_is_searchable(index: Space) -> None:
    assert ids(search(index, "深色")) == ["d4"]
    assert ids(search(index, "模式是什么")) == ["d4"]


def test_scores_rank_and_are_positive(index: Space) -> None:
    hits = search(index, "dark mode editor")
    assert ids(hits)[0] == "d1"
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert 0 < hits[1][1] < hits[0][1] <= 1


def test_a_text_holding_the_whole_query_scores_about_one_whatever_the_collection_size() -> None:
    for filler in (0, 200):
        space = space_of(
            {"hit": "I prefer dark mode"} | {f"f{i}": f"unrelated note {i} about the weather" for i in range(filler)}
        )
        assert dict(search(space, "dark mode"))["hit"] == pytest.approx(1.0, abs=0.15)


def test_a_query_term_the_collection_lacks_lowers_the_score() -> None:
    space = space_of({"a": "the tent is blue", "b": "a red kite"})
    full, partial = dict(search(space, "blue tent"))["a"], dict(search(space, "blue tent zeppelin"))["a"]
    assert 0 < partial < full


def test_function_words_match_nothing_and_word_forms_match_each_other() -> None:
    space = space_of({"p": "She painted two paintings of the harbour", "c": "I'll be there, we'll see"})
    assert search(space, "what is it that they were?") == []  # only function words
    assert ids(search(space, "painting")) == ["p"] and ids(search(space, "paints")) == ["p"]
    assert search(space, "ill") == [] and search(space, "well") == []  # contractions are not words


def test_a_search_of_many_namespaces_scores_as_one_namespace_holding_their_union() -> None:
    texts = {
        "a1": "kiwi jam recipe",
        "a2": "jam session tonight",
        "b1": "kiwi birds of new zealand",
        "b2": "recipe for bread",
        "b3": "kiwi kiwi kiwi",
    }
    union = space_of(texts)
    part_a = space_of({d: t for d, t in texts.items() if d.startswith("a")}, NS._replace(scope="a"))
    part_b = space_of({d: t for d, t in texts.items() if d.startswith("b")}, NS._replace(scope="b"))
    terms = index_terms("kiwi jam recipe")
    assert Bm25Stats.merge([part_a.lexical.stats(terms), part_b.lexical.stats(terms)]) == union.lexical.stats(terms)
    assert dict(search([part_a, part_b], "kiwi jam recipe", 10)) == pytest.approx(
        dict(search(union, "kiwi jam recipe", 10))
    )


def test_delete_removes_from_results_and_stats(index: Space) -> None:
    avgdl = index.lexical.avgdl
    assert index.remove("d3") and not index.remove("d3") and not index.remove("nope")
    assert ids(search(index, "chocolate")) == []
    assert ids(search(index, "dark")) == ["d1"]
    assert len(index.lexical) == 4 and index.lexical.avgdl != avgdl


def test_upsert_replaces_text(index: Space) -> None:
    put(index, "d1", "now about tea")
    assert "d1" not in ids(search(index, "dark"))
    assert ids(search(index, "tea")) == ["d1"]
    assert len(index.lexical) == 5


def test_incremental_avgdl_matches_rebuild(index: Space) -> None:
    put(index, "d2", "short")
    index.remove("d5")
    fresh = LexicalIndex()
    for doc in ("d1", "d2", "d3", "d4"):
        fresh.add_terms(doc, index.lexical.terms(doc) or {})
    assert fresh.avgdl == pytest.approx(index.lexical.avgdl)
    again = space_of(
        {"d1": "I prefer dark-mode in my editor.", "d2": "short", "d3": "Dark chocolate is my favourite snack"}
    )
    put(again, "d4", "我喜欢深色模式")
    assert search(index, "dark mode short") == search(again, "dark mode short")


def test_save_load_round_trip(index: Space, tmp_path: Path) -> None:
    index.lexical.save(str(tmp_path))
    data = json.loads((tmp_path / "lexical.json").read_text(encoding="utf-8"))
    assert set(data["docs"]) == {"d1", "d2", "d3", "d4", "d5"}
    loaded = LexicalIndex.load(str(tmp_path))
    assert {d: loaded.terms(d) for d in data["docs"]} == {d: index.lexical.terms(d) for d in data["docs"]}
    terms = index_terms("dark hello world weather outside 深色")
    assert loaded.stats(terms) == index.lexical.stats(terms) and loaded.avgdl == index.lexical.avgdl
    assert [p.name for p in tmp_path.iterdir()] == ["lexical.json"]


def _arrays(ix: LexicalIndex, terms: list[str]) -> list[list[list[float]]]:
    """Each term's cached posting entries, then the arrays made of them (empty: no posting)."""
    out: list[list[list[float]]] = []
    for term in terms:
        entries = ix._posting(term)
        held = [] if entries is None else [list(entries), *(a.tolist() for a in ix._arrays_of(term, entries))]
        out.append(held)
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["add", "delete", "read"]), st.integers(0, 7), st.integers(0, 5)), max_size=40)
)
def test_posting_arrays_kept_in_step_equal_arrays_built_afresh(ops: list[tuple[str, int, int]]) -> None:
    """Posting entries and arrays appended to after adds (and dropped on deletes) equal a fresh
    index's, in order."""
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


@pytest.mark.parametrize("bound", [-1.0, float("inf")], ids=["arrays", "entries"])
def test_reading_a_posting_after_an_add_costs_the_new_documents_not_the_history(
    monkeypatch: pytest.MonkeyPatch, bound: float
) -> None:
    """A conversation's namespace gains two messages a tick and is searched each tick: the posting
    entries cached per tick (appended by its adds) stay the tick's, however long the history,
    whether the postings are weighed as arrays or as the cached entries."""
    monkeypatch.setattr(lexical, "FUSED_PER_TERM", bound)
    monkeypatch.setattr(lexical, "CHANGED_PER_TERM", bound)
    ix = LexicalIndex(key=lambda d: int(d))
    per_tick = []
    for tick in range(40):
        before = ix.cached_entries
        ix.add(str(2 * tick), f"tell me something new about cooking (turn {tick})")
        ix.add(str(2 * tick + 1), f"noted: tell me something new about cooking (turn {tick})")
        ix.postings(index_terms("something new about cooking"), None)
        per_tick.append(ix.cached_entries - before)
    terms = index_terms("something new about cooking")
    assert terms and all(len(ix._postings[t]) == 80 for t in terms)
    assert per_tick[1:] == [2 * len(terms)] * 39  # (built whole, the last tick alone would be 80 a term)


def _bm25(postings: lexical.Postings) -> list[tuple[int, float]]:
    """BM25 per label as the kernel sums it: idf times weight, entry by entry, in order."""
    entries = [(labels.tolist(), (idf * weights).tolist()) for labels, weights, idf in postings.arrays]
    if postings.raw is not None:
        labels, weights, _ = lexical.weigh([postings.raw])
        entries.append((labels.tolist(), weights.tolist()))
    out: dict[int, float] = {}
    for labels, weights in entries:
        for label, weight in zip(labels, weights):
            out[label] = out.get(label, 0.0) + weight
    return sorted(out.items())


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["add", "delete", "read"]), st.integers(0, 40), st.integers(0, 9)), max_size=90),
    st.sampled_from([None, Bm25Stats(50, 400, {"appl": 3, "pear": 9})]),
)
def test_the_fused_postings_score_bit_for_bit_as_the_arrays(
    ops: list[tuple[str, int, int]], stats: Bm25Stats | None
) -> None:
    """A query's postings weighed from the cached entries (the kernel weighs a batch's at once)
    must give every label the very float the per-term arrays give, whatever came before (adds,
    re-adds, deletes, reads that cached entries or arrays), under its own statistics or given
    ones."""
    words = [
        "apple",
        "pear",
        "plum",
        "apple pear",
        "pear plum fig",
        "fig",
        "plum plum apple",
        "kiwi",
        "fig kiwi",
        "pears",
    ]
    ix = LexicalIndex(key=lambda d: int(d))
    for op, doc, w in ops:
        if op == "add":
            ix.add(str(doc), words[w])
        elif op == "delete":
            ix.delete(str(doc))
        else:
            ix.postings(index_terms(words[w]), stats)
    for query in ("apple pear plum fig", "kiwi", "plum"):
        terms = index_terms(query)
        entries = _forced(ix, terms, stats, float("inf"))
        arrays = _forced(ix, terms, stats, -1)
        assert not entries.arrays and not arrays.raw
        assert _bm25(entries) == _bm25(arrays), (ops, query)


def _forced(ix: LexicalIndex, terms: list[str], stats: Bm25Stats | None, bound: float) -> lexical.Postings:
    """``ix.postings`` with both of its bounds at ``bound`` (inf: the entries; -1: the arrays)."""
    saved = lexical.FUSED_PER_TERM, lexical.CHANGED_PER_TERM
    lexical.FUSED_PER_TERM = lexical.CHANGED_PER_TERM = bound
    try:
        return ix.postings(terms, stats)
    finally:
        lexical.FUSED_PER_TERM, lexical.CHANGED_PER_TERM = saved


def test_a_posting_changed_since_its_last_read_is_weighed_from_its_entries_up_to_the_larger_bound() -> None:
    """Between the two bounds, a read that finds a posting changed (every read of a simulation)
    takes the cached entries; the same posting read again unchanged takes the arrays, whose
    weights then stay cached."""
    ix = LexicalIndex(key=int)
    size = (lexical.FUSED_PER_TERM + lexical.CHANGED_PER_TERM) // 2
    for doc in range(size):
        ix.add(str(doc), f"apple pear note{doc}")
    terms = index_terms("apple pear")
    first = ix.postings(terms, None)
    assert first.raw is not None and not first.arrays  # (taken: a change)
    again = ix.postings(terms, None)
    assert again.raw is None and [len(labels) for labels, _, _ in again.arrays] == [size, size]
    ix.add(str(size), "apple")
    changed = ix.postings(terms, None)
    assert changed.raw is not None and len(changed.raw.labels()) == 2 * size + 1
    assert _bm25(changed) == _bm25(_forced(ix, terms, None, -1))
    assert ix.postings(terms, None).raw is None  # read again unchanged: the arrays once more
    ix.add(str(size + 1), "pear")  # a change to one of the terms is a change to the read
    assert ix.postings(terms, None).raw is not None


def test_a_batch_of_postings_weighs_each_entry_as_it_weighs_alone() -> None:
    """The kernel weighs the small postings of a whole block of searches in one expression: each
    entry must get the float it gets weighed alone (a search scores the same in any batch)."""
    indexes = [LexicalIndex(key=int) for _ in range(3)]
    for n, ix in enumerate(indexes):
        for doc in range(5 + 7 * n):
            text = ["apple pear", "plum fig fig", "kiwi apple"][(doc + n) % 3]
            ix.add(str(doc), " ".join([text] * (1 + doc % 4)))
    parts = []
    for n, ix in enumerate(indexes):
        raw = ix.postings(index_terms("apple fig kiwi"), Bm25Stats(40 + n, 300, {"appl": 9, "fig": 4})).raw
        assert raw is not None
        parts.append(raw)
    labels, weights, sizes = lexical.weigh(parts)
    alone = [lexical.weigh([part]) for part in parts]
    assert sizes == [len(a[0]) for a in alone]
    assert labels.tolist() == [x for a in alone for x in a[0].tolist()]
    assert weights.tolist() == [x for a in alone for x in a[1].tolist()]
    assert len(set(weights.tolist())) > 3  # (the norms and idfs differ by part)
