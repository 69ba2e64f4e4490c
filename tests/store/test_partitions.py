"""History partitions: the layout of a data directory, and :class:`StorePartitions` routing over
real history files (three DuckDB files behind in-process refs) against one file as the oracle."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memray
from memray.ids import ConversationKey, Namespace, conversation_namespace, user_hash
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.layout import check_stores, export_root, partition_of, recorded_stores, store_file
from memray.store.partitions import StorePartitions
from memray.store.rows import EmbeddingRow, RowList

from .conftest import msg

USERS = [f"user-{i}" for i in range(12)]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def open_partitions(root: Path, n: int) -> tuple[StorePartitions, list[HistoryStore], list[LocalRef]]:
    stores = [HistoryStore(store_file(str(root), i, n)) for i in range(n)]
    for s in stores:
        s.open()
    refs = [LocalRef(s, f"history store {i}") for i, s in enumerate(stores)]
    return StorePartitions([StoreClient(r) for r in refs]), stores, refs


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[StorePartitions, StorePartitions, list[HistoryStore]]]:
    """Three partitions, and one store holding the same data (the oracle)."""
    three, stores, refs3 = open_partitions(tmp_path / "three", 3)
    one, single, refs1 = open_partitions(tmp_path / "one", 1)
    yield three, one, stores
    for ref in refs3 + refs1:
        ref.shutdown()
    for s in stores + single:
        s.close()


def test_file_names_keep_the_one_partition_name_and_number_the_others(tmp_path: Path) -> None:
    assert store_file(str(tmp_path), 0, 1) == str(tmp_path / "history.duckdb")
    assert [os.path.basename(store_file(str(tmp_path), i, 3)) for i in range(3)] == [
        "history-0.duckdb",
        "history-1.duckdb",
        "history-2.duckdb",
    ]
    assert export_root(str(tmp_path), 0, 1) == str(tmp_path)
    assert export_root(str(tmp_path), 2, 3) == str(tmp_path / "store-2")
    assert partition_of("app", "u", 3) == user_hash("app", "u") % 3  # the vector shards' hash


def test_the_count_is_recorded_and_another_one_refused_naming_both(tmp_path: Path) -> None:
    assert recorded_stores(str(tmp_path)) is None
    check_stores(str(tmp_path), 3)
    assert json.loads((tmp_path / "partitions.json").read_text()) == {"stores": 3}
    check_stores(str(tmp_path), 3)  # the same count opens
    with pytest.raises(memray.ValidationError) as err:
        check_stores(str(tmp_path), 2)
    assert "stores=3" in str(err.value) and "not 2" in str(err.value)
    assert json.loads((tmp_path / "partitions.json").read_text()) == {"stores": 3}  # nothing changed


def test_a_directory_from_before_the_record_has_one_partition(tmp_path: Path) -> None:
    HistoryStore(str(tmp_path / "history.duckdb")).open()
    assert recorded_stores(str(tmp_path)) == 1
    with pytest.raises(memray.ValidationError, match="stores=1"):
        memray.open(str(tmp_path), mode="inprocess", stores=2)
    with memray.open(str(tmp_path), mode="inprocess") as mem:  # the default opens it as it always did
        mem.conversation(user_id="u", conversation_id="c").add({"role": "user", "content": "still here"}, durable=True)
    assert sorted(p.name for p in tmp_path.glob("*.duckdb")) == ["history.duckdb"]


def test_each_user_lives_on_one_partition_only(pair: Any) -> None:
    three, _, stores = pair
    keys = [ConversationKey("app", u, "c") for u in USERS]
    run(three.commit_messages([msg(i, k) for k in keys for i in (1, 2)]))
    for key in keys:
        home = partition_of(key.app, key.user_id, 3)
        assert [len(s.get_messages(key)) for s in stores] == [2 if i == home else 0 for i in range(3)]
    assert len({partition_of("app", u, 3) for u in USERS}) == 3  # the test data covers every partition


def test_split_batches_answer_in_request_order_as_one_store_does(pair: Any) -> None:
    three, one, _ = pair
    keys = [ConversationKey("app", u, "c") for u in USERS]
    rows = [msg(i, k) for k in keys for i in (1, 2, 3)]
    rows[4] = rows[4]._replace(created_at=float("inf"))  # rejected: its position must map back
    rows[20] = rows[20]._replace(text="a\ud800b")
    got, want = run(three.commit_messages(rows)), run(one.commit_messages(rows))
    assert sorted(got.positions) == sorted(want.positions) == [4, 20]
    assert sorted(got.rejected) == sorted(want.rejected)
    requests = [(k, ["m1", "m3", "nope"]) for k in reversed(keys)]
    assert run(three.stored_seqs(requests)) == run(one.stored_seqs(requests))
    snaps = run(three.load_conversations(keys[::-1], 8))
    assert [snap.recent[0].user_id for snap in snaps] == [k.user_id for k in keys[::-1]]
    assert snaps == run(one.load_conversations(keys[::-1], 8))
    assert run(three.count_dead_letters()) == run(one.count_dead_letters())


def test_a_batch_that_pickles_as_columns_reaches_each_partition_as_one(
    pair: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    three, _, _ = pair
    seen: list[type] = []
    commit = HistoryStore.commit_messages

    def spy(self: HistoryStore, rows: Any) -> Any:
        seen.append(type(rows))
        return commit(self, rows)

    monkeypatch.setattr(HistoryStore, "commit_messages", spy)
    run(three.commit_messages(RowList(msg(1, ConversationKey("app", u, "c")) for u in USERS)))
    assert len(seen) == 3 and set(seen) == {RowList}


def test_vectors_recovery_scans_and_digests_match_one_store(pair: Any) -> None:
    three, one, _ = pair
    keys = [ConversationKey("app", u, "c") for u in USERS]
    for s in (three, one):
        run(s.commit_messages([msg(i, k) for k in keys for i in (1, 2)]))
    rng = np.random.default_rng(0)
    vectors = [
        EmbeddingRow(conversation_namespace(k), "m1", "m", rng.standard_normal(4).astype(np.float32)) for k in keys
    ]
    assert run(three.put_embeddings(vectors)) == run(one.put_embeddings(vectors)) == len(keys)
    refs: list[tuple[Namespace, str]] = [(conversation_namespace(k), d) for k in keys for d in ("m1", "m2")]
    assert run(three.missing_embeddings("m", refs)) == run(one.missing_embeddings("m", refs))
    for shard in range(2):
        assert run(three.index_digest(shard, 2, "m")) == run(one.index_digest(shard, 2, "m"))
        assert sorted(run(three.index_refs(shard, 2, "m"))) == sorted(run(one.index_refs(shard, 2, "m")))

        async def pages(s: StorePartitions, shard: int = shard) -> list[tuple[Namespace, str]]:
            return sorted(
                [(r.namespace, r.doc_id) async for page in s.index_pages(shard, 2, "m", 3, True) for r in page]
            )

        assert run(pages(three)) == run(pages(one)) != []
    assert len(run(three.pending_embeddings("m", 100))) == len(run(one.pending_embeddings("m", 100))) == len(keys)


def test_pending_items_page_past_a_cursor_across_partitions_as_in_one_store(pair: Any) -> None:
    """Pages of 5 past the last item of the page before: every pending item once, in the same
    order as one store gives them, while items are embedded between pages."""
    three, one, _ = pair
    keys = [ConversationKey("app", u, "c") for u in USERS]
    for s in (three, one):
        run(s.commit_messages([msg(i, k) for k in keys for i in (1, 2)]))

    def pages(s: StorePartitions) -> list[tuple[Namespace, str]]:
        seen: list[tuple[Namespace, str]] = []
        after: tuple[Namespace, str] | None = None
        while page := run(s.pending_embeddings("m", 5, after)):
            seen += [(ns, d) for ns, d, _ in page]
            after = seen[-1]
            # what was seen is embedded meanwhile: it leaves the pending items, the cursor holds
            run(s.put_embeddings([EmbeddingRow(ns, d, "m", np.ones(4, np.float32)) for ns, d, _ in page]))
        return seen

    assert pages(three) == pages(one) == sorted((conversation_namespace(k), f"m{i}") for k in keys for i in (1, 2))
    assert run(three.pending_embeddings("m", 5)) == []


def test_exports_write_one_root_per_partition_and_erasure_purges_the_right_one(pair: Any, tmp_path: Path) -> None:
    three, _, _ = pair
    keys = [ConversationKey("app", u, "c") for u in USERS]
    run(three.commit_messages([msg(1, k) for k in keys]))
    root = str(tmp_path / "exports")
    manifest = run(three.export_parquet(root))
    assert manifest["rows"] == len(keys) and len(manifest["stores"]) == 3
    assert sorted(run(three.export_roots())) == [export_root(root, i, 3) for i in range(3)]
    victim = USERS[5]
    counts = run(three.delete_user("app", victim))
    assert counts["messages"] == 1 and counts["export_rows"] == 1
    assert run(three.count_user("app", victim)).get("messages", 0) == 0


#: store calls that only make sense for one partition: StorePartitions offers them per partition
#: (``index_pages`` pages every partition, ``versions`` reads each one's) or through ``clients``
#: (``memray stats`` asks each partition's ``table_counts``)
PER_PARTITION = {"pid", "scan_index_rows", "table_counts", "version"}


def test_every_store_call_is_routed_or_taken_per_partition() -> None:
    """A call added to the store (and its client) must be routed here too (a ``@route`` on the
    store method), or named above: the cores that serve many users hold a StorePartitions."""
    assert set(StoreClient.calls()) - set(dir(StorePartitions)) == PER_PARTITION


def test_api_keys_live_on_the_first_partition(pair: Any) -> None:
    from memray.store.keys import KeyRecord

    three, _, stores = pair
    record = KeyRecord("k1", "d" * 64, "acme", "ada", True, "ci", 1.0)
    run(three.put_api_key(record))
    assert [r.key_id for r in run(three.api_keys(None))] == ["k1"]
    assert [r.key_id for r in stores[0].api_keys()] == ["k1"]
    assert stores[1].api_keys() == [] and stores[2].api_keys() == []
    assert run(three.revoke_api_key("k1", 2.0)) is True and stores[0].api_keys()[0].revoked_at == 2.0
