"""The re-embedding job's writers: one per store partition, each store getting exactly its users'
vectors (two real DuckDB stores in this process, as partitioned stores will be)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import numpy as np

from memray.ids import Namespace, user_hash
from memray.jobs.writers import PartitionWriters
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow, MessageRow

USERS = [f"u{i}" for i in range(12)]


def message(user: str, i: int) -> MessageRow:
    text = f"{user} says {i}"
    parts = json.dumps([{"type": "text", "text": text}])
    return MessageRow("app", user, "c", f"m{i}", i + 1, "user", parts, "{}", time.time(), text)


def test_each_partition_gets_exactly_its_users_vectors(tmp_path: Path) -> None:
    cores = [HistoryStore(str(tmp_path / f"history-{i}.duckdb")) for i in range(2)]
    for i, core in enumerate(cores):
        core.open()  # partition i holds the messages of the users that hash to it
        core.append_messages([message(u, j) for u in USERS if user_hash("app", u) % 2 == i for j in range(3)])
    for u in USERS:
        assert [core.count_user("app", u)["messages"] for core in cores].count(3) == 1
    stores = [StoreClient(LocalRef(core, f"store {i}")) for i, core in enumerate(cores)]
    rows = [
        EmbeddingRow(Namespace("app", u, "conv", "c"), f"m{j}", "m-1", np.full(4, 0.5, np.float32))
        for u in USERS
        for j in range(3)
    ]

    async def write() -> list[list[int]]:
        writers = PartitionWriters(stores, depth=1)
        await writers.start()
        done = [await writers.write(rows[at : at + 5]) for at in range(0, len(rows), 5)]
        results = [await d for d in done]
        await writers.close()
        assert sum(writers.written) == len(rows)  # a row sent to the wrong store would be dropped there
        return results

    results = asyncio.run(write())
    assert sum(sum(r) for r in results) == len(rows)
    for i, core in enumerate(cores):
        mine = [u for u in USERS if user_hash("app", u) % 2 == i]
        assert (
            mine
            and core.missing_embeddings("m-1", [(r.namespace, r.doc_id) for r in rows if r.namespace.user_id in mine])
            == []
        )
        core.close()
