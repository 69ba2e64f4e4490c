"""A recomputable model's vectors are not stored: the pipeline only marks the items embedded, and a
shard rebuilt from the store (recovery, leveling, a fork's reconcile) recomputes them from the text
and answers vector searches as the shard the pipeline filled did. Real DuckDB store, real shards."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memray.config import EmbedderConfig, IndexConfig
from memray.embedding.factory import build_embedder
from memray.embedding.hashing import HashEmbedder
from memray.embedding.recompute import recomputer
from memray.ids import ConversationKey, Namespace, conversation_namespace
from memray.index import IndexItem
from memray.index.client import ShardClient
from memray.index.keeper import ShardKeeper, level_shard, reconcile_marked
from memray.index.recompute import Recompute
from memray.index.recovery import RecoveringShard
from memray.rpc.local import LocalRef
from memray.store.client import StoreClient
from memray.store.history import HistoryStore
from memray.store.partitions import StorePartitions
from memray.store.rows import EmbeddingRow
from tests.index.conftest import find_user
from tests.index.test_recovery import SHARDS, users_on
from tests.store.conftest import msg

DIM = 32
EMBEDDER = HashEmbedder(DIM)
MODEL = EMBEDDER.model_id
TOPICS = ["lighthouse keeper gulls", "quarterly tax forms", "sourdough starter flour", "chess opening gambit"]


def clients(refs: list[LocalRef], shard: RecoveringShard, store: HistoryStore) -> tuple[ShardClient, StorePartitions]:
    refs.extend([LocalRef(shard, "shard 0"), LocalRef(store, "history store")])
    return ShardClient(refs[-2]), StorePartitions([StoreClient(refs[-1])])


def make_shard(path: Path, recompute: Recompute | None, recovering: bool = True) -> RecoveringShard:
    shard = RecoveringShard(0, str(path), DIM, MODEL, IndexConfig(exact_threshold=4), recovering, recompute)
    shard.open()
    return shard


def ingest(store: HistoryStore, live: RecoveringShard, users: list[str]) -> list[tuple[Namespace, str, str]]:
    """What the pipeline does with a recomputable embedder: the store marks the items embedded
    (no vector), the live shard gets the vectors."""
    items = []
    for u in users:
        key = ConversationKey("app", u, "c")
        store.append_messages([msg(i, key, text=f"{TOPICS[i % 4]} {u} {i}") for i in range(1, 7)])
        items += [(conversation_namespace(key), f"m{i}", f"{TOPICS[i % 4]} {u} {i}") for i in range(1, 7)]
    vectors = EMBEDDER.embed([t for _, _, t in items])
    store.put_embeddings([EmbeddingRow(ns, d, MODEL, None) for ns, d, _ in items])
    seq = {d: float(d[1:]) for _, d, _ in items}
    live.upsert([IndexItem(ns, d, v, t, seq[d]) for (ns, d, t), v in zip(items, vectors)], MODEL)
    return items


def hits(shard: RecoveringShard, users: list[str]) -> list[list[tuple[str, float]]]:
    found = []
    for u in users:
        for topic in TOPICS:
            got = find_user(shard, "app", u, "conv", EMBEDDER.embed([topic])[0], "", 3, "vector")
            found.append([(h.doc_id, round(h.score, 5)) for h in got])
    return found


def test_the_store_keeps_no_vectors_and_a_recovered_shard_answers_as_before(
    tmp_path: Path, store: HistoryStore, refs: list[LocalRef]
) -> None:
    users = users_on(0, 2)
    recompute = recomputer(EmbedderConfig(kind="hash", dim=DIM), MODEL)
    assert recompute is not None
    live = make_shard(tmp_path / "live", recompute, recovering=False)
    items = ingest(store, live, users)
    assert store.scan_index_rows(0, SHARDS, MODEL, None, 100) == []  # no vector stored
    assert store.pending_embeddings(MODEL, 100) == []  # yet nothing left to embed
    assert store.missing_embeddings(MODEL, [(ns, d) for ns, d, _ in items]) == []
    assert store.index_digest(0, SHARDS, MODEL) == live.vector_digest()  # leveling counts them

    restarted = make_shard(tmp_path / "restarted", recompute)  # no snapshot: rebuilt from the store
    on_shard, on_store = clients(refs, restarted, store)
    report = asyncio.run(ShardKeeper(on_shard, on_store, 60.0, shard_id=0, shards=SHARDS, page_size=5).recover())
    assert report.rows == len(items) and restarted.stats()["vectors"] == len(items)
    assert hits(restarted, users) == hits(live, users)
    assert all(hits(live, users))
    assert asyncio.run(level_shard(on_store, on_shard, 0, SHARDS)) == (True, 0)  # digests equal

    lexical_only = make_shard(tmp_path / "plain", None)  # what recovery gave without recomputing
    asyncio.run(ShardKeeper(*clients(refs, lexical_only, store), 60.0, shard_id=0, shards=SHARDS).recover())
    assert lexical_only.stats()["vectors"] == 0


def test_leveling_and_a_forks_reconcile_recompute_missing_vectors(
    tmp_path: Path, store: HistoryStore, refs: list[LocalRef]
) -> None:
    users = users_on(0, 2)
    recompute = recomputer(EmbedderConfig(kind="hash", dim=DIM), MODEL)
    live = make_shard(tmp_path / "live", recompute, recovering=False)
    items = ingest(store, live, users)

    # a shard holding the items by text only (a vector upsert lost while it was down): leveled
    leveled = make_shard(tmp_path / "leveled", recompute, recovering=False)
    leveled.upsert([IndexItem(ns, d, None, t, float(d[1:])) for ns, d, t in items], MODEL)
    on_shard, on_store = clients(refs, leveled, store)
    assert asyncio.run(level_shard(on_store, on_shard, 0, SHARDS)) == (True, len(items))
    assert store.index_digest(0, SHARDS, MODEL) == leveled.vector_digest()
    assert hits(leveled, users) == hits(live, users)

    # a fork's shard whose copy missed the vectors: its reconcile recomputes them
    forked = make_shard(tmp_path / "fork", recompute, recovering=False)
    forked.upsert([IndexItem(ns, d, None, t, float(d[1:])) for ns, d, t in items[:3]], MODEL)
    on_fork, on_store = clients(refs, forked, store)
    assert asyncio.run(reconcile_marked(on_fork, on_store, 0, SHARDS, MODEL, [])) == (len(items), 0)
    assert forked.stats()["vectors"] == len(items)
    assert hits(forked, users) == hits(live, users)


def test_only_a_recomputable_embedder_of_the_shards_model_recomputes() -> None:
    assert recomputer(EmbedderConfig(kind="hash", dim=DIM), "hash-v1-64") is None  # another model
    assert recomputer(EmbedderConfig(kind="none"), MODEL) is None
    function = EmbedderConfig(kind="custom", custom=lambda texts: EMBEDDER.embed(texts))
    built = build_embedder(function)
    assert built is not None and recomputer(function, built.model_id) is None  # a function: not recomputable
    assert recomputer(EmbedderConfig(kind="custom", custom=EMBEDDER), MODEL) is not None  # an object that says so
    assert recomputer(EmbedderConfig(kind="openai", dim=DIM), MODEL) is None


class Delivering(ShardClient):
    """A shard's client whose first ``missing_from`` is followed by the pipeline upserting
    ``arriving`` (what a host had on its way when a leveling asked)."""

    def __init__(self, ref: LocalRef, shard: RecoveringShard, arriving: list[IndexItem]) -> None:
        super().__init__(ref)
        self.shard, self.arriving, self.asked = shard, arriving, 0

    async def missing_from(self, refs: Any, vectors: bool = False) -> Any:
        self.asked += 1
        missing = await self._call("missing_from", refs, vectors)  # (the remote attribute would cache itself)
        if self.arriving:
            self.shard.upsert(self.arriving, MODEL)
            self.arriving = []
        return missing


def test_leveling_while_hosts_write_sends_only_what_stopped_arriving(
    tmp_path: Path, store: HistoryStore, refs: list[LocalRef]
) -> None:
    """Committed marked embedded, half of the items are on their way to the shard and half were
    lost (their host died): with ``settle_s`` only the lost half is sent; without, both are."""
    users = users_on(0, 2)
    recompute = recomputer(EmbedderConfig(kind="hash", dim=DIM), MODEL)
    live = make_shard(tmp_path / "live", recompute, recovering=False)
    items = ingest(store, live, users)
    vectors = EMBEDDER.embed([t for _, _, t in items])
    upserts = [IndexItem(ns, d, v, t, float(d[1:])) for (ns, d, t), v in zip(items, vectors)]
    half = len(items) // 2
    for settle_s, sent in ((0.01, len(items) - half), (0.0, len(items))):
        shard = make_shard(tmp_path / f"settle-{settle_s}", recompute, recovering=False)
        refs.extend([LocalRef(shard, "shard 0"), LocalRef(store, "history store")])
        client = Delivering(refs[-2], shard, upserts[:half])
        on_store = StorePartitions([StoreClient(refs[-1])])
        assert asyncio.run(level_shard(on_store, client, 0, SHARDS, settle_s=settle_s)) == (True, sent)
        assert store.index_digest(0, SHARDS, MODEL) == shard.vector_digest()  # level either way
        assert client.asked == (3 if settle_s else 1)  # asked again until nothing more arrived
