"""`MessageBatch`: an add_many's messages as columns decode to the very messages sent."""

from __future__ import annotations

import gc
import pickle
from typing import Any

import memray
from memray.ids import ConversationKey
from memray.models.messages import DataPart, ReasoningPart, ToolPart
from memray.models.wire import MessageBatch, pack_message, unpack_message

A = ConversationKey.of("app", "u1", "c1")
B = ConversationKey.of("app", "u2", "c2")


def test_columns_decode_to_equal_messages_and_keep_which_ids_the_caller_chose() -> None:
    chosen = memray.Message(id="mine", role="user", parts="hello", metadata={"k": [1, "x"]}, importance=0.5)
    generated = memray.Message(role="assistant", parts="hi there", agent_id="a1", sim_time=12.0)
    mixed = memray.Message(
        role="assistant",
        parts=[
            ReasoningPart(text="thinking"),
            ToolPart(tool_call_id="t1", tool_name="search", input={"q": "x"}, state="output", output=[1, 2]),
            DataPart(name="d", data={"n": None}),
        ],
    )
    items = [(A, [chosen, generated]), (B, []), (B, [mixed])]
    batch = pickle.loads(pickle.dumps(MessageBatch.encode(items)))
    assert batch.columns is not None and len(batch) == 3
    back = batch.decode()
    assert back == items
    assert "id" in back[0][1][0].model_fields_set and "id" not in back[0][1][1].model_fields_set
    assert back[2][1][0].text == mixed.text


def test_a_message_that_is_not_plain_json_travels_as_itself() -> None:
    odd = memray.Message(role="user", parts="x", metadata={"when": {1, 2}})  # a set: not JSON
    batch = MessageBatch.encode([(A, [odd])])
    assert batch.columns is None and batch.decode() == [(A, [odd])]


def test_a_packed_message_unpacks_to_the_message_with_its_seq_and_is_not_tracked() -> None:
    """What a process keeps of a message for long (read-your-writes) is one tuple of plain values,
    which the cyclic collector stops tracking at its first pass."""
    chosen = memray.Message(id="mine", role="user", parts="hello", metadata={"k": [1, "x"]}, importance=0.5)
    generated = memray.Message(role="assistant", parts="hi there", agent_id="a1", sub_agent_id="s", sim_time=12.0)
    tool = memray.Message(role="tool", parts=[ToolPart(tool_call_id="t1", tool_name="search", output={"n": 2})])
    for msg in (chosen, generated, tool):
        packed = pack_message(msg)
        assert packed is not None
        back = unpack_message(packed, 7)
        assert back == msg.model_copy(update={"seq": 7}) and back.text == msg.text
        assert ("id" in back.model_fields_set) == ("id" in msg.model_fields_set)
        gc.collect()
        assert not gc.is_tracked(packed)
    assert pack_message(memray.Message(role="user", parts="x", metadata={"when": {1, 2}})) is None


def test_a_conversation_key_pickles_to_an_equal_key() -> None:
    assert pickle.loads(pickle.dumps(A)) == A and pickle.loads(pickle.dumps([A, B])) == [A, B]


def test_a_message_list_pickles_as_columns_to_equal_messages() -> None:
    import ray.cloudpickle

    from memray.models.wire import MessageList

    msgs = MessageList([memray.Message(role="user", parts="a", seq=1), memray.Message(id="b", role="tool", parts="b")])
    for dumps, loads in ((pickle.dumps, pickle.loads), (ray.cloudpickle.dumps, ray.cloudpickle.loads)):
        back = loads(dumps(msgs))
        assert isinstance(back, MessageList) and back == msgs
    assert msgs.__reduce__()[0] is not MessageList  # as columns, not as the objects
    odd = MessageList([memray.Message(role="user", parts="x", metadata={"s": {1}})])
    assert pickle.loads(pickle.dumps(odd)) == odd


