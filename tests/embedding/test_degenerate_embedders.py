"""Degenerate embedders never turn into empty answers or NaN scores: a constant function, a one-hot
one (it separates "cat" from everything else), all-zero vectors and NaN vectors, through every
search path — the read-your-writes tail, a conversation, a user's conversations, an app-wide
search, a batch of concurrent searches, the long-term service — in-process, and one in Ray mode.
The lexical hits survive, every score is finite, and no warning escapes but the one that says the
vectors are ignored."""

from __future__ import annotations

import asyncio
import json
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memray
from memray.embedding.calibration import CALIBRATION_FILE, DOES_NOT_SEPARATE, CalibrationWarning

DIM = 8


def make(kind: str) -> Callable[[list[str]], np.ndarray]:
    """A plain function embedder of ``kind`` (a closure: it pickles by value to Ray's actors)."""

    def embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if kind == "constant":
            out[:] = 1.0
        elif kind == "one-hot":
            for i, text in enumerate(texts):
                out[i, 0 if "cat" in text else 1] = 1.0
        elif kind == "nan":
            out[:] = np.nan
        return out  # "zero": all zeros

    return embed


CATS = {"c1": "a cat sleeps on the sofa", "c2": "my cat likes fish", "c3": "the cat next door is loud"}


def texts(hits: Any) -> set[str]:
    return {h.message.text for h in hits}


def finite(hits: Any) -> bool:
    return all(math.isfinite(h.score) and 0.0 < h.score <= 1.0 for h in hits)


def until(found: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Wait (on state) until ``found()`` holds: messages reach the index in the background."""
    deadline = time.monotonic() + timeout_s
    while not found():
        assert time.monotonic() < deadline, "not indexed in time"
        time.sleep(0.02)


def exercise(mem: memray.Memory, kind: str) -> None:
    """Every search path finds the lexical hits (module docstring)."""
    convs = {c: mem.conversation(user_id="v" if c == "c3" else "u", conversation_id=c, app="app") for c in CATS}
    for c, conv in convs.items():
        conv.add([{"role": "user", "content": CATS[c]}, {"role": "assistant", "content": "the dog barks at night"}])
    c1 = convs["c1"]
    tail = c1.search("cat")  # right after the add: not indexed yet, scored from the tail
    assert CATS["c1"] in texts(tail) and finite(tail), (kind, tail)
    until(lambda: texts(mem.search_app("app", "cat", limit=10)) == set(CATS.values()))
    for hits in (
        c1.search("cat"),
        c1.search("cat", scope="user"),
        mem.search_app("app", "cat", limit=10),
        c1.context("cat", limit=1, semantic_limit=3).messages,
    ):
        found = texts(hits) if not hits or hasattr(hits[0], "score") else {m.text for m in hits}
        assert CATS["c1"] in found, (kind, hits)
    assert texts(c1.search("cat", scope="user")) == {CATS["c1"], CATS["c2"]}
    assert finite(c1.search("cat", scope="user")) and finite(mem.search_app("app", "cat", limit=10))

    async def together() -> list[Any]:  # concurrent searches: one batch on the shard
        return list(await asyncio.gather(*(conv.asearch("cat", scope="user") for conv in convs.values())))

    for conv, hits in zip(convs, asyncio.run(together())):
        assert texts(hits) == ({CATS["c3"]} if conv == "c3" else {CATS["c1"], CATS["c2"]}) and finite(hits)
    vector = c1.search("cat", mode="vector")  # the vector part is unusable: lexical, and said so
    assert CATS["c1"] in texts(vector) and vector.degraded and vector.reason, (kind, vector)
    svc = mem.memory_service
    svc.add_entries(
        "app",
        "u",
        [memray.MemoryEntry(content="the cat prefers the window", author="user")],
        session_id="s1",
        replace_session=True,
    )
    request = memray.SearchRequest(query="cat", user_id="u", app_name="app")
    until(lambda: bool(svc.search(request).memories))
    memories = svc.search(request).memories
    assert [m.entry.text for m in memories] == ["the cat prefers the window"]
    assert all(math.isfinite(m.score) and m.score > 0.0 for m in memories)


@pytest.mark.parametrize("kind", ["constant", "one-hot", "zero", "nan"])
def test_a_degenerate_embedder_keeps_every_lexical_hit(tmp_path: Path, kind: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with memray.open(str(tmp_path / "d"), mode="inprocess", embedder=make(kind), hosts=1, shards=1) as mem:
            exercise(mem, kind)
    unexpected = [w for w in caught if not issubclass(w.category, (CalibrationWarning, ResourceWarning))]
    assert not unexpected, [str(w.message) for w in unexpected]
    records = json.loads((tmp_path / "d" / CALIBRATION_FILE).read_text()) if kind != "nan" else {}
    if kind == "nan":  # it cannot be calibrated (every vector is refused): tried again at the next open
        assert not (tmp_path / "d" / CALIBRATION_FILE).exists()
    else:  # recorded, with the reason, and said once
        (record,) = records.values()
        assert record["ignored"] == DOES_NOT_SEPARATE and record["threshold"] == 1.0
        assert [str(w.message) for w in caught if w.category is CalibrationWarning] == [
            f"{next(iter(records))}: {DOES_NOT_SEPARATE} (its unrelated text pairs reach cosine "
            f"{record['measured_threshold']:.4g})"
        ]


def test_an_ignored_embedder_is_said_at_every_open_and_calibrated_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(tmp_path / "d")
    with pytest.warns(CalibrationWarning, match="does not separate unrelated texts"):
        memray.open(path, mode="inprocess", embedder=make("one-hot")).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationWarning)  # recorded: not measured, nor warned, again
        with memray.open(path, mode="inprocess", embedder=make("one-hot")) as mem:
            assert mem.internals.encoder.calibration.ignores_vectors
    assert DOES_NOT_SEPARATE in caplog.text


@pytest.mark.ray
def test_a_degenerate_embedder_keeps_the_lexical_hits_in_ray_mode(tmp_path: Path, ray_session: None) -> None:
    with pytest.warns(CalibrationWarning):
        mem = memray.open(str(tmp_path / "d"), mode="ray", hosts=1, shards=1, embedder=make("one-hot"))
    with mem:
        conv = mem.conversation(user_id="u", conversation_id="c1", app="app")
        conv.add([{"role": "user", "content": CATS["c1"]}, {"role": "user", "content": "the dog barks"}])
        assert texts(conv.search("cat")) == {CATS["c1"]}  # the tail
        assert mem.wait_indexed(60.0)
        hits = conv.search("cat")
        assert texts(hits) == {CATS["c1"]} and finite(hits) and not hits.degraded
        assert texts(mem.search_app("app", "cat")) == {CATS["c1"]}
