"""An embedding endpoint that fails never loses or blocks a message, in both modes.

Against the fake OpenAI server: while every embeddings request fails, adds succeed, messages are
durable and readable, lexical search finds them and ``context()`` still assembles the recent
messages; once the endpoint recovers the pipeline's retries embed them without any help.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import memray
from memray.config import EmbedderConfig
from memray.embedding import build_embedder
from memray.errors import ModelMismatchError

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
FACTS = [
    "My sister Ingrid lives in Reykjavik and restores old sailboats.",
    "The quarterly budget review moved to Thursday afternoon.",
    "I adopted a grey cat named Pixel last spring.",
]


def poll(check: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return str(request.param)


@pytest.fixture
def open_mem(mode: str, tmp_path, openai_server) -> Iterator[Callable[[], memray.Memory]]:
    opened: list[memray.Memory] = []

    def make() -> memray.Memory:
        embedder = EmbedderConfig(kind="openai", model="fake-embed", base_url=openai_server.url, dim=64, max_retries=0)
        config = memray.MemoryConfig(
            path=str(tmp_path / "m"), mode=mode, hosts=1, shards=2, debounce_ms=20, embedder=embedder
        )
        opened.append(memray.open(config=config))
        return opened[-1]

    yield make
    for mem in opened:
        mem.close(terminate=True)


def error_of(mem: memray.Memory) -> str | None:
    error: str | None = mem.stats()[0]["embedding_error"]
    return error


def pending(mem: memray.Memory, model_id: str) -> list[Any]:
    return mem.internals.run(mem.internals.deployment.stores.pending_embeddings(model_id, 100))


def test_failing_endpoint_loses_nothing_and_catches_up(open_mem, openai_server) -> None:
    openai_server.fail_always(500)
    mem = open_mem()
    conv = mem.conversation(user_id="u1", conversation_id=uuid.uuid4().hex)
    for fact in FACTS:
        conv.add({"role": "user", "content": fact})
    conv.add({"role": "assistant", "content": "Noted."}, durable=True)
    model_id = mem.internals.embedder.model_id

    assert [m.text for m in conv.messages()] == [*FACTS, "Noted."]
    stored = mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))
    assert [r.text for r in stored] == [*FACTS, "Noted."]
    assert not mem.wait_indexed(1)  # durable, but not embedded: they wait for their retry
    assert len(pending(mem, model_id)) == 4  # durable, not embedded
    assert poll(lambda: "500" in (error_of(mem) or ""), 30)  # the first attempt may still be under way

    lexical = conv.search("Where does Ingrid live?", limit=1, mode="lexical")
    assert [h.message.text for h in lexical] == [FACTS[0]] and not lexical.degraded
    hybrid = conv.search("Where does Ingrid live?", limit=1)  # the query cannot be embedded either
    assert [h.message.text for h in hybrid] == [FACTS[0]]
    assert hybrid.degraded and "query embedding failed" in (hybrid.reason or "")
    ctx = conv.context("Ingrid sailboats", limit=2, semantic_limit=2)
    assert [m.text for m in ctx.messages] == [FACTS[2], "Noted.", FACTS[0]]  # recent, then recalled lexically
    assert ctx.degraded and "query embedding failed" in (ctx.reason or "")

    openai_server.clear_failures()
    assert mem.wait_indexed(60), "the pipeline did not retry after the endpoint recovered"
    assert pending(mem, model_id) == []

    def vector_found() -> bool:
        hits = conv.search("a grey cat named Pixel", limit=1, mode="vector")
        return not hits.degraded and [h.message.text for h in hits] == [FACTS[2]]

    assert poll(vector_found, 30)
    assert error_of(mem) is None


def test_wrong_dimension_says_to_re_embed_and_keeps_messages(open_mem, openai_server) -> None:
    openai_server.force_dim = 12
    mem = open_mem()
    conv = mem.conversation(user_id="u2", conversation_id="c")
    conv.add([{"role": "user", "content": fact} for fact in FACTS], durable=True)
    assert not mem.wait_indexed(1)
    assert [m.text for m in conv.messages()] == FACTS

    error = poll(lambda: error_of(mem), 30) or ""
    assert "ModelMismatchError" in error and "re-embed" in error and "dim=12" in error
    hits = conv.search("grey cat Pixel", limit=1)
    assert [h.message.text for h in hits] == [FACTS[2]]
    assert hits.degraded and "re-embed" in (hits.reason or "")
    with pytest.raises(ModelMismatchError, match="re-embed"):
        build_embedder(mem.config.embedder).embed(["hello"])  # type: ignore[union-attr]


def test_slow_endpoint_makes_texts_findable_before_vectors_arrive(open_mem, openai_server) -> None:
    mem = open_mem()
    conv = mem.conversation(user_id="u3", conversation_id="c")
    conv.add({"role": "user", "content": "warm up"}, durable=True)
    assert mem.wait_indexed(30)  # the embedder's client is up
    openai_server.hang_next(1, seconds=120, path="/v1/embeddings")
    before = openai_server.count("/v1/embeddings")
    conv.add({"role": "user", "content": FACTS[1]}, durable=True)
    assert poll(lambda: openai_server.count("/v1/embeddings") > before, 60)  # the pipeline's request is held

    def by_text() -> bool:
        return [h.message.text for h in conv.search("budget review Thursday", limit=1, mode="lexical")] == [FACTS[1]]

    assert poll(by_text, 60)  # while the request still hangs
    assert FACTS[1] not in [
        h.message.text for h in conv.search("budget review", limit=5, mode="vector")
    ]  # no vector yet
    openai_server.release()
    assert mem.wait_indexed(60)
    assert [h.message.text for h in conv.search("budget review Thursday", limit=1, mode="vector")] == [FACTS[1]]
