"""The longest valid ids, in every position (app, user, conversation, message, session, project),
work end to end in both modes: writes, search, Parquet export, shard snapshots, erasure and its
file scans. No file or folder name is derived from an id longer than a name may be."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import memray
from memray.ids import MAX_ID_CHARS

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]
LONGEST = {
    "ascii": "a" * MAX_ID_CHARS,
    "cjk": "日" * MAX_ID_CHARS,  # 768 bytes of UTF-8, 2,304 URI-encoded
    "emoji": "😀" * MAX_ID_CHARS,
    "separators": ("/:%~*?" * 43)[:MAX_ID_CHARS],
}


@pytest.fixture(scope="module", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    m = memray.open(
        config=memray.MemoryConfig(
            path=str(tmp_path_factory.mktemp(f"long-{request.param}")),
            mode=request.param,
            hosts=1,
            shards=2,
            debounce_ms=10,
        )
    )
    yield m
    m.close(terminate=True)


@pytest.mark.parametrize("name", list(LONGEST))
def test_longest_ids_everywhere(mem: memray.Memory, name: str) -> None:
    long = LONGEST[name]
    app, user = long, long[:-1] + "u"
    conv = mem.conversation(user_id=user, conversation_id=long, app=app)
    assert conv.add(
        [
            {"id": long, "role": "user", "content": f"the {name} zeppelin lands at noon"},
            {"role": "assistant", "content": "noted"},
        ],
        durable=True,
    ) == [1, 2]
    svc = mem.memory_service
    svc.for_project(long).add_entries(
        app, user, [memray.MemoryEntry(id=long, content=f"{name} zeppelin fact")], session_id=long, replace_session=True
    )
    assert mem.wait_indexed(60)
    assert [h.message.id for h in conv.search("zeppelin lands", limit=1)] == [long]
    found = svc.search(memray.SearchRequest(query="zeppelin fact", user_id=user, app_name=app, project_id=long))
    assert [m.entry.id for m in found.memories] == [long]

    manifest = mem.export()
    assert manifest["files"]
    mem.internals.run(mem.internals.deployment.shards[0].snapshot())
    mem.internals.run(mem.internals.deployment.shards[1].snapshot())
    for directory, dirs, files in os.walk(mem.config.root):
        for n in dirs + files:
            assert len(n.encode()) <= 255, os.path.join(directory, n)

    import duckdb

    got = duckdb.sql(
        f"SELECT DISTINCT app FROM read_parquet('{mem.config.exports_path}/messages/*/*/*.parquet')"
    ).fetchall()
    assert (app,) in got

    before = mem.verify_deleted(app=app, user_id=user)
    assert before.remaining["export_rows"] >= 2 and before.remaining["snapshot_items"] >= 1
    receipt = mem.delete_user(app=app, user_id=user)
    assert receipt.counts["messages"] == 2 and receipt.counts["entries"] == 1
    proof = mem.verify_deleted(app=app, user_id=user)
    assert proof.clean, proof.remaining
