"""Shard recovery without Ray: a RecoveringShard and a ShardKeeper against a real DuckDB store,
each behind its client over an in-process ref (calls serialised on its own thread, as on an actor)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memray.config import IndexConfig
from memray.errors import UnavailableError
from memray.ids import ConversationKey, Namespace, conversation_namespace, user_hash
from memray.index import IndexItem
from memray.index.client import ShardClient
from memray.index.keeper import ShardKeeper, level_shard
from memray.index.recovery import RecoveringShard
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.partitions import StorePartitions
from memray.store.rows import EmbeddingRow
from tests.index.conftest import find_user
from tests.store.conftest import msg

DIM = 8
MODEL = "h"
SHARDS = 2


def users_on(shard: int, n: int) -> list[str]:
    return [u for u in (f"user-{i}" for i in range(100)) if user_hash("app", u) % SHARDS == shard][:n]


def vec(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


@pytest.fixture
def store(tmp_path: Path) -> Iterator[HookedStore]:
    s = HookedStore(str(tmp_path / "h.duckdb"))
    s.open()
    yield s
    s.close()


def make_shard(tmp_path: Path, recovering: bool = True) -> RecoveringShard:
    shard = RecoveringShard(0, str(tmp_path / "shard"), DIM, MODEL, IndexConfig(exact_threshold=4), recovering)
    shard.open()
    return shard


class HookedStore(HistoryStore):
    """The store, running ``before_scan(rows)`` on what each ``scan_index_rows`` is about to answer
    (a race a test cannot time between processes: a write landing mid-pass, the store restarting)."""

    before_scan: Callable[[list[Any]], None] = staticmethod(lambda rows: None)

    def scan_index_rows(self, *args: Any, **kwargs: Any) -> Any:
        rows = super().scan_index_rows(*args, **kwargs)
        self.before_scan(rows)
        return rows


@pytest.fixture
def clients(refs: list[LocalRef]) -> Callable[[RecoveringShard, HistoryStore], tuple[ShardClient, StorePartitions]]:
    def make(shard: RecoveringShard, store: HistoryStore) -> tuple[ShardClient, StorePartitions]:
        refs.extend([LocalRef(shard, "shard 0"), LocalRef(store, "history store")])
        return ShardClient(refs[-2]), StorePartitions([StoreClient(refs[-1])])

    return make


def keeper_for(clients: Any, shard: RecoveringShard, store: HistoryStore, page: int = 3, **kw: Any) -> ShardKeeper:
    return ShardKeeper(*clients(shard, store), kw.pop("every", 60.0), shard_id=0, shards=SHARDS, page_size=page, **kw)


def fill(store: HistoryStore, users: list[str], n: int, embedded: int) -> list[tuple[Namespace, str]]:
    """``n`` messages per user, the first ``embedded`` with a vector of MODEL."""
    refs = []
    for u in users:
        key = ConversationKey("app", u, "c")
        store.append_messages([msg(i, key, text=f"{u} likes topic{i} number {i}") for i in range(1, n + 1)])
        store.put_embeddings(
            [EmbeddingRow(conversation_namespace(key), f"m{i}", MODEL, vec(i)) for i in range(1, embedded + 1)]
        )
        refs += [(conversation_namespace(key), f"m{i}") for i in range(1, n + 1)]
    return refs


def test_recovery_catches_up_with_the_store_and_serves_again(tmp_path: Path, store: HistoryStore, clients: Any) -> None:
    users = users_on(0, 3)
    refs = fill(store, users, 6, embedded=4)
    old = make_shard(tmp_path, recovering=False)
    ns0 = conversation_namespace(ConversationKey("app", users[0], "c"))
    old.upsert(
        [
            IndexItem(ns0, "m1", vec(1), "stale text", 1.0, '{"old": true}'),
            IndexItem(ns0, "gone", vec(2), "deleted from the store", 9.0, "{}"),
        ],
        MODEL,
    )
    old.snapshot()

    shard = make_shard(tmp_path)  # the restart: snapshot loaded, not level yet
    with pytest.raises(UnavailableError, match="shard 0 unavailable: recovering"):
        find_user(shard, "app", users[0], "conv", vec(1), "topic1", 5, "hybrid")
    report = asyncio.run(keeper_for(clients, shard, store).recover())

    assert not shard.is_recovering()
    assert sorted(shard.inventory()) == sorted(refs)
    assert report == (len(refs), len(refs), 1)  # m1 was stale, "gone" deleted
    assert shard.stats()["vectors"] == 4 * len(users)
    assert "m1" not in shard._spaces[ns0].payload  # the old item JSON is not served any more
    unembedded = find_user(shard, "app", users[1], "conv", None, "topic6", 3, "lexical")
    assert [h.doc_id for h in unembedded][:1] == ["m6"]  # never embedded, found lexically
    by_vector = find_user(shard, "app", users[2], "conv", vec(3), "", 1, "vector")
    assert [h.doc_id for h in by_vector] == ["m3"]


def test_writes_during_the_pass_are_kept(tmp_path: Path, store: HookedStore, clients: Any) -> None:
    users = users_on(0, 2)
    fill(store, users, 5, embedded=5)
    shard = make_shard(tmp_path)
    ns = conversation_namespace(ConversationKey("app", users[0], "c"))
    pages = 0

    def late_write(rows: list[Any]) -> None:
        nonlocal pages
        pages += 1
        if pages == 2:  # the pipeline indexes a new message mid-pass (durable after the scan began)
            shard.upsert([IndexItem(ns, "late", vec(0), "late message", 99.0, "{}")], MODEL)

    store.before_scan = late_write
    asyncio.run(keeper_for(clients, shard, store).recover())
    assert (ns, "late") in shard.inventory()
    assert len(shard.inventory()) == 11


def test_snapshot_if_changed_skips_clean_shards(tmp_path: Path) -> None:
    shard = make_shard(tmp_path, recovering=False)
    assert shard.snapshot_if_changed() is False
    ns = Namespace("app", "u", "conv", "c")
    shard.upsert([IndexItem(ns, "a", vec(0), "alpha", 1.0, "")], MODEL)
    assert shard.snapshot_if_changed() is True
    first = shard.stats()["snapshot"]
    assert shard.snapshot_if_changed() is False and shard.stats()["snapshot"] == first
    shard.drop("app", "u")  # a namespace that went is a change too
    assert shard.snapshot_if_changed() is True
    reopened = make_shard(tmp_path, recovering=False)
    assert reopened.inventory() == [] and reopened.snapshot_if_changed() is False


def test_keeper_retries_until_the_store_answers_then_snapshots(
    tmp_path: Path, store: HookedStore, clients: Any
) -> None:
    users = users_on(0, 1)
    refs = fill(store, users, 3, embedded=1)
    shard = make_shard(tmp_path)
    failures = [2]

    def restarting(rows: list[Any]) -> None:
        if failures[0]:
            failures[0] -= 1
            raise UnavailableError("history store", "restarting")

    store.before_scan = restarting
    keeper = keeper_for(clients, shard, store, every=0.05, retry_s=0.01, level_after_s=()).start()
    try:
        deadline = time.monotonic() + 10
        while (keeper.report is None or keeper.snapshots == 0) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        keeper.stop(timeout_s=5)
    assert failures == [0] and keeper.report is not None and keeper.snapshots >= 1
    assert sorted(make_shard(tmp_path, recovering=False).inventory()) == sorted(refs)  # from the snapshot


def test_a_vector_stored_after_the_recovery_pass_is_leveled_into_the_shard(
    tmp_path: Path, store: HistoryStore, clients: Any
) -> None:
    """A race: the pass reads an item before its vector lands in the store."""
    users = users_on(0, 2)
    fill(store, users, 4, embedded=2)  # m3, m4 not embedded yet when the shard recovers
    shard = make_shard(tmp_path)
    on_shard, on_store = clients(shard, store)
    asyncio.run(ShardKeeper(on_shard, on_store, 60.0, shard_id=0, shards=SHARDS, page_size=3).recover())
    assert shard.stats()["vectors"] == 4
    late = [
        EmbeddingRow(conversation_namespace(ConversationKey("app", u, "c")), f"m{i}", MODEL, vec(i))
        for u in users
        for i in (3, 4)
    ]
    store.put_embeddings(late)  # the store's lowest-priority vector write lands after the pass
    assert store.index_digest(0, SHARDS, MODEL) != shard.vector_digest()
    assert asyncio.run(level_shard(on_store, on_shard, 0, SHARDS)) == (True, 4)
    assert store.index_digest(0, SHARDS, MODEL) == shard.vector_digest()
    assert shard.stats()["vectors"] == 8
    hits = find_user(shard, "app", users[1], "conv", vec(4), "", 1, "vector")
    assert [h.doc_id for h in hits] == ["m4"]
    assert asyncio.run(level_shard(on_store, on_shard, 0, SHARDS)) == (True, 0)  # level: digests equal, nothing sent


def test_the_keeper_levels_after_recovering(tmp_path: Path, store: HookedStore, clients: Any) -> None:
    users = users_on(0, 1)
    key = ConversationKey("app", users[0], "c")
    fill(store, users, 3, embedded=1)
    shard = make_shard(tmp_path)

    def late_vectors(rows: list[Any]) -> None:
        if not rows:  # the pass is over: now the late vectors land
            HistoryStore.put_embeddings(
                store, [EmbeddingRow(conversation_namespace(key), f"m{i}", MODEL, vec(i)) for i in (2, 3)]
            )

    store.before_scan = late_vectors
    keeper = keeper_for(clients, shard, store, level_after_s=(0.05,)).start()
    try:
        deadline = time.monotonic() + 10
        while keeper.leveled < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        keeper.stop(timeout_s=5)
    assert keeper.leveled == 2 and shard.stats()["vectors"] == 3
