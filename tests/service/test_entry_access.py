"""Entry access by id and by exact scope (what the framework adapters build on), in both modes:
batch adds, reads by id, one scope's listing, the projects of an app, searches over chosen
scopes, deletes by id."""

from __future__ import annotations

import pytest

from memray import MemoryEntry
from memray.errors import InvalidIdError


def entry(eid: str, text: str, ts: float = 1_700_000_000.0) -> MemoryEntry:
    return MemoryEntry(id=eid, content=text, author="user", timestamp=ts)


def test_add_entries_stores_a_batch_in_one_scope_and_replaces_by_id(mem, app):
    svc = mem.memory_service
    assert svc.for_project("P").add_entries(app, "u", [entry("a", "alpha kiwi"), entry("b", "beta kiwi")]) == ["a", "b"]
    assert svc.add_entries(app, "u", []) == []
    svc.for_project("P").add_entries(app, "u", [entry("a", "alpha mango")])
    got = svc.get_entries(app, "u", ["b", "missing", "a"])
    assert [(r.entry.id, r.entry.text, r.project_id) for r in got] == [
        ("b", "beta kiwi", "P"),
        ("a", "alpha mango", "P"),
    ]
    # lexical: the replaced text no longer matches (vector neighbours would still rank it)
    assert [r.entry.id for r in svc.search_projects(app, "u", "kiwi", ["P"], mode="lexical").memories] == ["b"]


def test_add_entries_with_a_session_tags_without_replacing_the_session(mem, app):
    svc = mem.memory_service
    svc.add_entries(app, "u", [entry("e1", "first delta")], session_id="s")
    svc.add_entries(app, "u", [entry("e2", "second delta")], session_id="s")
    assert {r.entry.id for r in svc.list_entries(app, "u")} == {"e1", "e2"}
    assert svc.delete_entries(app, "u", session_id="s")["entries"] == 2


def test_list_entries_lists_exactly_one_scope_newest_first(mem, app):
    svc = mem.memory_service
    svc.add_entry(app, "u", entry("g", "global", ts=1.0))
    svc.for_project("P").add_entries(app, "u", [entry("p1", "one", ts=2.0), entry("p2", "two", ts=3.0)])
    assert [r.entry.id for r in svc.list_entries(app, "u")] == ["g"]
    assert [r.entry.id for r in svc.for_project("P").list_entries(app, "u")] == ["p2", "p1"]
    assert [r.entry.id for r in svc.for_project("P").list_entries(app, "u", limit=1)] == ["p2"]
    assert svc.for_project("Q").list_entries(app, "u") == []


def test_list_projects_names_each_users_projects(mem, app):
    svc = mem.memory_service
    svc.add_entry(app, "u", entry("g", "global only"))
    svc.for_project("B").add_entry(app, "u", entry("b", "b"))
    svc.for_project("A").add_entry(app, "u", entry("a", "a"))
    svc.for_project("A").add_entry(app, "v", entry("va", "va"))
    svc.for_project("Z").add_entry(app + "-other", "u", entry("z", "z"))
    assert svc.list_projects(app) == [("u", "A"), ("u", "B"), ("v", "A")]
    assert svc.list_projects(app, "v") == [("v", "A")]


def test_search_projects_searches_only_the_scopes_named(mem, app):
    svc = mem.memory_service
    svc.add_entry(app, "u", entry("g", "zephyr global"))
    svc.for_project("A").add_entry(app, "u", entry("a", "zephyr in A"))
    svc.for_project("B").add_entry(app, "u", entry("b", "zephyr in B"))
    assert {r.entry.id for r in svc.search_projects(app, "u", "zephyr", ["A", "B"]).memories} == {"a", "b"}
    assert {r.entry.id for r in svc.search_projects(app, "u", "zephyr", [None]).memories} == {"g"}
    assert svc.search_projects(app, "u", "zephyr", []).memories == []
    hits = svc.search_projects(app, "u", "zephyr", ["A", None, "B"], limit=2).memories
    assert len(hits) == 2 and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_delete_entries_by_id_removes_entries_and_their_vectors(mem, app):
    svc = mem.memory_service
    svc.add_entry(app, "u", entry("g", "quokka global"))
    svc.for_project("A").add_entry(app, "u", entry("a", "quokka project"))
    counts = svc.delete_entries(app, "u", ids=["a", "never-stored"])
    assert counts["entries"] == 1 and counts["vectors"] >= 1
    assert svc.get_entries(app, "u", ["a", "g"])[0].entry.id == "g"
    assert svc.search_projects(app, "u", "quokka", ["A", None]).memories[0].entry.id == "g"
    assert svc.search_projects(app, "u", "quokka", ["A"]).memories == []
    assert svc.delete_entries(app, "u", ids=[]) == {"entries": 0, "vectors": 0}


def test_bad_ids_are_rejected_before_anything_is_read_or_deleted(mem, app):
    svc = mem.memory_service
    svc.add_entry(app, "u", entry("keep", "kept"))
    with pytest.raises(InvalidIdError, match="entry.id"):
        svc.delete_entries(app, "u", ids=["keep", ""])
    with pytest.raises(InvalidIdError, match="project_id"):
        svc.search_projects(app, "u", "kept", ["x" * 257])
    assert [r.entry.id for r in svc.get_entries(app, "u", ["keep"])] == ["keep"]
