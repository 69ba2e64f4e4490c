"""`delete_user` is a real erasure, in both modes: after a realistic workload (conversations,
entries in projects, working memory, a summary, a Parquet export, shard snapshots) the receipt
counts what was removed, `verify_deleted` is clean, another user is intact, and no file under the
data directory holds any of the erased user's unique words."""

from __future__ import annotations

import os
import time
import uuid

import pytest

import memray
import memray.text
from memray import MemoryEntry, SearchRequest
from memray.config import SummarizerConfig
from memray.embedding.static import DEFAULT_MODEL, load_model, model_folder
from memray.service.erasure import scan_exports, scan_snapshots
from tests.service.conftest import MODES, small_config


def files_holding(root: str, markers: list[str]) -> dict[str, list[str]]:
    """Every file under ``root`` whose raw bytes contain one of ``markers``."""
    found: dict[str, list[str]] = {}
    needles = [m.encode() for m in markers]
    for directory, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                data = f.read()
            hits = [m for m, n in zip(markers, needles) if n in data]
            if hits:
                found[path] = hits
    return found


def memos_holding(markers: list[str], memos: list[dict[str, object]] | None = None) -> list[str]:
    """The texts this process memoised (their term counts, their static vectors: every
    ``TextMemo``, or those of ``memos``) that contain one of ``markers``."""
    if memos is None:
        memos = [memo for ref in memray.text._MEMOS if (memo := ref()) is not None]
    return [text for memo in memos for text in memo if any(m in text for m in markers)]


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture(params=MODES)
def summarizing_mem(request, tmp_path):
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    cfg = small_config(
        str(tmp_path / "data"), request.param, summarizer=SummarizerConfig(trigger_tokens=50, keep_messages=2)
    )
    m = memray.open(config=cfg)
    yield m
    m.close(terminate=True)