def test_a_lone_text_part_travels_as_its_text_whatever_it_looks_like() -> None:
    texts = ['["not", "parts"]', '"quoted"', '{"type": "data"}', "ünïcode ✓ \u2028"]
    lone_reasoning = memray.Message(role="assistant", parts=[ReasoningPart(text="plain")])
    items = [(A, [memray.Message(role="user", parts=t) for t in texts] + [lone_reasoning])]
    batch = MessageBatch.encode(items)
    assert batch.columns is not None
    assert batch.columns[2][: len(texts)] == texts and type(batch.columns[2][-1]) is bytes  # (JSON)
    assert pickle.loads(pickle.dumps(batch)).decode() == items


def test_refs_pickle_as_columns_to_equal_refs_with_namespaces() -> None:
    import ray.cloudpickle

    from memray.ids import Namespace
    from memray.models.wire import RefList

    a, b = Namespace("app", "u1", "conv", "c1"), Namespace("app", "u2", "user", "")
    for refs in (RefList([(a, "m1", True), (b, "m2", False), (a, "m3", True)]), RefList([(b, "x")]), RefList()):
        for dumps, loads in ((pickle.dumps, pickle.loads), (ray.cloudpickle.dumps, ray.cloudpickle.loads)):
            back = loads(dumps(refs))
            assert isinstance(back, RefList) and back == refs
            assert all(type(ref[0]) is Namespace for ref in back)
    # each namespace once on the wire, however many refs it leads
    _, (namespaces, at, rest) = RefList([(a, f"m{i}") for i in range(50)]).__reduce__()
    assert namespaces == [tuple(a)] and at == [0] * 50 and rest == [tuple(f"m{i}" for i in range(50))]


def test_store_rows_pickle_as_columns_to_equal_rows_of_their_class() -> None:
    import numpy as np
    import ray.cloudpickle

    from memray.ids import Namespace
    from memray.store.rows import EmbeddingRow, MessageRow, RowList

    a, b = Namespace("app", "u1", "conv", "c1"), Namespace("app", "u2", "entry", "")
    message = MessageRow("app", "u1", "c1", "m1", 1, "user", "[]", "{}", 1.5, "hi")
    full = MessageRow("app", "u1", "c1", "m2", 2, "tool", "[]", '{"k": 1}', 2.5, "", 3.0, 0.5, "a", "s")
    v = np.arange(4, dtype=np.float32)
    batches: list[RowList[Any]] = [
        RowList([message, full, message]),
        RowList([EmbeddingRow(a, "m1", "static", None), EmbeddingRow(b, "e1", "static", None)]),
        RowList([EmbeddingRow(a, "m1", "minilm", v), EmbeddingRow(a, "m2", "minilm", v * 2)]),
        RowList([EmbeddingRow(a, "m1", "minilm", v), EmbeddingRow(a, "m2", "minilm", None)]),  # one without
        RowList([EmbeddingRow(a, "m1", "minilm", v), EmbeddingRow(a, "m2", "minilm", v[:2])]),  # two shapes
        RowList([EmbeddingRow(a, "m1", "minilm", [0.5, 1.0])]),  # a list of floats: as it is
        RowList([message, EmbeddingRow(a, "m1", "static", None)]),  # two classes: as they are
        RowList(),
    ]
    for rows in batches:
        for dumps, loads in ((pickle.dumps, pickle.loads), (ray.cloudpickle.dumps, ray.cloudpickle.loads)):
            back = loads(dumps(rows))
            assert isinstance(back, RowList) and len(back) == len(rows)
            for got, sent in zip(back, rows):
                assert type(got) is type(sent) and got[:-1] == sent[:-1]
                assert np.array_equal(got[-1], sent[-1]) if isinstance(sent[-1], np.ndarray) else got[-1] == sent[-1]
                if isinstance(sent, EmbeddingRow):
                    assert type(got.namespace) is Namespace
    # each namespace once and the vectors as one matrix on the wire
    _, (cls, columns) = batches[2].__reduce__()
    assert cls is EmbeddingRow and columns[0] == ("namespaces", ([tuple(a)], [0, 0]))
    assert columns[3][0] == "matrix" and columns[3][1].shape == (2, 4)
