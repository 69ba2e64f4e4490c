"""Each typed client against its core.

A client's calls are derived from its core's methods (:func:`memray.rpc.client.remote`), so a
signature cannot differ between the two: what can still go wrong is a core method without its
client line, a line that names another method, a route that reads a parameter its method lacks,
or a call sent under another name. Each of those fails here (the first three already when the
module that declares them is imported), and so does a priority moved off the calls that need it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memray.conversation.client import HostClient
from memray.conversation.host import ConversationHost
from memray.ids import ConversationKey
from memray.index.client import ShardClient
from memray.index.recovery import RecoveringShard
from memray.rpc.client import Client, Priority, public_methods, remote
from memray.service.client import KeyRingClient
from memray.service.keys import KeyRing
from memray.store.client import StoreCalls, StoreClient
from memray.store.history import HistoryStore
from memray.store.routing import by_key, route, route_of, split

PAIRS: list[tuple[type[Client], type]] = [
    (StoreClient, HistoryStore),
    (ShardClient, RecoveringShard),
    (HostClient, ConversationHost),
    (KeyRingClient, KeyRing),
]
IDS = [client.__name__ for client, _ in PAIRS]


@pytest.mark.parametrize(("client", "core"), PAIRS, ids=IDS)
def test_a_client_calls_every_public_method_of_its_core_and_no_other(client: type[Client], core: type) -> None:
    methods = public_methods(core)
    assert client.calls() == sorted(methods)
    assert all(client.remotes()[name].method is method for name, method in methods.items())


class Recording:
    """An ActorRef that answers every call with what it was sent."""

    label = "recording"

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        return method, args, kwargs


@pytest.mark.parametrize(("client", "core"), PAIRS, ids=IDS)
def test_each_call_sends_its_own_name_and_its_arguments_as_given(client: type[Client], core: type) -> None:
    view = client(Recording())
    for name in client.calls():
        sent = asyncio.run(getattr(view, name)(1, "two", three=3))
        assert sent == (name, (1, "two"), {"three": 3})


def test_a_client_missing_a_call_or_naming_another_fails_when_it_is_defined() -> None:
    with pytest.raises(TypeError, match=r"missing \[.*'pid'"):

        class Partial(Client, core=HistoryStore):
            open = remote(HistoryStore.open)

    with pytest.raises(TypeError, match="keeps its core method's name"):

        class Renamed(StoreClient):
            opened = remote(HistoryStore.open)

    calls = {name: remote(getattr(HistoryStore, name)) for name in StoreClient.calls()}
    calls["ping"] = remote(RecoveringShard.ping)  # the shard's ping, not the store's
    with pytest.raises(TypeError, match=r"another class's \['ping'\]"):
        type("Stranger", (Client,), calls, core=HistoryStore)


def test_a_route_that_reads_a_parameter_its_method_lacks_cannot_be_bound() -> None:
    def count(self: object, app: str, user_id: str) -> int:
        return 0

    with pytest.raises(TypeError, match="no parameter 'key'"):
        by_key.bind(count)
    with pytest.raises(TypeError, match="no parameter 'rows'"):
        split("rows", lambda r: r, list).bind(route(by_key)(count))


def test_the_calls_every_store_answers_are_exactly_the_routed_ones() -> None:
    routed = {name for name, method in public_methods(HistoryStore).items() if route_of(method) is not None}
    assert set(StoreCalls.calls()) == routed
    assert set(StoreClient.calls()) - routed == {
        "pid",
        "write_stats",
        "scan_index_rows",
        "put_entries",
        "fork_to",
        "version",
        "changed_refs",
        "table_counts",
        "export_parquet",
        "purge_exports",
    }


def test_store_priorities_put_commits_first_and_background_work_last() -> None:
    urgent = {n for n in StoreClient.calls() if StoreClient.options(n).priority is Priority.URGENT}
    background = {n for n in StoreClient.calls() if StoreClient.options(n).priority is Priority.BACKGROUND}
    assert {"append_messages", "commit_messages", "record_dead_letters", "resolve_acknowledged"} <= urgent
    assert {"put_embeddings", "scan_index_rows", "export_parquet", "index_digest"} <= background
    assert StoreClient.options("get_messages").priority is Priority.NORMAL
    assert not urgent & background


def test_short_reads_are_declared_on_the_cores() -> None:
    assert StoreClient.short_reads() == {"context_extras"}
    assert ShardClient.short_reads() == {"ping", "search", "search_many", "search_user"}


def test_only_host_writes_resend_with_retried() -> None:
    resent = {n: dict(HostClient.options(n).resend) for n in HostClient.calls() if HostClient.options(n).resend}
    assert resent == {"add": {"retried": True}, "add_many": {"retried": True}}


def test_a_partitioned_call_goes_to_its_users_partition() -> None:
    from memray.store.partitions import StorePartitions

    key = ConversationKey("app", "ada", "c1")
    clients = [StoreClient(Recording()) for _ in range(3)]
    sent = asyncio.run(StorePartitions(clients).get_messages(key))
    assert sent == ("get_messages", (key,), {})
