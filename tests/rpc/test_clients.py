"""Each typed client against its core: the same public methods with the same signatures, each
client method forwarding exactly its own name and its own arguments, and the call priorities the
store actor orders its queue by.

The cores are read independently of the clients (their public methods, by inspection), so a
method added to a core without its client method, a signature changed on one side only, or a
client method that sends another method's name fails here.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing
from collections.abc import Callable
from typing import Any

import pytest

from memray.conversation.client import HostClient
from memray.conversation.host import ConversationHost
from memray.index.client import ShardClient
from memray.index.recovery import RecoveringShard
from memray.rpc.client import Client, Priority
from memray.service.client import KeyRingClient
from memray.service.keys import KeyRing
from memray.store.client import StoreClient
from memray.store.history import HistoryStore

PAIRS: list[tuple[type[Client], type]] = [
    (StoreClient, HistoryStore),
    (ShardClient, RecoveringShard),
    (HostClient, ConversationHost),
    (KeyRingClient, KeyRing),
]
IDS = [client.__name__ for client, _ in PAIRS]


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """Every public method ``cls`` has (inherited ones too), properties and attributes aside."""
    return {name: member for name, member in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


def signature(fn: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    """(name, kind, default, resolved annotation) of each parameter after ``self``, then the return.
    Once a class has been made a Ray actor in this process, Ray has added a keyword parameter of
    its own (``_ray_trace_ctx``) to its methods and its bases' methods: not part of the core."""
    hints = typing.get_type_hints(fn)
    params = [p for p in list(inspect.signature(fn).parameters.values())[1:] if p.name != "_ray_trace_ctx"]
    out = [(p.name, p.kind, p.default, hints.get(p.name)) for p in params]
    return [*out, ("return", None, None, hints.get("return"))]


@pytest.mark.parametrize(("client", "core"), PAIRS, ids=IDS)
def test_a_client_has_every_public_method_of_its_core_and_no_other(client: type[Client], core: type) -> None:
    assert sorted(client.calls()) == sorted(public_methods(core))
    added = {name for name in vars(client) if not name.startswith("_")}  # what the client class itself defines
    assert added == set(public_methods(core))


@pytest.mark.parametrize(("client", "core"), PAIRS, ids=IDS)
def test_each_client_method_has_its_cores_signature(client: type[Client], core: type) -> None:
    for name, method in public_methods(core).items():
        assert inspect.iscoroutinefunction(getattr(client, name)), f"{client.__name__}.{name} is not async"
        assert signature(getattr(client, name)) == signature(method), (
            f"{client.__name__}.{name} differs from {core.__name__}"
        )


@pytest.mark.parametrize(("client", "core"), PAIRS, ids=IDS)
def test_each_client_method_forwards_its_own_name_and_arguments(client: type[Client], core: type) -> None:
    for name in client.calls():
        fn = inspect.unwrap(getattr(client, name))
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        (body,) = tree.body[0].body  # type: ignore[attr-defined]
        call = body.value.value  # return await self._call(...)
        assert isinstance(call, ast.Call) and ast.unparse(call.func) == "self._call", name
        sent = [ast.unparse(a) for a in call.args]
        assert ast.literal_eval(call.args[0]) == name, f"{client.__name__}.{name} sends {sent[0]}"
        params = list(inspect.signature(fn).parameters.values())[1:]
        positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        by_keyword = {k.arg: ast.unparse(k.value) for k in call.keywords}
        # each parameter once, in order: positionally, or as name=name
        assert sent[1:] == [p for p in positional if p not in by_keyword], name
        assert all(value == key for key, value in by_keyword.items()), name
        assert sorted([*sent[1:], *by_keyword]) == sorted(p.name for p in params), name


def test_store_priorities_put_commits_first_and_background_work_last() -> None:
    urgent = {n for n in StoreClient.calls() if StoreClient.options(n).priority is Priority.URGENT}
    background = {n for n in StoreClient.calls() if StoreClient.options(n).priority is Priority.BACKGROUND}
    assert {"append_messages", "commit_messages", "record_dead_letters", "resolve_acknowledged"} <= urgent
    assert {"put_embeddings", "scan_index_rows", "export_parquet", "index_digest"} <= background
    assert StoreClient.options("get_messages").priority is Priority.NORMAL
    assert not urgent & background


def test_only_host_writes_resend_with_retried() -> None:
    resent = {n: dict(HostClient.options(n).resend) for n in HostClient.calls() if HostClient.options(n).resend}
    assert resent == {"add": {"retried": True}, "add_many": {"retried": True}}
