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
