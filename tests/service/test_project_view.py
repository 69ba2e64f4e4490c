"""``for_project()``: a view of the long-term service bound to one project sees global entries and
its own, never another project's, and writes and deletes in its project only."""

from __future__ import annotations

import uuid

import pytest

from memray import MemoryEntry, SearchRequest
from memray.errors import ValidationError


def test_project_view_binds_the_service_to_one_project(mem, app):
    svc = mem.memory_service
    user = uuid.uuid4().hex
    web = svc.for_project("web")
    web.add_entries(
        app,
        user,
        [MemoryEntry(id="w1", content="the web app uses dark theme tokens")],
        session_id="s1",
        replace_session=True,
    )
    web.add_entry(app, user, MemoryEntry(id="w2", content="the web app deploys on fridays"))
    svc.add_entry(app, user, MemoryEntry(id="g1", content="I prefer a dark theme"))
    svc.for_project("cli").add_entry(app, user, MemoryEntry(id="c1", content="the cli has a dark theme flag"))

    found = web.search(SearchRequest(query="dark theme", user_id=user, app_name=app))
    assert {m.entry.id for m in found.memories} == {"w1", "g1"}  # global plus this project, never another
    assert {m.project_id for m in found.memories} == {"web", None}
    assert {m.entry.id for m in web.search({"query": "dark theme", "user_id": user, "app_name": app}).memories} == {
        "w1",
        "g1",
    }
    with pytest.raises(ValidationError, match="conflicts"):
        web.search(SearchRequest(query="x", user_id=user, app_name=app, project_id="cli"))
    assert web.delete_entries(app, user, "dark theme") == {"entries": 1, "vectors": 1}
    assert [m.entry.id for m in svc.list_entries(app, user)] == ["g1"]
    assert [m.entry.id for m in svc.for_project("web").list_entries(app, user)] == ["w2"]
    assert mem.internals.run(web.aadd_entry(app, user, "async works too")) != ""
