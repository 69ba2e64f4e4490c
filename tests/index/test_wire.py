"""The shard's batched calls pickle as columns and come back as the same objects."""

from __future__ import annotations

import math

import numpy as np
import ray.cloudpickle as cp

from memray.ids import Namespace
from memray.index.base import IndexItem, ShardHit
from memray.index.lexical import Bm25Stats
from memray.index.search import AppSearch, NamespaceSearch, Query, ShardReply, UserSearch
from memray.index.wire import ItemBatch, ReplyBatch, SearchBatch

NS = Namespace("app", "u1", "conv", "c1")


def _round_trip(obj: object) -> object:
    return cp.loads(cp.dumps(obj, protocol=5))


def test_items_come_back_equal_with_their_types() -> None:
    vec = np.arange(4, dtype=np.float32)
    items = [
        IndexItem(NS, "a", vec, "hello", 1.0, '{"id": "a"}', 3, (1.0, math.nan, 0.5)),
        IndexItem(("app", "u2", "conv", "c2"), "b", None, "text only", math.nan),  # type: ignore[arg-type]
        IndexItem(NS, "c", [0.0, 1.0, 2.0, 3.0], "", 2.0),
    ]
    back = _round_trip(ItemBatch(items))
    assert isinstance(back, ItemBatch) and len(back) == 3
    for got, sent in zip(back, items):
        assert type(got) is IndexItem and type(got.namespace) is Namespace
        assert got.namespace == tuple(sent.namespace)
        assert (got.doc_id, got.text, got.payload, got.stamp) == (sent.doc_id, sent.text, sent.payload, sent.stamp)
        assert got.recency == sent.recency or (math.isnan(got.recency) and math.isnan(sent.recency))
        assert (got.columns is None) == (sent.columns is None)
        if sent.vector is None:
            assert got.vector is None
        else:
            assert got.vector.dtype == np.float32
            np.testing.assert_array_equal(got.vector, np.asarray(sent.vector, dtype=np.float32))


def test_items_whose_vectors_do_not_stack_travel_as_they_are() -> None:
    items = [IndexItem(NS, "a", np.zeros(4), "x", 1.0), IndexItem(NS, "b", np.zeros(3), "y", 2.0)]
    back = _round_trip(ItemBatch(items))
    assert [len(i.vector) for i in back] == [4, 3]  # the shard's own check names the bad one


def test_an_empty_batch_round_trips() -> None:
    assert _round_trip(ItemBatch()) == [] and _round_trip(SearchBatch()) == []


def test_searches_come_back_equal_with_their_types() -> None:
    watch = ((NS, (4, 5)),)
    requests = [
        NamespaceSearch([NS], Query("pets", np.ones(4, dtype=np.float32), k=3, watch=watch)),
        UserSearch("app", "u1", "conv", Query("pets", None, mode="lexical")),
        AppSearch("app", "conv", Query("pets", [0.5, 0.5, 0.5, 0.5], min_score=0.0)),
    ]
    back = _round_trip(SearchBatch(requests))
    assert isinstance(back, SearchBatch)
    for got, sent in zip(back, requests):
        assert type(got) is type(sent) and type(got.query) is Query
        assert got.query._replace(vector=None) == sent.query._replace(vector=None)
        if sent.query.vector is None:
            assert got.query.vector is None
        else:
            np.testing.assert_array_equal(got.query.vector, np.asarray(sent.query.vector, dtype=np.float32))
    assert type(back[0].namespaces[0]) is Namespace and type(back[0].query.watch[0][0]) is Namespace


def test_replies_the_standard_pickler_cannot_take_travel_as_they_are() -> None:
    reply = ShardReply([ShardHit(NS, "a", 0.5, 1.0, '{"id": "a"}')], Bm25Stats(1, 3, {"pet": 1}), {NS: 2}, {NS: [1]})
    only_cloudpickle = ValueError("a failed search", lambda: None)  # (a lambda: cloudpickle only)
    back = _round_trip(ReplyBatch([reply, only_cloudpickle]))
    assert isinstance(back, ReplyBatch) and back[0] == reply and type(back[0].hits[0].namespace) is Namespace
    assert type(back[1]) is ValueError and back[1].args[0] == "a failed search"
