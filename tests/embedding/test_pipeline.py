"""The embedding pipeline against a real store and real shards: a shard that refuses upserts
(down, restarting) gets the batch again until it holds it, and only then is the batch confirmed
(``on_indexed``) and ``wait_idle(retries=True)`` done."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memray.config import IndexConfig
from memray.embedding.hashing import HashEmbedder
from memray.embedding.pipeline import EmbeddingPipeline, PendingItem
from memray.errors import UnavailableError
from memray.ids import Namespace
from memray.index.client import ShardClient
from memray.index.router import ShardRouter
from memray.index.shard import VectorShard
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.partitions import StorePartitions
from memray.store.rows import MessageRow

NS = Namespace("app", "u", "conv", "c")


class FlakyShard(VectorShard):
    """A real shard that is 'down' for its first ``refusals`` upserts."""

    def __init__(self, path: str, refusals: int) -> None:
        super().__init__(0, path, 64, HashEmbedder(64).model_id, IndexConfig())
        self.refusals = refusals

    def upsert(self, items: list[Any], model_id: str) -> int:
        if self.refusals > 0:
            self.refusals -= 1
            raise UnavailableError("shard 0", "restarting")
        return super().upsert(items, model_id)


def test_a_refused_upsert_is_retried_until_the_shard_holds_it(tmp_path: Path) -> None:
    store = HistoryStore(str(tmp_path / "h.duckdb"))
    store.open()
    shard = FlakyShard(str(tmp_path / "s"), refusals=2)
    shard.open()
    confirmed: list[tuple[list[str], int]] = []

    async def go() -> None:
        pipeline = EmbeddingPipeline(
            HashEmbedder(64),
            StorePartitions([StoreClient(LocalRef(store, "store"))]),
            ShardRouter([ShardClient(LocalRef(shard, "shard 0"))]),
            backoff_s=0.01,
            backoff_max_s=0.02,
        )
        pipeline.on_indexed = lambda items, stamp: confirmed.append(([i.doc_id for i in items], stamp))
        pipeline.submit([PendingItem(NS, f"m{i}", f"text {i}", float(i)) for i in range(3)])
        assert await asyncio.wait_for(pipeline.wait_idle(retries=True), 10)
        await pipeline.close()

    asyncio.run(go())
    assert shard.refusals == 0 and shard.stats()["vectors"] == 3
    assert [ids for ids, _ in confirmed] == [["m0", "m1", "m2"]]  # confirmed once, after the shard held it
    assert confirmed[0][1] > 0
    store.close()


class CountingStore(HistoryStore):
    """A real store that counts the rows ``put_embeddings`` is given."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.put: list[str] = []

    def put_embeddings(self, rows: list[Any]) -> int:
        self.put.extend(r.doc_id for r in rows)
        return super().put_embeddings(rows)


class FailingOnce(HashEmbedder):
    """The hash embedder (recomputable), failing its first call."""

    def __init__(self) -> None:
        super().__init__(64)
        self.fail = True

    def embed(self, texts: list[str]) -> Any:
        if self.fail:
            self.fail = False
            raise RuntimeError("embedder down")
        return super().embed(texts)


def test_items_marked_at_commit_are_not_marked_again_unless_a_failure_was_recorded(tmp_path: Path) -> None:
    """A recomputable model's items committed marked embedded (``PendingItem.marked``) need no
    second store transaction; an unmarked item does. After a failed embedding the store says
    'failed', so the retry marks them again."""
    store = CountingStore(str(tmp_path / "h.duckdb"))
    store.open()
    shard = FlakyShard(str(tmp_path / "s"), refusals=0)
    shard.open()
    embedder = FailingOnce()
    model = embedder.model_id
    rows = [msg_row(i) for i in range(3)]
    assert store.commit_messages(rows, embedded_by=model).rejected == []
    items = [PendingItem(NS, r.id, r.text, float(r.seq), marked=model) for r in rows]

    async def go() -> None:
        pipeline = EmbeddingPipeline(
            embedder,
            StorePartitions([StoreClient(LocalRef(store, "store"))]),
            ShardRouter([ShardClient(LocalRef(shard, "shard 0"))]),
            backoff_s=0.01,
            backoff_max_s=0.02,
        )
        assert pipeline.marks_at_commit == model
        pipeline.submit(items[:1])  # fails once, recorded 'failed', retried
        assert await asyncio.wait_for(pipeline.wait_idle(retries=True), 10)
        assert store.put == ["m0"] and store.pending_embeddings(model, 10) == []
        pipeline.submit(items[1:2])  # marked at commit: nothing to store
        pipeline.submit([items[2]._replace(marked=None)])  # not marked: marked now
        assert await asyncio.wait_for(pipeline.wait_idle(retries=True), 10)
        await pipeline.close()

    asyncio.run(go())
    assert store.put == ["m0", "m2"]
    assert store.pending_embeddings(model, 10) == []
    assert shard.stats()["vectors"] == 3
    store.close()


def msg_row(i: int) -> MessageRow:
    return MessageRow(NS.app, NS.user_id, NS.scope, f"m{i}", i + 1, "user", "[]", "{}", 1000.0 + i, f"text {i}")
