"""LangGraph: `MemrayStore` as the store of a compiled graph (sync and async), the BaseStore
behaviour LangGraph documents — checked against LangGraph's own ``InMemoryStore`` too, so the
contract tests encode LangGraph's behaviour — and what the scope mapping guarantees."""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore  # noqa: E402

import memray  # noqa: E402
from memray.integrations.langgraph import MemrayStore  # noqa: E402


class Turn(TypedDict, total=False):
    user: str
    text: str
    recalled: list[str]


def remember_and_recall(state: Turn, runtime: Runtime) -> Turn:
    """A node that reads the user's memories relevant to the turn, then stores the turn."""
    namespace = ("memories", state["user"])
    hits = runtime.store.search(namespace, query=state["text"], limit=3)
    runtime.store.put(namespace, f"turn-{time.monotonic_ns()}", {"text": state["text"]})
    return {"recalled": [h.value["text"] for h in hits]}


async def aremember_and_recall(state: Turn, runtime: Runtime) -> Turn:
    namespace = ("memories", state["user"])
    hits = await runtime.store.asearch(namespace, query=state["text"], limit=3)
    await runtime.store.aput(namespace, f"turn-{time.monotonic_ns()}", {"text": state["text"]})
    return {"recalled": [h.value["text"] for h in hits]}


def graph_with(node: Any, store: BaseStore) -> Any:
    builder = StateGraph(Turn)
    builder.add_node("memory", node)
    builder.add_edge(START, "memory")
    builder.add_edge("memory", END)
    return builder.compile(store=store)


@pytest.fixture
def store(mem: memray.Memory, app: str) -> MemrayStore:
    return MemrayStore(mem, app=app, user_label=1)


# -- a graph whose node reads and writes the store ---------------------------------------------------
def test_a_graph_node_recalls_what_an_earlier_run_stored(store):
    graph = graph_with(remember_and_recall, store)
    assert graph.invoke({"user": "ada", "text": "I am vegetarian and fly to Lisbon"})["recalled"] == []
    graph.invoke({"user": "ada", "text": "my locker code is 4471"})
    later = graph.invoke({"user": "ada", "text": "which meals: am I vegetarian?"})
    assert later["recalled"][0] == "I am vegetarian and fly to Lisbon"
    assert graph.invoke({"user": "bob", "text": "am I vegetarian?"})["recalled"] == []  # other user, other scope


def test_an_async_graph_uses_abatch(store):
    async def scenario() -> None:
        graph = graph_with(aremember_and_recall, store)
        await graph.ainvoke({"user": "cy", "text": "allergic to peanuts"})
        out = await graph.ainvoke({"user": "cy", "text": "any peanuts allergy?"})
        assert out["recalled"][0] == "allergic to peanuts"

    asyncio.run(scenario())


# -- BaseStore's documented behaviour, on memray and on LangGraph's in-memory reference --------------
@pytest.fixture(params=["memray", "langgraph-in-memory"])
def any_store(request: pytest.FixtureRequest, mem: memray.Memory, app: str) -> BaseStore:
    return MemrayStore(mem, app=app) if request.param == "memray" else InMemoryStore()


def test_contract_put_get_update_delete(any_store):
    ns = ("docs", "u1")
    assert any_store.get(ns, "a") is None
    any_store.put(ns, "a", {"text": "first", "n": 1})
    first = any_store.get(ns, "a")
    assert (first.namespace, first.key, first.value) == (ns, "a", {"text": "first", "n": 1})
    any_store.put(ns, "a", {"text": "second", "n": 2})
    second = any_store.get(ns, "a")
    assert second.value == {"text": "second", "n": 2}
    assert second.updated_at >= first.updated_at
    assert any_store.get(("docs",), "a") is None and any_store.get(("docs", "u2"), "a") is None
    any_store.delete(ns, "a")
    assert any_store.get(ns, "a") is None
    any_store.delete(ns, "never-there")  # deleting nothing is fine


