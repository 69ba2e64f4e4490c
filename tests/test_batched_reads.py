"""Batched and coalesced reads answer exactly as the same calls made one by one.

``mem.context_many`` / ``mem.search_many`` (explicit batches) and concurrent ``acontext`` /
``asearch`` / ``aadd`` calls of one event loop (coalesced, :mod:`memray.facade.coalesce`) must
give each caller what its own call would have given at that point: the same messages, hits,
order, scores (to 1e-6: a batch of searches is scored together), degradation and errors.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memray
from memray.conversation.recall import CONTEXT_STEP
from memray.facade.conversation import ContextCall, SearchCall

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
WORDS = ["apple", "river", "violin", "tiger", "cloud", "sugar", "piano", "garden"]
CONVS = [("u0", "c0"), ("u0", "c1"), ("u1", "c0"), ("u1", "c1")]


#: ``Recall.step`` as each mode's open set it (the fixture then sets its own, in process)
STEP_AT_OPEN: dict[str, int | None] = {}


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    # a long debounce: nothing is indexed unless a step asks (wait_indexed), so the state the
    # three ways of reading see is the same (indexing in between would move messages from the
    # tails, scored in the caller, to the shards: the same hits, scores equal only to 1e-6)
    config = memray.MemoryConfig(
        path=str(tmp_path_factory.mktemp(f"batched-{request.param}")),
        mode=request.param,
        hosts=2,
        shards=2,
        debounce_ms=60_000,
    )
    m = memray.open(config=config)
    STEP_AT_OPEN[request.param] = m.internals.recall.step
    if request.param == "inprocess":
        m.internals.recall.step = 3  # contexts in steps of 3: a plan's small batches are split too
    yield m
    m.close(terminate=True)


texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
queries = st.one_of(texts, st.sampled_from(["nothing matches zzz", "piano?", "the tiger's river"]))
modes = st.sampled_from([None, "lexical", "vector", "hybrid"])
floors = st.sampled_from([None, 0.0, 0.3])
scopes = st.sampled_from(["conversation", "user"])
context_args = st.fixed_dictionaries(
    {
        "query": st.one_of(st.none(), queries),
        "limit": st.integers(1, 4),
        "semantic_limit": st.integers(0, 3),
        "merge": st.sampled_from(["append", "prepend", "interleave"]),
        "scope": scopes,
        "mode": modes,
        "min_score": floors,
    }
)
search_args = st.fixed_dictionaries(
    {"query": queries, "limit": st.integers(1, 5), "min_score": floors, "mode": modes, "scope": scopes}
)
reads = st.lists(
    st.tuples(
        st.integers(0, len(CONVS) - 1),
        st.one_of(context_args.map(lambda a: ("context", a)), search_args.map(lambda a: ("search", a))),
    ),
    min_size=1,
    max_size=8,
)
history = st.tuples(*(st.lists(texts, min_size=1, max_size=4) for _ in CONVS)).map(
    lambda said: [("add", c, t) for c, t in enumerate(said)] + [("index",)]
)
steps = st.tuples(
    history,
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.integers(0, len(CONVS) - 1), st.lists(texts, min_size=1, max_size=3)),
            st.tuples(st.just("delete"), st.integers(0, len(CONVS) - 1), st.integers(0, 3)),
            st.tuples(st.just("clear"), st.integers(0, len(CONVS) - 1)),
            st.tuples(st.just("index")),
            st.tuples(st.just("read"), reads),
        ),
        min_size=1,
        max_size=8,
    ),
    reads,
).map(lambda parts: [*parts[0], *parts[1], ("read", parts[2])])  # an indexed history, changes, reads

_apps = itertools.count()


def _same_search(a: memray.SearchResults, b: memray.SearchResults) -> None:
    assert [(h.conversation_id, h.message) for h in a] == [(h.conversation_id, h.message) for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-6)
    assert (a.degraded, a.reason) == (b.degraded, b.reason)


def _same(a: Any, b: Any) -> None:
    if isinstance(a, memray.SearchResults):
        _same_search(a, b)
    else:
        assert a == b


def _check_reads(mem: memray.Memory, handles: list[memray.ConversationHandle], batch: list[Any]) -> None:
    calls = [
        ContextCall(handles[c], **args) if kind == "context" else SearchCall(handles[c], **args)
        for c, (kind, args) in batch
    ]
    # one by one, each call alone (sync: a batch of one each)
    alone = [
        handles[c].context(**args) if kind == "context" else handles[c].search(**args) for c, (kind, args) in batch
    ]
    # explicit batches
    contexts = iter(mem.context_many([x for x in calls if isinstance(x, ContextCall)]))
    searches = iter(mem.search_many([x for x in calls if isinstance(x, SearchCall)]))
    batched = [next(contexts) if isinstance(x, ContextCall) else next(searches) for x in calls]

    # coalesced: every call its own coroutine, all at once
    async def concurrently() -> list[Any]:
        return list(
            await asyncio.gather(
                *(
                    handles[c].acontext(**args) if kind == "context" else handles[c].asearch(**args)
                    for c, (kind, args) in batch
                )
            )
        )

    coalesced = asyncio.run(concurrently())
    for one, together, merged in zip(alone, batched, coalesced):
        _same(together, one)
        _same(merged, one)


def run_steps(mem: memray.Memory, plan: list[tuple[Any, ...]]) -> None:
    app = f"batched{next(_apps)}"
    handles = [mem.conversation(user_id=u, conversation_id=c, app=app) for u, c in CONVS]
    ids: list[list[str]] = [[] for _ in CONVS]
    n = itertools.count()
    for step in plan:
        if step[0] == "add":
            _, c, said = step
            msgs = [{"id": f"m{next(n)}", "role": "user", "content": t} for t in said]
            handles[c].add(msgs)
            ids[c] += [m["id"] for m in msgs]
        elif step[0] == "delete":
            _, c, k = step
            gone, ids[c] = ids[c][:k], ids[c][k:]
            handles[c].delete_messages(gone)
            assert mem.wait_indexed(60)  # a delete writes what was pending: let its indexing end
        elif step[0] == "clear":
            handles[step[1]].clear()
            ids[step[1]] = []
            assert mem.wait_indexed(60)
        elif step[0] == "index":
            assert mem.wait_indexed(60)
        else:
            _check_reads(mem, handles, step[1])


def test_batched_and_coalesced_reads_answer_as_one_by_one(mem: memray.Memory) -> None:
    @settings(
        max_examples=30 if mem.config.mode == "inprocess" else 4,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(plan=steps)
    def check(plan: list[tuple[Any, ...]]) -> None:
        run_steps(mem, plan)

    check()


def test_in_process_a_batch_of_contexts_is_made_in_steps(mem: memray.Memory, monkeypatch: Any) -> None:
    """In one process the cores share memray's loop, so ``context_many`` makes its contexts a
    step at a time (the writes and indexing behind the adds run in between); in Ray mode at
    once. Either way each context is what it is alone (the plans above check that in steps of 3)."""
    assert STEP_AT_OPEN[mem.config.mode] == (CONTEXT_STEP if mem.config.mode == "inprocess" else None)
    recall = mem.internals.recall
    steps: list[int] = []
    step = recall._context_step

    async def counted(reads: list[Any]) -> list[Any]:
        steps.append(len(reads))
        return await step(reads)

    monkeypatch.setattr(recall, "_context_step", counted)
    convs = [mem.conversation(user_id=f"s{i}", conversation_id="c", app="batched-steps") for i in range(7)]
    mem.add_many([(c, [{"role": "user", "content": f"apple {i}"}]) for i, c in enumerate(convs)])
    contexts = mem.context_many([ContextCall(c, "apple") for c in convs])
    assert steps == ([3, 3, 1] if mem.config.mode == "inprocess" else [7])
    assert [c.messages for c in contexts] == [conv.context("apple").messages for conv in convs]


def test_a_bad_call_raises_before_anything_runs_naming_its_place(mem: memray.Memory) -> None:
    conv = mem.conversation(user_id="v", conversation_id="c", app="batched-bad")
    conv.add({"role": "user", "content": "apple"})
    with pytest.raises(memray.ValidationError) as err:
        mem.context_many([ContextCall(conv, "apple"), ContextCall(conv, "apple", limit=0)])
    assert err.value.field == "calls[1].limit"
    with pytest.raises(memray.ValidationError) as err:
        mem.search_many([SearchCall(conv, "apple", mode="fuzzy")])
    assert err.value.field == "calls[0].mode"
    with pytest.raises(memray.ValidationError) as err:
        mem.search_many([ContextCall(conv, "apple")])  # type: ignore[list-item]
    assert err.value.field == "calls[0]"
    assert mem.context_many([]) == [] and mem.search_many([]) == []


def test_concurrent_single_calls_of_one_loop_go_as_one_batch(mem: memray.Memory, monkeypatch: Any) -> None:
    recall, session = mem.internals.recall, mem.internals.session
    sizes: dict[str, list[int]] = {"context": [], "search": [], "add": []}
    for name, obj, method in (
        ("context", recall, "context_many"),
        ("search", recall, "search_many"),
        ("add", session, "add_each"),
    ):
        real = getattr(obj, method)

        def spy(batch: list[Any], real: Any = real, name: str = name) -> Any:
            sizes[name].append(len(batch))
            return real(batch)

        monkeypatch.setattr(obj, method, spy)
    handles = [mem.conversation(user_id=f"w{i}", conversation_id="c", app="batched-co") for i in range(20)]

    async def agents() -> list[Any]:
        seqs = await asyncio.gather(*(h.aadd({"role": "user", "content": f"piano {i}"}) for i, h in enumerate(handles)))
        ctxs = await asyncio.gather(*(h.acontext("piano", limit=1, semantic_limit=1) for h in handles))
        hits = await asyncio.gather(*(h.asearch("piano") for h in handles))
        return [seqs, ctxs, hits]

    seqs, ctxs, hits = asyncio.run(agents())
    assert sizes == {"context": [20], "search": [20], "add": [20]}
    assert seqs == [[1]] * 20
    assert all(c.messages[-1].text == f"piano {i}" for i, c in enumerate(ctxs))
    assert [h[0].message.text for h in hits] == [f"piano {i}" for i in range(20)]


def test_a_failing_call_fails_alone_and_return_exceptions_keeps_its_place(mem: memray.Memory, monkeypatch: Any) -> None:
    """A host that fails answers its conversations' contexts with its error; the others answer."""
    good = mem.conversation(user_id="x0", conversation_id="c", app="batched-fail")
    bad = next(
        mem.conversation(user_id=f"x{i}", conversation_id="c", app="batched-fail")
        for i in range(1, 50)
        if mem.internals.host_for(mem.conversation(user_id=f"x{i}", conversation_id="c", app="batched-fail").key)
        is not mem.internals.host_for(good.key)
    )
    good.add({"role": "user", "content": "sugar"})
    failing = mem.internals.host_for(bad.key)

    async def broken(requests: Any) -> Any:
        raise memray.UnavailableError(failing.label, "test: down")

    monkeypatch.setattr(failing, "recent_many", broken)
    calls = [ContextCall(good, "sugar"), ContextCall(bad, "sugar")]
    answers = mem.context_many(calls, return_exceptions=True)
    assert answers[0].messages[-1].text == "sugar"
    assert isinstance(answers[1], memray.UnavailableError)
    with pytest.raises(memray.UnavailableError):
        mem.context_many(calls)
    with pytest.raises(memray.UnavailableError):
        bad.context("sugar")

    async def both() -> list[Any]:
        return list(await asyncio.gather(good.acontext("sugar"), bad.acontext("sugar"), return_exceptions=True))

    ok, failed = asyncio.run(both())
    assert ok == answers[0] and isinstance(failed, memray.UnavailableError)
