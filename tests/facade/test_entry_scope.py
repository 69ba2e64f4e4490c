"""The long-term service's one add family and one delete family, in the service's scope and a
project view's (:class:`memray.facade.service.EntryScope`)."""

from __future__ import annotations

import pytest

import memray
from memray import MemoryEntry, ValidationError


def entry(id_: str, text: str) -> MemoryEntry:
    return MemoryEntry(id=id_, content=text)


def stored(mem: memray.Memory, app: str) -> set[str]:
    svc = mem.memory_service
    return {
        r.entry.id for scope in (svc, svc.for_project("P"), svc.for_project("Q")) for r in scope.list_entries(app, "u")
    }


@pytest.fixture
def scopes(mem: memray.Memory, app: str) -> memray.MemoryServiceHandle:
    svc = mem.memory_service
    svc.add_entries(app, "u", [entry("g1", "kiwi one"), entry("g2", "kiwi two")], session_id="s")
    svc.for_project("P").add_entries(app, "u", [entry("p1", "kiwi three"), entry("p2", "fig")], session_id="s")
    svc.for_project("Q").add_entry(app, "u", entry("q1", "kiwi four"))
    return svc


@pytest.mark.parametrize(
    "delete,gone",
    [
        (lambda svc, app: svc.delete_entries(app, "u", "kiwi"), {"g1", "g2"}),
        (lambda svc, app: svc.for_project("P").delete_entries(app, "u", "kiwi"), {"p1"}),
        (lambda svc, app: svc.delete_entries(app, "u", ids=["g1", "p1", "q1"]), {"g1", "p1", "q1"}),
        (lambda svc, app: svc.for_project("P").delete_entries(app, "u", ids=["g1", "p1", "q1"]), {"p1"}),
        (lambda svc, app: svc.delete_entries(app, "u", session_id="s"), {"g1", "g2", "p1", "p2"}),
        (lambda svc, app: svc.for_project("P").delete_entries(app, "u", session_id="s"), {"p1", "p2"}),
        (lambda svc, app: svc.for_project("P").delete_entries(app, "u", everything=True), {"p1", "p2"}),
    ],
    ids=["query", "query-in-view", "ids", "ids-in-view", "session", "session-in-view", "everything-in-view"],
)
def test_delete_entries_takes_what_its_selector_names_in_its_scope(mem, app, scopes, delete, gone):
    before = stored(mem, app)
    counts = delete(scopes, app)
    assert counts == {"entries": len(gone), "vectors": len(gone)}
    assert stored(mem, app) == before - gone


@pytest.mark.parametrize(
    "kwargs,named",
    [
        ({}, "query"),
        ({"query": "kiwi", "ids": ["g1"]}, "ids"),
        ({"ids": ["g1"], "session_id": "s"}, "session_id"),
        ({"query": "kiwi", "everything": True}, "everything"),
    ],
)
def test_delete_entries_needs_exactly_one_selector(mem, app, scopes, kwargs, named):
    before = stored(mem, app)
    with pytest.raises(ValidationError, match="exactly one of") as err:
        scopes.delete_entries(app, "u", **kwargs)
    assert err.value.field == named
    assert stored(mem, app) == before


def test_everything_is_a_projects_and_the_service_refuses_it(mem, app, scopes):
    before = stored(mem, app)
    with pytest.raises(ValidationError, match="for_project") as err:
        scopes.delete_entries(app, "u", everything=True)
    assert err.value.field == "everything"
    assert stored(mem, app) == before


def test_replace_session_replaces_what_the_session_stored_in_the_scope_asked(mem, app, scopes):
    view = scopes.for_project("P")
    assert view.add_entries(app, "u", [entry("p9", "new take")], session_id="s", replace_session=True) == ["p9"]
    # the session's entries are replaced wherever they were (as add_session always did)
    assert stored(mem, app) == {"p9", "q1"}
    with pytest.raises(ValidationError, match="session_id"):
        scopes.add_entries(app, "u", ["x"], replace_session=True)


def test_a_view_refuses_another_projects_id(mem, app, scopes):
    with pytest.raises(ValidationError, match="conflicts with this view's project"):
        scopes.for_project("P").list_entries(app, "u", "Q")
    assert [r.entry.id for r in scopes.for_project("P").list_entries(app, "u", limit=1)] in (["p1"], ["p2"])
