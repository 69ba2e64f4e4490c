"""The sharded index against a brute-force oracle: router + 3 shards (HNSW promoted early, one
shard restarted from its snapshot now and then) must agree with exact search per namespace."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memray.config import IndexConfig
from memray.ids import Namespace
from memray.index import IndexItem, ShardHit, ShardRouter, VectorShard
from memray.index.client import ShardClient
from memray.rpc.local import LocalRef
from tests.index.conftest import clustered, query

DIM = 32
MODEL = "hash-v1"
SHARDS = 3
POOL = clustered(np.random.default_rng(42), 600, DIM, 12, spread=1.0)
QUERIES = clustered(np.random.default_rng(43), 50, DIM, 12, spread=1.0)
CONFIG = IndexConfig(exact_threshold=8, compact_ratio=0.25)

apps = st.sampled_from(["a1", "a2"])
users = st.sampled_from(["u1", "u2", "u3"])
namespaces = st.builds(Namespace, apps, users, st.sampled_from(["conv", "entry"]), st.sampled_from(["c1", ""]))
doc_ids = st.sampled_from([f"d{i}" for i in range(30)])
WORDS = ["alpha", "beta", "gamma", "delta", "深色", "mode?"]

T = TypeVar("T")
Doc = tuple[int, str, float]  # (pool index, text, recency)


class ShardedIndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="memray-index-sm-"))
        self.loop = asyncio.new_event_loop()
        self.refs = [LocalRef(self._shard(i), f"shard {i}") for i in range(SHARDS)]
        self.router = ShardRouter([ShardClient(ref) for ref in self.refs])
        self.oracle: dict[Namespace, dict[str, Doc]] = {}
        self.clock = 0.0
        self.found = 0
        self.expected = 0

    def _shard(self, i: int) -> VectorShard:
        shard = VectorShard(i, str(self.root / f"s{i}"), DIM, MODEL, CONFIG)
        shard.open()
        return shard

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        for ref in self.refs:
            ref.shutdown()
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.expected:
            assert self.found / self.expected >= 0.95, (self.found, self.expected)

    # -- writes ---------------------------------------------------------------------------

    @rule(
        ns=namespaces,
        docs=st.lists(st.tuples(doc_ids, st.integers(0, len(POOL) - 1), st.booleans()), min_size=1, max_size=25),
    )
    def upsert(self, ns: Namespace, docs: list[tuple[str, int, bool]]) -> None:
        items = []
        for doc, vec_i, with_vector in docs:
            self.clock += 1.0
            text = f"{WORDS[vec_i % len(WORDS)]} {doc} note"
            items.append(IndexItem(ns, doc, POOL[vec_i] if with_vector else None, text, self.clock))
            space = self.oracle.setdefault(ns, {})
            old = space.get(doc)
            # vector None keeps the vector the item had (see VectorShard docstring)
            keep = vec_i if with_vector else (old[0] if old else -1)
            space[doc] = (keep, text, self.clock)
        assert self.run(self.router.upsert(items, MODEL)) == len(items)

    @precondition(lambda self: bool(self.oracle))
    @rule(data=st.data(), extra=st.lists(doc_ids, max_size=3))
    def delete(self, data: st.DataObject, extra: list[str]) -> None:
        ns = data.draw(st.sampled_from(sorted(self.oracle)))
        present = sorted(self.oracle[ns])
        docs = data.draw(st.lists(st.sampled_from(present), min_size=1, max_size=len(present))) + extra
        refs = [(ns, d) for d in dict.fromkeys(docs)]
        space = self.oracle.get(ns, {})
        expected = sum(1 for d in dict.fromkeys(docs) if d in space)
        for d in docs:
            space.pop(d, None)
        if ns in self.oracle and not space:
            del self.oracle[ns]
        assert self.run(self.router.delete(refs)) == expected

    @rule(app=apps, user=users, kind=st.none() | st.sampled_from(["conv", "entry"]))
    def drop(self, app: str, user: str, kind: str | None) -> None:
        gone = [ns for ns in self.oracle if ns.app == app and ns.user_id == user and kind in (None, ns.kind)]
        expected = sum(len(self.oracle.pop(ns)) for ns in gone)
        assert self.run(self.router.drop(app, user, kind)) == expected

    @rule(i=st.integers(0, SHARDS - 1))
    def restart_shard(self, i: int) -> None:
        """Snapshot, lose the process, open a fresh shard from the snapshot."""
        self.refs[i].obj.close()
        self.refs[i].obj = self._shard(i)

    # -- reads ----------------------------------------------------------------------------

    @precondition(lambda self: bool(self.oracle))
    @rule(data=st.data(), q=st.integers(0, len(QUERIES) - 1), many=st.booleans())
    def vector_search(self, data: st.DataObject, q: int, many: bool) -> None:
        ns = data.draw(st.sampled_from(sorted(self.oracle)))
        asked = [n for n in self.oracle if n.app == ns.app and n.user_id == ns.user_id] if many else [ns]
        # threshold -1: every vector scores (cos + 1) / 2 > 0, so none is cut by the relevance floor
        res = self.run(self.router.search(asked, query(QUERIES[q], "", 10, "vector", threshold=-1.0)))
        assert not res.degraded
        self._check_scope(res.hits, asked)
        sims = sorted(
            (float(POOL[v] @ QUERIES[q]) for n in asked for (v, _t, _r) in self.oracle[n].values() if v >= 0),
            reverse=True,
        )
        truth = sims[:10]
        assert len(res.hits) == len(truth)
        if truth:
            floor = (truth[-1] + 1.0) / 2.0 - 1e-5  # tie-safe: any hit as close as the 10th counts
            self.expected += len(truth)
            self.found += sum(1 for h in res.hits if h.score >= floor)

    @precondition(lambda self: bool(self.oracle))
    @rule(data=st.data(), word=st.sampled_from(WORDS + ['"?', "d1 -note"]), mode=st.sampled_from(["lexical", "hybrid"]))
    def text_search(self, data: st.DataObject, word: str, mode: str) -> None:
        ns = data.draw(st.sampled_from(sorted(self.oracle)))
        asked = [n for n in self.oracle if n.app == ns.app and n.user_id == ns.user_id]
        res = self.run(self.router.search(asked, query(QUERIES[0], word, 10, mode)))  # type: ignore[arg-type]
        assert not res.degraded
        self._check_scope(res.hits, asked)
        assert all(0.0 <= h.score <= 1.0 for h in res.hits)

    @precondition(lambda self: bool(self.oracle))
    @rule(app=apps, kind=st.sampled_from(["conv", "entry"]))
    def app_search(self, app: str, kind: str) -> None:
        res = self.run(self.router.search_app(app, kind, query(QUERIES[1], "alpha", 10, "hybrid")))
        assert not res.degraded
        self._check_scope(res.hits, [n for n in self.oracle if n.app == app and n.kind == kind])

    def _check_scope(self, hits: list[ShardHit], asked: list[Namespace]) -> None:
        keys = [(h.namespace, h.doc_id) for h in hits]
        assert len(set(keys)) == len(keys), "duplicate doc in results"
        for ns, doc in keys:
            assert ns in asked, f"cross-namespace hit {ns}"
            assert doc in self.oracle[ns], f"deleted or unknown doc {doc} returned"

    @invariant()
    def counts_equal(self) -> None:
        per_user: dict[tuple[str, str], int] = {}
        for ns, docs in self.oracle.items():
            per_user[(ns.app, ns.user_id)] = per_user.get((ns.app, ns.user_id), 0) + len(docs)
        total = sum(ref.obj.stats()["items"] for ref in self.refs)
        assert total == sum(per_user.values())
        for (app, user), count in per_user.items():
            assert self.run(self.router.count_user(app, user)) == count


ShardedIndexMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestShardedIndex = ShardedIndexMachine.TestCase
