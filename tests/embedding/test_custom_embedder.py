"""`memray.open(path, embedder=...)`: an Embedder object or a plain function, in both modes (pickled
to the host actors in Ray mode), checked on every call."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import memray
from memray.embedding.custom import CustomEmbedder
from memray.embedding.hashing import HashEmbedder
from memray.errors import EmbeddingError, ValidationError


def make_function() -> Any:
    inner = HashEmbedder(64)

    def embed(texts: list[str]) -> np.ndarray:
        return inner.embed(texts) * 3.0  # not normalised: memray normalises

    return embed


def make_object() -> Any:
    class Mine:  # a local class: cloudpickle ships it by value to the actors
        model_id = "mine-v1"
        dim = 64
        recomputable = True

        def __init__(self) -> None:
            self.inner = HashEmbedder(64)

        def embed(self, texts: list[str]) -> np.ndarray:
            return self.inner.embed(texts)

    return Mine()


@pytest.mark.parametrize(
    ("make", "mode"),
    [
        (make_function, "inprocess"),
        (make_object, "inprocess"),
        pytest.param(make_function, "ray", marks=pytest.mark.ray),  # a closure, cloudpickled to the hosts
    ],
    ids=["callable-inprocess", "object-inprocess", "callable-ray"],
)
def test_a_callers_embedder_embeds_messages_and_queries(tmp_path, request, mode, make):
    if mode == "ray":
        request.getfixturevalue("ray_session")
    mem = memray.open(str(tmp_path / "d"), mode=mode, hosts=1, shards=1, debounce_ms=10, embedder=make())
    try:
        assert mem.config.embedder.kind == "custom"
        model = mem.internals.embedder.model_id
        assert model == "mine-v1" if make is make_object else model.startswith("custom:") and model.endswith(":64")
        conv = mem.conversation(user_id="u", conversation_id="c")
        conv.add(
            [
                {"id": "a", "role": "user", "content": "the lighthouse keeper feeds the gulls"},
                {"id": "b", "role": "user", "content": "quarterly tax forms are due"},
            ]
        )
        assert mem.wait_indexed()
        store = mem.internals.deployment.stores.clients[0]
        rows = mem.internals.run(store.scan_index_rows(0, 1, model, None, 10))
        if make is make_object:  # recomputable: the items are marked embedded, no vector is kept
            assert rows == [] and mem.internals.run(store.pending_embeddings(model, 10)) == []
        else:  # a plain function is not recomputable: its vectors are stored
            assert {r.doc_id for r in rows} == {"a", "b"}
            assert np.allclose([np.linalg.norm(r.vector) for r in rows], 1.0, atol=1e-5)
        assert [h.message.id for h in conv.search("lighthouse gulls", mode="vector", min_score=0.0, limit=1)] == ["a"]
    finally:
        mem.close(terminate=True)


def test_a_kind_names_an_embedder(tmp_path):
    with memray.open(str(tmp_path / "d"), mode="inprocess", embedder="hash") as mem:
        assert mem.config.embedder.kind == "hash"


def test_what_cannot_be_an_embedder_is_refused_before_anything_opens(tmp_path):
    for bad in (42, "no-such-kind", "custom", None):
        with pytest.raises(ValidationError, match="embedder"):
            memray.open(str(tmp_path / "d"), mode="inprocess", embedder=bad)
    with pytest.raises(ValidationError, match="shape"):
        memray.open(str(tmp_path / "d"), mode="inprocess", embedder=lambda texts: np.zeros(5))
    assert not (tmp_path / "d").exists()


@pytest.mark.ray
def test_an_embedder_that_does_not_pickle_is_refused_in_ray_mode(tmp_path, ray_session):
    lock = threading.Lock()

    def embed(texts: list[str]) -> np.ndarray:
        with lock:
            return HashEmbedder(16).embed(texts)

    with pytest.raises(ValidationError, match="pickled"):
        memray.open(str(tmp_path / "d"), mode="ray", hosts=1, shards=1, embedder=embed)


def test_bad_output_is_an_embedding_error_the_pipeline_retries():
    calls = {"n": 0}

    def flaky(texts: list[str]) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 1:
            return np.ones((len(texts), 4))
        if calls["n"] == 2:
            return np.ones((len(texts), 3))
        return np.full((len(texts), 4), np.nan)

    emb = CustomEmbedder(flaky)
    assert emb.dim == 4
    with pytest.raises(EmbeddingError, match="shape"):
        emb.embed(["a"])
    with pytest.raises(EmbeddingError, match="non-finite"):
        emb.embed(["a"])
    assert emb.embed([]).shape == (0, 4)