def test_contract_search_filters_and_pages_under_a_prefix(any_store):
    for i in range(5):
        any_store.put(("shop", "fruit"), f"f{i}", {"kind": "fruit", "price": i, "tags": {"ripe": i % 2 == 0}})
    any_store.put(("shop", "veg"), "v0", {"kind": "veg", "price": 10, "tags": {"ripe": True}})
    any_store.put(("other",), "o0", {"kind": "fruit", "price": 1})

    def keys(**kw: Any) -> set[str]:
        return {i.key for i in any_store.search(("shop",), **kw)}

    assert keys() == {"f0", "f1", "f2", "f3", "f4", "v0"}
    assert keys(filter={"kind": "veg"}) == {"v0"}
    assert keys(filter={"price": {"$gte": 3}}) == {"f3", "f4", "v0"}
    assert keys(filter={"price": {"$gt": 1, "$lt": 4}}) == {"f2", "f3"}
    assert keys(filter={"kind": {"$ne": "fruit"}}) == {"v0"}
    assert keys(filter={"tags": {"ripe": False}}) == {"f1", "f3"}
    pages = [any_store.search(("shop", "fruit"), limit=2, offset=o) for o in (0, 2, 4)]
    assert [len(p) for p in pages] == [2, 2, 1]
    assert {i.key for p in pages for i in p} == {"f0", "f1", "f2", "f3", "f4"}
    assert all(i.score is None for p in pages for i in p)


def test_contract_list_namespaces(any_store):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]:
        any_store.put(ns, "k", {"v": 1})
    assert any_store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]
    assert any_store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "x")]
    assert any_store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("z", "b", "c")]
    assert any_store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("z", "b", "c")]
    assert any_store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b")]
    assert any_store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]


def test_a_namespace_whose_last_item_is_deleted_is_no_longer_listed(store):
    # InMemoryStore keeps listing emptied namespaces (a dict it never prunes); a database-backed
    # store lists the namespaces that hold items, and so does memray.
    store.put(("gone", "ada"), "k", {"v": 1})
    store.put(("kept", "ada"), "k", {"v": 1})
    store.delete(("gone", "ada"), "k")
    assert store.list_namespaces() == [("kept", "ada")]


def test_contract_batch_answers_each_op_in_order(any_store):
    ns = ("batch",)
    any_store.batch([PutOp(ns, "k1", {"v": 1}), PutOp(ns, "k2", {"v": 2})])
    results = any_store.batch(
        [
            GetOp(ns, "k1"),
            SearchOp(ns, filter={"v": 2}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ns),)),
            PutOp(ns, "k1", None),
            PutOp(ns, "k3", {"v": 3}),
        ]
    )
    assert results[0].value == {"v": 1}
    assert [i.key for i in results[1]] == ["k2"]
    assert results[2] == [ns]
    assert results[3] is None and results[4] is None
    assert any_store.get(ns, "k1") is None and any_store.get(ns, "k3").value == {"v": 3}


def test_a_read_sees_the_writes_before_it_in_the_same_batch(store):
    # LangGraph leaves this open (InMemoryStore answers reads before applying the batch's puts);
    # memray runs a batch in order.
    ns = ("batch", "ada")
    results = store.batch(
        [
            PutOp(ns, "k", {"v": 1}),
            GetOp(ns, "k"),
            PutOp(ns, "k", {"v": 2}),
            PutOp(ns, "k", {"v": 3}),
            SearchOp(ns),
            PutOp(ns, "k", None),
            GetOp(ns, "k"),
        ]
    )
    assert results[1].value == {"v": 1}
    assert [i.value for i in results[4]] == [{"v": 3}]
    assert results[6] is None


@pytest.mark.parametrize("namespace", [(), ("",), ("a.b",), ("langgraph", "x"), ("ok", 3)])
def test_contract_invalid_namespaces_are_rejected(any_store, namespace):
    with pytest.raises(InvalidNamespaceError):
        any_store.put(namespace, "k", {"v": 1})


def test_contract_ttl_is_refused_when_unsupported(mem, app):
    store = MemrayStore(mem, app=app)
    assert store.supports_ttl is False
    with pytest.raises(NotImplementedError):
        store.put(("t",), "k", {"v": 1}, ttl=5)


# -- semantic search through memray's retrieval -------------------------------------------------------
def test_query_ranks_relevant_items_first_and_applies_filter_and_paging(store):
    ns = ("notes", "ada")
    store.put(ns, "diet", {"text": "Ada is vegetarian and avoids fish", "kind": "pref"})
    store.put(ns, "trip", {"text": "Ada flies to Lisbon on 12 May", "kind": "plan"})
    store.put(ns, "gym", {"text": "Ada lifts weights on Mondays", "kind": "habit"})
    hits = store.search(ns, query="is she vegetarian?")
    assert hits[0].key == "diet"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True) and hits[0].score > 0
    assert [h.key for h in store.search(ns, query="Lisbon flight", filter={"kind": "plan"})] == ["trip"]
    assert store.search(ns, query="vegetarian Lisbon weights", filter={"kind": "nope"}) == []
    both = store.search(ns, query="Ada vegetarian Lisbon", limit=2)
    assert store.search(ns, query="Ada vegetarian Lisbon", limit=1, offset=1)[0].key == both[1].key


