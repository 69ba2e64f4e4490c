"""Property: random adds, searches and deletes across 2 apps x 2 users x 2 projects never show an
entry outside the searched scope, and lexical results are exactly the in-scope entries that hold
the word (checked against a plain dict model). In-process mode only, for speed."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memray
from memray import MemoryEntry, SearchRequest

WORDS = ("apple", "kiwi", "plum", "fig")
APPS, USERS, PROJECTS = (0, 1), ("u0", "u1"), (None, "p0", "p1")

scope = st.tuples(st.sampled_from(APPS), st.sampled_from(USERS), st.sampled_from(PROJECTS))
words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=2)
op = st.one_of(
    st.tuples(st.just("add"), scope, words),
    st.tuples(st.just("add_session"), scope, st.sampled_from(("s0", "s1")), st.lists(words, max_size=3)),
    st.tuples(st.just("search"), scope, st.sampled_from(WORDS), st.sampled_from(("lexical", "vector", "hybrid"))),
    st.tuples(st.just("delete_entries"), scope, st.sampled_from(WORDS)),
    st.tuples(st.just("delete_project"), scope),
    st.tuples(st.just("delete_session"), scope, st.sampled_from(("s0", "s1"))),
)


@dataclass
class Row:
    app: int
    user: str
    project: str | None
    session: str | None
    text: str


class Model:
    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}
        self.ids = itertools.count()

    def visible(self, app: int, user: str, project: str | None) -> dict[str, Row]:
        return {i: r for i, r in self.rows.items() if r.app == app and r.user == user and r.project in {None, project}}

    def drop(self, keep: object) -> None:
        self.rows = {i: r for i, r in self.rows.items() if keep(r)}  # type: ignore[operator]


@pytest.fixture(scope="module")
def inproc(tmp_path_factory: pytest.TempPathFactory):
    m = memray.open(
        config=memray.MemoryConfig(path=str(tmp_path_factory.mktemp("iso")), mode="inprocess", hosts=1, shards=2)
    )
    yield m
    m.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=14))
def test_no_operation_sequence_leaks_across_scopes(inproc, ops):
    svc = inproc.memory_service
    prefix = uuid.uuid4().hex[:10]
    app_name = {a: f"{prefix}-{a}" for a in APPS}
    model = Model()
    for item in ops:
        kind, (a, u, p) = item[0], item[1]
        app = app_name[a]
        if kind == "add":
            eid, text = f"e{next(model.ids)}", " ".join(item[2])
            if p is None:
                svc.add_entry(app, u, MemoryEntry(id=eid, content=text))
            else:
                svc.for_project(p).add_entry(app, u, MemoryEntry(id=eid, content=text))
            model.rows[eid] = Row(a, u, p, None, text)
        elif kind == "add_session":
            session, texts = item[2], [" ".join(ws) for ws in item[3]]
            entries = [MemoryEntry(id=f"e{next(model.ids)}", content=t) for t in texts]
            if p is None:
                svc.add_entries(app, u, entries, session_id=session, replace_session=True)
            else:
                svc.for_project(p).add_entries(app, u, entries, session_id=session, replace_session=True)
            model.drop(lambda r: not (r.app == a and r.user == u and r.session == session))
            model.rows.update({e.id: Row(a, u, p, session, e.text) for e in entries})
        elif kind == "search":
            word, mode = item[2], item[3]
            floor = None if mode == "lexical" else 0.0  # vector/hybrid: no relevance floor, every item ranks
            resp = svc.search(
                SearchRequest(query=word, user_id=u, app_name=app, project_id=p, mode=mode, limit=100, min_score=floor)
            )
            got = {r.entry.id for r in resp.memories}
            visible = model.visible(a, u, p)
            assert got <= set(visible), f"leak: {got - set(visible)}"
            for r in resp.memories:
                assert r.project_id in {None, p}
            if mode == "lexical":
                assert got == {i for i, r in visible.items() if word in r.text.split()}
            else:
                assert got == set(visible)  # vector/hybrid rank every in-scope entry (limit 100)
        elif kind == "delete_entries":
            word = item[2]
            if p is None:
                svc.delete_entries(app, u, word)
            else:
                svc.for_project(p).delete_entries(app, u, word)
            model.drop(lambda r: not (r.app == a and r.user == u and r.project == p and word in r.text.split()))
        elif kind == "delete_project":
            if p is not None:
                svc.for_project(p).delete_entries(app, u, everything=True)
                model.drop(lambda r: not (r.app == a and r.user == u and r.project == p))
        elif kind == "delete_session":
            svc.delete_entries(app, u, session_id=item[2])
            model.drop(lambda r: not (r.app == a and r.user == u and r.session == item[2]))
    for a, u in itertools.product(APPS, USERS):  # the end state, every scope, every word
        stored = inproc.internals.run(
            inproc.internals.deployment.stores.list_entries(app_name[a], u, None, None, True, None)
        )
        assert {r.id for r in stored} == {i for i, r in model.rows.items() if r.app == a and r.user == u}
