"""Every id argument of every public call is validated: a walk over the public API's signatures.

The walk takes each public method (sync and async twin) of the objects a user holds — the
``Memory``, its conversation and working-memory handles, the long-term service and its project
view, and the framework integrations — finds every parameter that carries an id (by name: see
``ID_NAMES``; or a collection of ids: ``ID_COLLECTIONS``), and calls the method once per such
parameter with that one argument wrong (``None`` where the parameter does not allow it, a number,
or a collection holding one) and every other argument valid. Each call must raise memray's
:class:`~memray.errors.ValidationError` naming the parameter, before anything is written.

A method added later is walked the same way: if it takes a required argument this file has no
valid sample for, the walk fails and asks for one (``SAMPLES``), so no new id can slip past.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memray
from memray import MemoryEntry, SearchRequest

pytest.importorskip("google.adk")
pytest.importorskip("langgraph")
pytest.importorskip("agents")

from google.adk.sessions import Session  # noqa: E402
from langgraph.store.base import InvalidNamespaceError  # noqa: E402

from memray.integrations.adk import MemrayMemoryService  # noqa: E402
from memray.integrations.langgraph import MemrayStore  # noqa: E402
from memray.integrations.openai_agents import MemraySession  # noqa: E402

#: Parameters that carry one id, whatever their annotation says (``str`` or ``str | None``).
ID_NAMES = frozenset(
    {
        "app",
        "app_name",
        "user_id",
        "conversation_id",
        "session_id",
        "project_id",
        "memory_id",
        "agent_id",
        "sub_agent_id",
    }
)
# (LangGraph's ``BaseStore.get/put/delete`` turn ``key`` into ``str(key)`` before memray sees it:
# its own contract. A raw ``batch`` op with a key that is no string is refused: tested below.)
#: Parameters that carry a collection of ids.
ID_COLLECTIONS = frozenset({"ids", "project_ids", "namespace", "namespace_prefix"})


def _samples(mem: memray.Memory, tmp: Path) -> dict[str, Callable[[], Any]]:
    """A valid value for each required parameter the walked methods take (a factory each, so a
    call that consumes or changes its argument never affects the next)."""
    return {
        "app": lambda: "app",
        "app_name": lambda: "app",
        "user_id": lambda: "u",
        "conversation_id": lambda: "c",
        "session_id": lambda: "s",
        "project_id": lambda: "p",
        "memory_id": lambda: "m",
        "key": lambda: "k",
        "ids": lambda: ["m"],
        "project_ids": lambda: ["p"],
        "namespace": lambda: ("u", "notes"),
        "namespace_prefix": lambda: ("u",),
        "entry": lambda: MemoryEntry(content="x"),
        "entries": lambda: [MemoryEntry(content="x")],
        "messages": lambda: [{"role": "user", "content": "x"}],
        "query": lambda: "x",
        "request": lambda: SearchRequest(query="x", user_id="u", app_name="app"),
        "content": lambda: "x",
        "value": lambda: {"text": "x"},
        "events": lambda: [],
        "memories": lambda: [],
        "items": lambda: [],
        "memory": lambda: mem,
    }


def _objects(mem: memray.Memory) -> Iterator[tuple[str, Any]]:
    conv = mem.conversation(user_id="u", conversation_id="c", app="app")
    svc = mem.memory_service
    yield "Memory", mem
    yield "ConversationHandle", conv
    yield "WorkingMemoryHandle", conv.working_memory
    yield "MemoryServiceHandle", svc
    yield "ProjectView", svc.for_project("p")
    yield "MemrayMemoryService", MemrayMemoryService(mem)
    yield "MemrayStore", MemrayStore(mem, user_label=0)
    yield "MemraySession", MemraySession("s", mem, user_id="u", app="app")


def _is_id(param: inspect.Parameter) -> bool:
    return param.name in ID_NAMES or param.name in ID_COLLECTIONS


def _wrong(param: inspect.Parameter) -> list[Any]:
    """The wrong values to feed ``param``: None (unless None means something: "not given", or
    "global entries" in a list of projects), a number; for a collection, one holding each."""
    none_allowed = param.default is None or "None" in str(param.annotation)
    wrong = [7] if none_allowed else [None, 7]
    if param.name in ID_COLLECTIONS:
        return [(v,) if "tuple" in str(param.annotation) else [v] for v in wrong]
    return wrong


def _calls(mem: memray.Memory, tmp: Path) -> Iterator[tuple[str, Callable[..., Any], inspect.Signature]]:
    for owner, obj in _objects(mem):
        for name, fn in inspect.getmembers(obj, callable):
            if name.startswith("_") or inspect.isclass(fn):
                continue
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                continue
            if any(_is_id(p) for p in sig.parameters.values()):
                yield f"{owner}.{name}", fn, sig
    for owner, cls in (("MemrayMemoryService", MemrayMemoryService), ("MemrayStore", MemrayStore)):
        yield f"{owner}()", cls, inspect.signature(cls)
    yield "MemraySession()", MemraySession, inspect.signature(MemraySession)


def _run(result: Any) -> Any:
    return asyncio.run(result) if inspect.isawaitable(result) else result


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    with memray.open(str(tmp_path_factory.mktemp("ids") / "m"), mode="inprocess", hosts=1, shards=1) as m:
        yield m


def test_every_id_argument_of_every_public_call_is_validated(mem: memray.Memory, tmp_path: Path) -> None:
    samples = _samples(mem, tmp_path)
    accepted: list[str] = []
    walked = 0
    for where, fn, sig in _calls(mem, tmp_path):
        params = [
            p for p in sig.parameters.values() if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        missing = [p.name for p in params if p.default is p.empty and p.name not in samples]
        assert not missing, f"{where} takes {missing}: add a valid sample for them to SAMPLES"
        for bad in (p for p in params if _is_id(p)):
            for value in _wrong(bad):
                args = {p.name: samples[p.name]() for p in params if p.default is p.empty}
                args[bad.name] = value
                positional = [args.pop(p.name) for p in params if p.kind is p.POSITIONAL_ONLY and p.name in args]
                walked += 1
                try:
                    _run(fn(*positional, **args))
                except InvalidNamespaceError:  # LangGraph checks its namespaces' labels itself
                    assert bad.name.startswith("namespace"), (where, bad.name)
                    continue
                except memray.ValidationError as exc:
                    if bad.name not in ID_COLLECTIONS and bad.name not in str(exc):
                        accepted.append(f"{where}({bad.name}={value!r}) refused without naming it: {exc}")
                    continue
                except Exception as exc:  # not memray's error: a crash, not a refusal
                    accepted.append(f"{where}({bad.name}={value!r}) raised {type(exc).__name__}: {exc}")
                    continue
                accepted.append(f"{where}({bad.name}={value!r}) was accepted")
    assert walked > 150, walked  # the walk reached the API (a rename cannot empty it silently)
    assert not accepted, "\n".join(accepted)


def test_an_adk_session_with_a_bad_id_is_refused(mem: memray.Memory) -> None:
    """ADK hands the service a Session object: its ids are checked like arguments."""
    service = MemrayMemoryService(mem)
    for field in ("app_name", "user_id", "id"):
        ids: dict[str, Any] = {"app_name": "app", "user_id": "u", "id": "s"}
        session = Session.model_construct(**{**ids, field: None}, events=[], state={}, last_update_time=0.0)
        with pytest.raises(memray.ValidationError):
            asyncio.run(service.add_session_to_memory(session))


def test_a_langgraph_op_whose_key_is_not_a_string_is_refused(mem: memray.Memory) -> None:
    from langgraph.store.base import GetOp, PutOp

    store = MemrayStore(mem, user_label=0)
    for op in (GetOp(("u",), None), PutOp(("u",), 7, {"text": "x"})):  # type: ignore[arg-type]
        with pytest.raises(memray.InvalidIdError, match="key"):
            store.batch([op])