def test_index_fields_and_index_false(store):
    ns = ("cfg", "bo")
    store.put(ns, "indexed", {"title": "orchid care", "body": "water weekly"}, index=["title"])
    store.put(ns, "hidden", {"title": "orchid secret"}, index=False)
    assert [h.key for h in store.search(ns, query="orchid")] == ["indexed"]
    assert {h.key for h in store.search(ns)} == {"indexed", "hidden"}  # listing still shows it
    assert store.get(ns, "hidden").value == {"title": "orchid secret"}


def test_created_at_survives_an_update(store):
    ns = ("ts", "cy")
    store.put(ns, "k", {"v": 1})
    first = store.get(ns, "k")
    store.put(ns, "k", {"v": 2})
    second = store.get(ns, "k")
    assert second.created_at == first.created_at and second.updated_at > first.updated_at


# -- the scope mapping: deterministic, collision-free, erasable per user ------------------------------
def test_namespaces_that_look_alike_never_collide(mem, app):
    store = MemrayStore(mem, app=app)
    tricky = [("a", "b"), ("a,b",), ('["a","b"]',), ("a",), ("a", "b", "c"), ('a"', "b"), ("日本", "語")]
    for i, ns in enumerate(tricky):
        store.put(ns, "same-key", {"i": i})
    assert [store.get(ns, "same-key").value["i"] for ns in tricky] == list(range(len(tricky)))
    assert sorted(store.list_namespaces()) == sorted(tricky)
    assert {i.namespace for i in store.search(("a",))} == {("a",), ("a", "b"), ("a", "b", "c")}
    assert {i.namespace for i in store.search(("a", "b"))} == {("a", "b"), ("a", "b", "c")}


def test_user_label_maps_namespaces_onto_memray_users_and_erasure_removes_them(mem, app):
    store = MemrayStore(mem, app=app, user_label=1)
    store.put(("memories", "ada"), "k", {"text": "ada's locker code is 4471"})
    store.put(("profile", "ada", "v2"), "k", {"name": "Ada"})
    store.put(("memories", "bob"), "k", {"text": "bob likes tea"})
    assert mem.memory_service.list_projects(app) == [
        ("ada", '["memories","ada"]'),
        ("ada", '["profile","ada","v2"]'),
        ("bob", '["memories","bob"]'),
    ]
    assert {i.namespace for i in store.search(("memories",))} == {("memories", "ada"), ("memories", "bob")}
    with pytest.raises(InvalidNamespaceError, match="user_label=1"):
        store.put(("memories",), "k", {"v": 1})
    assert store.get(("memories",), "k") is None

    mem.delete_user(app=app, user_id="ada")
    assert mem.verify_deleted(app=app, user_id="ada").clean
    assert store.get(("memories", "ada"), "k") is None and store.get(("profile", "ada", "v2"), "k") is None
    assert store.list_namespaces() == [("memories", "bob")]
    assert store.get(("memories", "bob"), "k").value == {"text": "bob likes tea"}


def test_a_namespace_too_long_for_a_project_id_is_rejected_before_writing(mem, app):
    store = MemrayStore(mem, app=app)
    with pytest.raises(InvalidNamespaceError, match="256"):
        store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(("x" * 300,), "k", {"v": 1})])
    assert store.get(("ok",), "k") is None


def test_pages_of_a_listing_never_overlap_even_when_items_share_a_timestamp(mem, app):
    store = MemrayStore(mem, app=app)
    store.batch([PutOp(("p", str(i % 2)), f"k{i}", {"i": i}) for i in range(16)])  # one write time for all
    pages = [store.search(("p",), limit=2, offset=o) for o in range(0, 18, 2)]
    keys = [i.key for page in pages for i in page]
    assert sorted(keys) == sorted(f"k{i}" for i in range(16)) and len(keys) == 16
    assert store.search(("p",), limit=0) == []
