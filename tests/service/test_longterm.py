"""The long-term memory service through the facade, in both modes: scopes, search, deletes."""

from __future__ import annotations

import asyncio

import pytest

import memray
from memray import MemoryEntry, SearchRequest
from memray.errors import InvalidIdError, ValidationError
from memray.ids import validate_project_id
from memray.service import entry_matches
from memray.text import tokenize

MODES = ("lexical", "vector", "hybrid")


def entry(eid: str, text: str, ts: float = 1_700_000_000.0) -> MemoryEntry:
    return MemoryEntry(id=eid, content=text, author="user", timestamp=ts)


def found(mem: memray.Memory, app: str, user: str, query: str, project: str | None = None, **kw: object) -> list[str]:
    resp = mem.memory_service.search(SearchRequest(query=query, user_id=user, app_name=app, project_id=project, **kw))
    return [r.entry.id for r in resp.memories]


def stored_ids(mem: memray.Memory, app: str, user: str) -> set[str]:
    rows = mem.internals.run(mem.internals.deployment.stores.list_entries(app, user, None, None, True, None))
    return {r.id for r in rows}


# -- the search-semantics matrix ----------------------------------------------------------------
def _populate_scopes(mem: memray.Memory, app: str) -> None:
    svc = mem.memory_service
    svc.add_entries(app, "u", [entry("g", "zephyr global note")], session_id="s-global", replace_session=True)
    svc.for_project("A").add_entries(
        app, "u", [entry("a", "zephyr project A note")], session_id="s-a", replace_session=True
    )
    svc.for_project("B").add_entry(app, "u", entry("b", "zephyr project B note"))
    svc.add_entry(app, "v", entry("v", "zephyr other user note"))
    svc.for_project("A").add_entry(app, "v", entry("va", "zephyr other user project A"))
    svc.add_entry(app + "-other", "u", entry("w", "zephyr other app note"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("project,expected", [(None, {"g"}), ("A", {"g", "a"}), ("B", {"g", "b"}), ("C", {"g"})])
def test_search_scope_matrix(mem, app, project, expected, mode):
    _populate_scopes(mem, app)
    assert set(found(mem, app, "u", "zephyr note", project, mode=mode)) == expected


def test_search_never_crosses_user_or_app(mem, app):
    _populate_scopes(mem, app)
    assert set(found(mem, app, "v", "zephyr")) == {"v"}
    assert set(found(mem, app, "v", "zephyr", "A")) == {"v", "va"}
    assert set(found(mem, app + "-other", "u", "zephyr", "A")) == {"w"}
    assert found(mem, app, "nobody", "zephyr", "A") == []


def test_results_carry_scope_session_and_score(mem, app):
    _populate_scopes(mem, app)
    resp = mem.memory_service.search(SearchRequest(query="zephyr project", user_id="u", app_name=app, project_id="A"))
    by_id = {r.entry.id: r for r in resp.memories}
    assert by_id["a"].project_id == "A" and by_id["a"].session_id == "s-a"
    assert by_id["g"].project_id is None and by_id["g"].session_id == "s-global"
    assert all(0.0 <= r.score <= 1.0 for r in resp.memories)
    assert [r.score for r in resp.memories] == sorted((r.score for r in resp.memories), reverse=True)
    assert not resp.degraded


def test_ties_break_by_recency_then_id(mem, app):
    svc = mem.memory_service
    svc.add_entries(
        app,
        "u",
        [entry("b-old", "same words", 1.0), entry("a-new", "same words", 2.0), entry("c-new", "same words", 2.0)],
        session_id="s",
        replace_session=True,
    )
    for mode in MODES:
        assert found(mem, app, "u", "same words", mode=mode) == ["a-new", "c-new", "b-old"]


# -- the delete-semantics matrix ----------------------------------------------------------------
def _populate_for_deletes(mem: memray.Memory, app: str) -> None:
    svc = mem.memory_service
    svc.add_entries(
        app, "u", [entry("g1", "kiwi smoothie"), entry("g2", "banana bread")], session_id="s1", replace_session=True
    )
    svc.for_project("A").add_entries(
        app, "u", [entry("a1", "kiwi tart"), entry("a2", "banana split")], session_id="s2", replace_session=True
    )
    svc.for_project("B").add_entry(app, "u", entry("b1", "kiwi jam"))
    svc.for_project("B").add_entries(app, "u", [entry("b2", "ripe kiwi fruit")], session_id="s1b", replace_session=True)
    svc.add_entry(app, "v", entry("v1", "kiwi smoothie"))
    svc.for_project("A").add_entry(app, "v", entry("va1", "kiwi tart"))


ALL_U = {"g1", "g2", "a1", "a2", "b1", "b2"}


@pytest.mark.parametrize(
    "op,removed",
    [
        (lambda mem, app: mem.memory_service.delete_entries(app, "u", "kiwi"), {"g1"}),
        (lambda mem, app: mem.memory_service.delete_entries(app, "u", "KIWI smoothie!"), {"g1"}),
        (lambda mem, app: mem.memory_service.delete_entries(app, "u", "kiwi bread"), set()),  # every word must match
        (lambda mem, app: mem.memory_service.for_project("A").delete_entries(app, "u", "kiwi"), {"a1"}),
        (lambda mem, app: mem.memory_service.for_project("B").delete_entries(app, "u", "kiwi"), {"b1", "b2"}),
        (lambda mem, app: mem.memory_service.for_project("A").delete_entries(app, "u", everything=True), {"a1", "a2"}),
        (lambda mem, app: mem.memory_service.delete_entries(app, "u", session_id="s1"), {"g1", "g2"}),
        (lambda mem, app: mem.memory_service.delete_entries(app, "u", session_id="s2"), {"a1", "a2"}),
        (lambda mem, app: mem.delete_user(app=app, user_id="u"), ALL_U),
        # the core's one delete: what the facade does not offer on the unscoped service
        (lambda mem, app: core_delete(mem, app, everything=True), ALL_U),
        (lambda mem, app: core_delete(mem, app, ids=["a1", "b1", "g1"], project_id="A"), {"a1"}),
    ],
    ids=[
        "entries",
        "entries-punct",
        "entries-all-words",
        "in-project-A",
        "in-project-B",
        "project",
        "session-global",
        "session-project",
        "user",
        "core-every-scope",
        "core-ids-in-project",
    ],
)
def test_delete_scope_matrix(mem, app, op, removed):
    _populate_for_deletes(mem, app)
    result = op(mem, app)
    if isinstance(result, dict):
        assert result == {"entries": len(removed), "vectors": len(removed)}
    else:
        assert result.counts["entries"] == len(removed)
    assert stored_ids(mem, app, "u") == ALL_U - removed
    assert stored_ids(mem, app, "v") == {"v1", "va1"}
    for project, scope in [(None, {"g1", "g2"}), ("A", {"g1", "g2", "a1", "a2"}), ("B", {"g1", "g2", "b1", "b2"})]:
        for mode in MODES:  # vector mode returns every indexed item in scope: none of the removed
            assert set(found(mem, app, "u", "kiwi banana", project, mode=mode)) == scope - removed
    assert set(found(mem, app, "v", "kiwi", "A")) == {"v1", "va1"}


def core_delete(mem: memray.Memory, app: str, **selector: object) -> dict[str, int]:
    parts = mem.internals
    return parts.run(parts.service.delete(app, "u", **selector))  # type: ignore[arg-type]


def test_the_core_names_what_is_missing_or_given_twice(mem, app):
    _populate_for_deletes(mem, app)
    core, run = mem.internals.service, mem.internals.run
    with pytest.raises(ValidationError, match=r"exactly one of .* \(got query and ids\)"):
        run(core.delete(app, "u", "kiwi", ids=["g1"]))
    with pytest.raises(ValidationError, match="exactly one of"):
        run(core.delete(app, "u"))
    with pytest.raises(ValidationError, match="session_id.*replace_session=True"):
        run(core.add(app, "u", [entry("x", "x")], replace_session=True))
    assert run(core.add(app, "u", [])) == []  # nothing to store: nothing done
    assert stored_ids(mem, app, "u") == ALL_U


@pytest.mark.parametrize("query", ["", "   ", "?!", "-", '"'])
def test_delete_with_a_wordless_query_is_refused(mem, app, query):
    _populate_for_deletes(mem, app)
    with pytest.raises(ValidationError, match="everything=True"):
        mem.memory_service.delete_entries(app, "u", query)
    with pytest.raises(ValidationError, match="query"):
        mem.memory_service.for_project("A").delete_entries(app, "u", query)
    assert stored_ids(mem, app, "u") == ALL_U


def test_entry_matches_is_every_query_token():
    assert entry_matches(set(tokenize("Kiwi")), "I like kiwi.")
    assert entry_matches(set(tokenize("dont")), "don't do it")
    assert entry_matches(set(tokenize("喜欢")), "我喜欢猫")
    assert not entry_matches(set(tokenize("kiwi jam")), "kiwi tart")
    assert not entry_matches(set(), "anything")


# -- limit, min_score, query safety -------------------------------------------------------------
def test_limit_defaults_to_10_and_is_honoured(mem, app):
    mem.memory_service.add_entries(
        app,
        "u",
        [entry(f"e{i:02d}", f"walnut fact {i}", 1000.0 + i) for i in range(15)],
        session_id="s",
        replace_session=True,
    )
    assert len(found(mem, app, "u", "walnut")) == 10
    assert len(found(mem, app, "u", "walnut", limit=3)) == 3
    assert len(found(mem, app, "u", "walnut", limit=50)) == 15


@pytest.mark.parametrize(
    "request_", [dict(limit=0), dict(limit=-1), dict(limit=True), {"limit": "many"}, {"limit": 2.5}]
)
def test_bad_limit_is_a_validation_error_naming_limit(mem, app, request_):
    req = {"query": "x", "user_id": "u", "app_name": app, **request_}
    with pytest.raises(ValidationError, match="limit"):
        mem.memory_service.search(req)


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan")])
def test_bad_min_score_is_a_validation_error(mem, app, value):
    with pytest.raises(ValidationError, match="min_score"):
        mem.memory_service.search(SearchRequest(query="x", user_id="u", app_name=app, min_score=value))


@pytest.mark.parametrize("mode", MODES)
def test_min_score_filters_exactly_the_weaker_hits(mem, app, mode):
    mem.memory_service.add_entries(
        app,
        "u",
        [
            entry("e1", "the hiking trip to the alps in june"),
            entry("e2", "hiking boots size 44"),
            entry("e3", "tax return deadline"),
            entry("e4", "my cat likes tuna"),
        ],
        session_id="s",
        replace_session=True,
    )
    resp = mem.memory_service.search(
        SearchRequest(query="hiking trip alps", user_id="u", app_name=app, mode=mode, limit=50)
    )
    scores = {r.entry.id: r.score for r in resp.memories}
    assert len(scores) >= 2 and max(scores.values()) > min(scores.values())
    threshold = (max(scores.values()) + min(scores.values())) / 2
    kept = [i for i, s in scores.items() if s >= threshold]
    assert kept and len(kept) < len(scores)
    filtered = found(mem, app, "u", "hiking trip alps", mode=mode, limit=50, min_score=threshold)
    assert filtered == kept  # same order, only the weaker ones gone
    assert found(mem, app, "u", "hiking trip alps", mode=mode, min_score=1.0) == [
        i for i, s in scores.items() if s >= 1.0
    ]


def test_any_query_text_is_safe_and_punctuation_and_cjk_match(mem, app):
    mem.memory_service.add_entries(
        app,
        "u",
        [
            entry("p", "a well-known 'quoted' thing - really? e-mail me"),
            entry("c", "我喜欢在东京吃寿司"),
            entry("k", "서울에서 만나요"),
        ],
        session_id="s",
        replace_session=True,
    )
    for q in ['"', "?", "-", "'", "", "   ", "*:()", "\\", "%_", "a OR b", "NOT", "(", "\x00"]:
        for mode in MODES:
            resp = mem.memory_service.search(SearchRequest(query=q, user_id="u", app_name=app, mode=mode))
            if not tokenize(q):
                assert resp.memories == []
    for q in ["wellknown", "well-known", "well\u2010known", "quoted", "'quoted'", "really?", "email", "E-Mail"]:
        assert found(mem, app, "u", q, mode="lexical")[:1] == ["p"], q
    for q in ["东京", "寿司", "喜欢", "서울"]:
        assert found(mem, app, "u", q, mode="lexical")[:1] == ["c" if q != "서울" else "k"], q


# -- writes ---------------------------------------------------------------------------------------
def test_readding_a_session_replaces_its_entries(mem, app):
    svc = mem.memory_service
    svc.add_entries(
        app, "u", [entry("old1", "walnut cake"), entry("old2", "walnut bread")], session_id="s1", replace_session=True
    )
    svc.add_entries(app, "u", [entry("keep", "walnut pie")], session_id="s2", replace_session=True)
    svc.add_entries(app, "u", [entry("new1", "pecan cake")], session_id="s1", replace_session=True)
    assert stored_ids(mem, app, "u") == {"new1", "keep"}
    for mode in MODES:
        assert set(found(mem, app, "u", "walnut pecan cake", mode=mode)) == {"new1", "keep"}
    # re-adding into a project moves the session there: nothing stays behind in the global scope
    svc.for_project("P").add_entries(app, "u", [entry("new1", "pecan tart")], session_id="s1", replace_session=True)
    assert set(found(mem, app, "u", "pecan", mode="vector", min_score=0.0)) == {"keep"}  # every global entry
    assert set(found(mem, app, "u", "pecan", "P", mode="lexical")) == {"new1"}
    assert [r.entry.text for r in svc.for_project("P").list_recent(app, "u") if r.entry.id == "new1"] == ["pecan tart"]


def test_add_entry_with_an_existing_id_replaces_it(mem, app):
    svc = mem.memory_service
    svc.add_entry(app, "u", entry("e", "first draft about owls"))
    svc.add_entry(app, "u", entry("e", "final text about hawks"))
    assert found(mem, app, "u", "owls", mode="lexical") == []
    assert found(mem, app, "u", "hawks", mode="lexical") == ["e"]
    assert len(found(mem, app, "u", "anything", mode="vector", min_score=0.0)) == 1  # one version, not two


def test_list_recent_is_newest_first_in_the_search_scope(mem, app):
    svc = mem.memory_service
    svc.add_entry(app, "u", entry("g-old", "one", 1.0))
    svc.for_project("P").add_entry(app, "u", entry("p-mid", "two", 2.0))
    svc.add_entry(app, "u", entry("g-new", "three", 3.0))
    svc.for_project("Q").add_entry(app, "u", entry("q", "four", 4.0))
    assert [r.entry.id for r in svc.list_recent(app, "u")] == ["g-new", "g-old"]
    assert [r.entry.id for r in svc.for_project("P").list_recent(app, "u", limit=2)] == ["g-new", "p-mid"]
    with pytest.raises(ValidationError, match="limit"):
        svc.list_recent(app, "u", limit=0)


def test_entries_may_be_strings_dicts_or_parts(mem, app):
    svc = mem.memory_service
    ids = svc.add_entries(
        app,
        "u",
        ["plain string memo", {"content": [{"type": "text", "text": "parts memo"}], "author": "assistant"}],
        session_id="s",
        replace_session=True,
    )
    assert len(ids) == 2
    hits = mem.memory_service.search(SearchRequest(query="memo", user_id="u", app_name=app, mode="lexical")).memories
    assert {h.entry.text for h in hits} == {"plain string memo", "parts memo"}
    with pytest.raises(ValidationError, match="entries"):
        svc.add_entries(app, "u", [{"content": "x", "bogus": 1}], session_id="s", replace_session=True)


# -- ids ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["", "x" * 257, "日" * 257, "a\nb", None])
def test_validate_project_id_rejects(bad):
    with pytest.raises(InvalidIdError, match="project_id"):
        validate_project_id(bad)


@pytest.mark.parametrize("good", ["my-project", "x" * 256, "日" * 256, "🐱" * 256])
def test_validate_project_id_accepts_256_characters_not_bytes(good):
    assert len(good.encode("utf-8")) >= len(good)
    assert validate_project_id(good) == good
    assert memray.validate_project_id(good) == good


@pytest.mark.parametrize(
    "call",
    [
        lambda svc, app: svc.for_project("").add_entry(app, "u", "text"),
        lambda svc, app: svc.for_project("p" * 257).add_entry(app, "u", "text"),
        lambda svc, app: svc.for_project("").add_entries(app, "u", ["text"], session_id="s", replace_session=True),
        lambda svc, app: svc.add_entries(app, "", ["text"], session_id="s", replace_session=True),
        lambda svc, app: svc.add_entries(app, "u", ["text"], session_id="s" * 257, replace_session=True),
        lambda svc, app: svc.add_entry(app, "u", {"id": "", "content": "text"}),
        lambda svc, app: svc.add_entries(
            app, "u", ["fine", {"id": "bad\x07", "content": "x"}], session_id="s", replace_session=True
        ),
    ],
)
def test_invalid_ids_write_nothing(mem, app, call):
    with pytest.raises(InvalidIdError):
        call(mem.memory_service, app)
    assert stored_ids(mem, app, "u") == set()


def test_search_validates_ids(mem, app):
    with pytest.raises(InvalidIdError, match="project_id"):
        mem.memory_service.search(SearchRequest(query="x", user_id="u", app_name=app, project_id=""))
    with pytest.raises(InvalidIdError, match="user_id"):
        mem.memory_service.search(SearchRequest(query="x", user_id="", app_name=app))


# -- async twins ------------------------------------------------------------------------------------
def test_async_twins(mem, app):
    svc = mem.memory_service

    async def main() -> tuple[list[str], dict[str, int]]:
        await svc.aadd_entries(app, "u", [entry("x", "async otter")], session_id="s", replace_session=True)
        await svc.for_project("P").aadd_entry(app, "u", entry("y", "async otter in P"))
        resp = await svc.asearch(SearchRequest(query="otter", user_id="u", app_name=app, project_id="P"))
        deleted = await svc.for_project("P").adelete_entries(app, "u", everything=True)
        return [r.entry.id for r in resp.memories], deleted

    ids, deleted = asyncio.run(main())
    assert set(ids) == {"x", "y"} and deleted["entries"] == 1
    assert stored_ids(mem, app, "u") == {"x"}
