"""A new user's mistakes each give one memray error that names the problem and the fix.

Validation runs in the caller before anything reaches a host, shard or store, so one in-process
memray is enough; the rules themselves live in ``memray.arguments`` and are shared with the
long-term service (``tests/service`` runs that in both modes).
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import math
import uuid
import warnings
from collections.abc import Iterator

import pydantic
import pytest

import memray
from memray.errors import CLOSED, ClosedError, ValidationError


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    m = memray.open(str(tmp_path_factory.mktemp("mistakes")), mode="inprocess", hosts=1, shards=1, debounce_ms=20)
    yield m
    m.close()


@pytest.fixture
def conv(mem: memray.Memory) -> memray.ConversationHandle:
    return mem.conversation(user_id="u1", conversation_id=uuid.uuid4().hex, app="mistakes")


def raises(fn, field: str) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        fn()
    assert info.value.field == field, str(info.value)
    assert not isinstance(info.value, pydantic.ValidationError)
    return info.value


# -- opening --------------------------------------------------------------------------------
def test_a_file_as_the_data_path_says_to_give_a_directory(tmp_path):
    file = tmp_path / "some-file"
    file.write_text("not a directory")
    err = raises(lambda: memray.open(str(file), mode="inprocess"), "path")
    assert str(err).startswith(f"invalid path={str(file)!r}: is a file, not a directory; give a directory")


@pytest.mark.parametrize(
    "kwargs,field,says",
    [
        (dict(mode="rya"), "mode", "invalid mode='rya': must be 'ray' or 'inprocess'; did you mean 'ray'?"),
        (dict(mode="inproces"), "mode", "did you mean 'inprocess'?"),
        (dict(modee="inprocess"), "modee", "unknown MemoryConfig option; did you mean 'mode'? options: path, mode,"),
        (dict(hosts=0), "hosts", "invalid hosts=0: must be greater than 0"),
        (
            dict(embedder={"kind": "hsh"}),
            "embedder.kind",
            "must be 'static', 'minilm', 'hash', 'openai', 'local', 'none' or 'custom'; did you mean 'hash'?",
        ),
        (dict(index={"mode": "semantic"}), "index.mode", "must be 'vector', 'lexical' or 'hybrid'"),
    ],
)
def test_configuration_mistakes_are_memray_errors_naming_the_option(tmp_path, kwargs, field, says):
    err = raises(lambda: memray.open(str(tmp_path / "m"), **kwargs), field)
    assert says in str(err)
    assert not (tmp_path / "m").exists()  # refused before anything was created
    raises(lambda: memray.MemoryConfig(**kwargs), field)  # the constructor says the same
    raises(lambda: memray.MemoryConfig.model_validate(kwargs), field)


def test_nested_configuration_mistakes_name_the_nested_option():
    err = raises(lambda: memray.EmbedderConfig(kind="opena"), "kind")
    assert "did you mean 'openai'?" in str(err)
    err = raises(lambda: memray.MemoryConfig(embedder={"kindd": "hash"}), "embedder.kindd")
    assert "unknown EmbedderConfig option; did you mean 'kind'?" in str(err)


# -- messages -------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["hello", b"hello", 42])
def test_add_of_a_non_message_says_what_a_message_looks_like(conv, value):
    err = raises(lambda: conv.add(value), "messages")
    assert f"must be a message or a list of messages, got {type(value).__name__}" in str(err)
    assert "{'role': 'user', 'content': '...'}" in str(err)
    assert conv.messages() == []


def test_a_string_inside_the_list_says_what_a_message_looks_like(conv):
    err = raises(lambda: conv.add(["hello"]), "message")
    assert "must be a Message or a dict, got str; e.g. {'role': 'user', 'content': 'hello'}" in str(err)


def test_a_message_without_a_role_names_the_role_not_the_message(conv):
    err = raises(lambda: conv.add({"content": "hi"}), "message.role")
    assert str(err) == "invalid message.role=<missing>: is required; give role: 'system', 'user', 'assistant' or 'tool'"
    assert err.value is memray.errors.MISSING
    err = raises(lambda: conv.add({"role": "user"}), "message.content")
    assert str(err).startswith("invalid message.content=<missing>: is required; give content: a string")
    err = raises(lambda: conv.add({"role": "bot", "content": "hi"}), "message.role")
    assert str(err) == "invalid message.role='bot': must be 'system', 'user', 'assistant' or 'tool'"
    assert conv.messages() == []


# -- the same rules everywhere ------------------------------------------------------------------
def limit_calls(mem: memray.Memory, conv: memray.ConversationHandle, **limit: object) -> dict[str, object]:
    """Every call that takes ``limit``, given ``limit`` (or not, when left out)."""
    svc = mem.memory_service
    return {
        "conv.search": lambda: conv.search("walnut", **limit),
        "conv.context": lambda: conv.context("walnut", **limit),
        "conv.messages": lambda: conv.messages(**limit),
        "mem.search_app": lambda: mem.search_app("mistakes", "walnut", **limit),
        "mem.list_conversations": lambda: mem.list_conversations("u1", app="mistakes", **limit),
        "svc.search": lambda: svc.search({"query": "walnut", "user_id": "u1", "app_name": "mistakes", **limit}),
        "svc.list_recent": lambda: svc.list_recent("mistakes", "u1", **limit),
    }


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "5"])
def test_limit_has_one_rule_for_every_call(mem, conv, value):
    for name, call in limit_calls(mem, conv, limit=value).items():
        err = raises(call, "limit")
        assert err.problem == "must be a positive integer or None", name
        assert str(err).startswith(f"invalid limit={value!r}: must be a positive integer or None; None means "), name


def add_walnuts(mem: memray.Memory, conv: memray.ConversationHandle, n: int = 12) -> None:
    """``n`` messages in ``conv`` and ``n`` long-term entries of user u1, all about walnuts, indexed."""
    conv.add([{"role": "user", "content": f"walnut {i}"} for i in range(n)])
    for i in range(n):
        mem.memory_service.add_entry("mistakes", "u1", f"walnut fact {i}")
    mem.flush()


def test_limit_none_means_the_calls_default(mem, conv):
    """None answers exactly as leaving ``limit`` out: all messages; the service's 10; a search's
    own default (5, fewer than the 12 that match)."""
    add_walnuts(mem, conv)
    left_out, none = limit_calls(mem, conv), limit_calls(mem, conv, limit=None)
    for name in left_out:
        assert none[name]() == left_out[name](), name
    assert len(none["conv.messages"]()) == 12
    assert len(none["svc.search"]().memories) == len(none["svc.list_recent"]()) == 10
    default = inspect.signature(conv.search).parameters["limit"].default
    assert len(none["conv.search"]()) == len(none["mem.search_app"]()) == default == 5
    assert none["conv.search"]() != conv.search("walnut", limit=3)  # the comparison sees a limit


def search_calls(
    mem: memray.Memory, conv: memray.ConversationHandle, query: str = "x", **kw: object
) -> dict[str, object]:
    svc = mem.memory_service
    return {
        "conv.search": lambda: conv.search(query, **kw),
        "mem.search_app": lambda: mem.search_app("mistakes", query, **kw),
        "svc.search": lambda: svc.search({"query": query, "user_id": "u1", "app_name": "mistakes", **kw}),
    }


def scored(result: object) -> list[tuple[str, float]]:
    """(id, score) of each hit of a search, whichever call made it."""
    hits = getattr(result, "memories", result)
    return [(hit.entry.id if hasattr(hit, "entry") else hit.message.id, hit.score) for hit in hits]


@pytest.mark.parametrize("value", [2, -1, 1.5, math.nan, math.inf, "0.5", True])
def test_min_score_is_none_or_a_number_in_0_1_everywhere(mem, conv, value):
    for name, call in search_calls(mem, conv, min_score=value).items():
        err = raises(call, "min_score")
        assert "must be a number in [0, 1] or None" in str(err), name


def test_min_score_keeps_exactly_the_hits_scored_at_or_above_it(mem, conv):
    """Its bounds are accepted, and everywhere it drops the hits below it and nothing else."""
    add_walnuts(mem, conv)
    unfiltered = {name: scored(call()) for name, call in search_calls(mem, conv, "walnut 3", limit=50).items()}
    for name, hits in unfiltered.items():
        assert any(score < 0.5 for _, score in hits) and any(score >= 0.5 for _, score in hits), (name, hits)
    for value in (0, 0.0, 0.5, 1, 1.0, None):
        for name, call in search_calls(mem, conv, "walnut 3", limit=50, min_score=value).items():
            kept = [(doc, score) for doc, score in unfiltered[name] if value is None or score >= value]
            assert scored(call()) == kept, (name, value)


@pytest.mark.parametrize("value", ["semantic", "HYBRID", 1])
def test_mode_is_vector_lexical_or_hybrid_everywhere(mem, conv, value):
    calls = {**search_calls(mem, conv, mode=value), "conv.context": lambda: conv.context("x", mode=value)}
    for name, call in calls.items():
        err = raises(call, "mode")
        assert str(err).endswith("unknown mode; use vector, lexical or hybrid"), name


def test_scope_merge_and_counts_name_the_argument(conv):
    err = raises(lambda: conv.search("x", scope="everyone"), "scope")
    assert str(err) == "invalid scope='everyone': unknown scope; use conversation or user"
    raises(lambda: conv.context("x", scope="everyone"), "scope")
    err = raises(lambda: conv.context("x", merge="zip"), "merge")
    assert str(err).endswith("use append, prepend or interleave")
    err = raises(lambda: conv.context("x", semantic_limit=-1), "semantic_limit")
    assert str(err) == "invalid semantic_limit=-1: must be an integer >= 0"
    err = raises(lambda: conv.context("x", token_budget=0), "token_budget")
    assert str(err).endswith("None means no budget")
    raises(lambda: conv.search(None), "query")  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["before_seq", "after_seq"])
@pytest.mark.parametrize("value", ["2", -1, True, 2.0])
def test_seq_cursors_are_non_negative_ints(conv, field, value):
    err = raises(lambda: conv.messages(**{field: value}), field)
    assert "must be a non-negative integer seq or None" in str(err)


def test_roles_are_a_list_of_role_names(conv):
    err = raises(lambda: conv.messages(roles="user"), "roles")
    assert "e.g. roles=['user', 'assistant']" in str(err)
    err = raises(lambda: conv.messages(roles=["user", "robot"]), "roles")
    assert "use system, user, assistant or tool" in str(err)


def test_list_conversations_order_and_offset(mem):
    err = raises(lambda: mem.list_conversations("u1", order="newest"), "order")
    assert "use updated_desc, updated_asc, created_desc, created_asc, title_asc or title_desc" in str(err)
    raises(lambda: mem.list_conversations("u1", offset=-1), "offset")


# -- a closed memray ------------------------------------------------------------------------------
def test_every_call_on_a_closed_memray_says_closed_the_same_way(tmp_path):
    mem = memray.open(str(tmp_path / "m"), mode="inprocess", hosts=1, shards=1)
    conv = mem.conversation(user_id="u", conversation_id="c")
    svc = mem.memory_service
    mem.close()
    calls = {
        "mem.conversation": lambda: mem.conversation(user_id="u", conversation_id="c"),
        "mem.memory_service": lambda: mem.memory_service,
        "conv.add": lambda: conv.add({"role": "user", "content": "hi"}),
        "conv.messages": lambda: conv.messages(),
        "conv.search": lambda: conv.search("hi"),
        "conv.context": lambda: conv.context("hi"),
        "conv.summary": lambda: conv.summary(),
        "conv.delete": lambda: conv.delete(),
        "conv.working_memory.get": lambda: conv.working_memory.get(),
        "svc.search": lambda: svc.search({"query": "x", "user_id": "u"}),
        "svc.add_entry": lambda: svc.add_entry("a", "u", "fact"),
        "mem.flush": mem.flush,
        "mem.search_app": lambda: mem.search_app("default", "hi"),
        "mem.delete_user": lambda: mem.delete_user(user_id="u"),
        "mem.export": mem.export,
        "conv.asearch": lambda: asyncio.run(conv.asearch("hi")),
        "conv.aadd": lambda: asyncio.run(conv.aadd({"role": "user", "content": "hi"})),
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, call in calls.items():
            with pytest.raises(ClosedError) as info:
                call()
            assert str(info.value) == CLOSED, name
        gc.collect()
    assert [str(w.message) for w in caught] == []  # no "coroutine ... was never awaited"
    mem.close()  # closing twice is fine