def test_delete_user_erases_everything_and_proves_it(summarizing_mem):
    mem = summarizing_mem
    app = "erasure"
    word = lambda: "zq" + uuid.uuid4().hex[:10]  # noqa: E731 - a word no other text contains
    markers = {k: word() for k in ("msg", "wm", "entry", "project", "other_conv")}
    svc = mem.memory_service

    # the user to erase: two conversations, working memory, a summary, entries in two scopes
    conv = mem.conversation(user_id="victim", conversation_id="c1", app=app)
    conv.add(
        [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i}: my secret word is {markers['msg']} and some filler text to summarise",
            }
            for i in range(8)
        ],
        durable=True,
    )
    other = mem.conversation(user_id="victim", conversation_id="c2", app=app)
    other.add({"role": "user", "content": f"second conversation {markers['other_conv']}"}, durable=True)
    conv.working_memory.update(f"victim prefers {markers['wm']}")
    svc.add_entries(
        app,
        "victim",
        [
            MemoryEntry(content=f"global memory {markers['entry']}"),
            MemoryEntry(content=f"another global {markers['entry']}"),
        ],
        session_id="s1",
        replace_session=True,
    )
    svc.for_project("proj").add_entry(app, "victim", MemoryEntry(content=f"project memory {markers['project']}"))

    # a user who must survive
    keeper = mem.conversation(user_id="keeper", conversation_id="c1", app=app)
    keeper.add(
        [{"role": "user", "content": "keeper likes sailing boats"}, {"role": "assistant", "content": "noted: sailing"}],
        durable=True,
    )
    svc.for_project("proj").add_entry(app, "keeper", MemoryEntry(id="k1", content="keeper project about sailing"))

    wait_for(lambda: conv.summary() is not None)
    assert markers["msg"] in conv.summary()
    assert mem.wait_indexed(60)
    manifest = mem.internals.run(mem.internals.deployment.stores.export_parquet(mem.config.exports_path))
    assert manifest["rows"] > 0
    mem.internals.run(mem.internals.router.snapshot())
    # the scans can see the user before the erasure (so finding nothing afterwards means something)
    before = mem.verify_deleted(app=app, user_id="victim")
    assert not before.clean
    assert before.remaining["export_rows"] == 12 and before.remaining["snapshot_items"] == 12
    assert before.remaining["vectors"] == 12 and before.remaining["host_conversations"] == 2
    assert files_holding(mem.config.root, list(markers.values()))
    inprocess = mem.config.mode == "inprocess"  # (in ray mode the memos are in the actors' processes)
    assert not inprocess or memos_holding(list(markers.values()))
    vectors = load_model(model_folder(DEFAULT_MODEL)).memo  # the default embedder's (in process: the hosts')
    assert not inprocess or memos_holding(list(markers.values()), [vectors])

    receipt = mem.delete_user(app=app, user_id="victim")
    assert not inprocess or not memos_holding(list(markers.values()))  # (texts of term counts and vectors, memoised)

    counts = receipt.counts
    assert (receipt.app, receipt.user_id) == (app, "victim")
    assert {k: counts[k] for k in ("messages", "conversations", "entries", "working_memory", "summaries")} == {
        "messages": 9,
        "conversations": 2,
        "entries": 3,
        "working_memory": 1,
        "summaries": 1,
    }
    # 9 messages + 3 entries in the shards; the hash embedder's vectors are not stored (recomputable)
    assert counts["embeddings"] == 0 and counts["vectors"] == 12
    assert counts["export_rows"] == 12 and counts["host_conversations"] == 2 and counts["caches"] > 0

    proof = mem.verify_deleted(app=app, user_id="victim")
    assert proof.clean, proof.remaining
    assert set(proof.remaining) >= {"messages", "entries", "vectors", "export_rows", "snapshot_items", "host_queued"}
    assert any("shard" in s for s in proof.scanned) and any("exports" in s for s in proof.scanned)
    assert files_holding(mem.config.root, list(markers.values())) == {}

    # the other user is intact and still searchable; the erased one is gone from every read path
    assert [m.text for m in keeper.messages()] == ["keeper likes sailing boats", "noted: sailing"]
    assert keeper.search("sailing", limit=2)
    assert [
        r.entry.id
        for r in svc.search(SearchRequest(query="sailing", user_id="keeper", app_name=app, project_id="proj")).memories
    ] == ["k1"]
    assert mem.verify_deleted(app=app, user_id="keeper").remaining["entries"] == 1
    assert conv.messages() == [] and conv.summary() is None and conv.working_memory.get().content is None
    assert svc.search(SearchRequest(query=markers["entry"], user_id="victim", app_name=app)).memories == []

    root = mem.config.root
    mem.close(terminate=True)  # closing (snapshot, checkpoint) must not bring anything back
    assert files_holding(root, list(markers.values())) == {}
    assert scan_snapshots(os.path.join(root, "vectors"), app, "victim") == 0
    assert scan_exports(os.path.join(root, "exports"), app, "keeper") == 3


def test_conversation_delete_removes_its_vectors_and_export_rows(mem, app):
    conv = mem.conversation(user_id="u", conversation_id="gone", app=app)
    kept = mem.conversation(user_id="u", conversation_id="kept", app=app)
    conv.add([{"role": "user", "content": "delete me please"}, {"role": "assistant", "content": "ok"}], durable=True)
    kept.add({"role": "user", "content": "keep me please"}, durable=True)
    assert mem.wait_indexed(60)
    mem.internals.run(mem.internals.deployment.stores.export_parquet(mem.config.exports_path))
    counts = conv.delete()
    assert counts["messages"] == 2 and counts["vectors"] == 2 and counts["export_rows"] == 2
    assert scan_exports(mem.config.exports_path, app, "u") == 1
    assert mem.verify_deleted(app=app, user_id="u").remaining["vectors"] == 1
    assert [h.message.text for h in kept.search("please", scope="user")] == ["keep me please"]


def test_delete_user_ids_are_keyword_only_and_validated(mem):
    with pytest.raises(TypeError):
        mem.delete_user("default", "u")  # type: ignore[misc]
    with pytest.raises(memray.InvalidIdError, match="user_id"):
        mem.delete_user(app="default", user_id="")
