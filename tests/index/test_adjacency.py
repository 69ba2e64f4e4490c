"""A conversation space keeps the adjacency of its messages by seq (neighbour support) up to date
as messages arrive, in place when a message is new; it must equal the adjacency rebuilt from
scratch after any sequence of writes and removals."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memray.ids import Namespace
from memray.index.base import IndexItem
from memray.index.space import Space

NS = Namespace("app", "user", "conv", "c1")

#: (op, doc, seq): put doc at seq (new or moved), or remove doc
ops = st.lists(
    st.tuples(st.sampled_from(["put", "put", "put", "remove", "read"]), st.integers(0, 11), st.integers(0, 14)),
    max_size=40,
)


def put(space: Space, doc: int, seq: int) -> None:
    vec = np.ones(4, dtype=np.float32) / 2.0
    space.upsert([(IndexItem(NS, f"d{doc}", vec, f"text {doc}", float(seq)), vec)])


@settings(max_examples=200, deadline=None)
@given(ops)
def test_the_adjacency_kept_in_place_is_the_one_rebuilt(steps: list[tuple[str, int, int]]) -> None:
    space = Space(NS, 0, 4)
    for op, doc, seq in steps:
        if op == "put":
            put(space, doc, seq)
        elif op == "remove":
            space.remove(f"d{doc}")
        else:
            space.adjacent()  # cached from here: later puts update it in place
        kept = [a.copy() for a in space.adjacent()]
        space._adjacent = None
        rebuilt = space.adjacent()
        assert [a.tolist() for a in kept] == [a.tolist() for a in rebuilt], steps


def test_a_tick_of_new_messages_does_not_rebuild_the_adjacency() -> None:
    space = Space(NS, 0, 4)
    for seq in range(6):
        put(space, seq, seq)
    space.adjacent()
    put(space, 6, 6)
    put(space, 7, 7)
    assert space._adjacent is not None  # kept (and extended), not dropped for a rebuild
    before, after = space.adjacent()
    assert before[space.labels["d6"]] == space.labels["d5"] and after[space.labels["d6"]] == space.labels["d7"]
