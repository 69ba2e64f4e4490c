"""A data directory written by memray 0.1.0 (before simulation time) opens and keeps working.

``tests/data/datadir-v0.1.0.tgz`` was made by the release before the ``sim_time``,
``importance`` and agent columns existed: a DuckDB file without them and a shard snapshot
without the per-item columns. Both modes open it, read it, search it and write the new fields.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import duckdb
import pytest

import memray
from memray import MemoryEntry, Scoring, SearchRequest

LEGACY = Path(__file__).resolve().parent.parent / "data" / "datadir-v0.1.0.tgz"
MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]


def columns(path: Path, table: str) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
    finally:
        con.close()


@pytest.mark.parametrize("mode", MODES)
def test_a_data_directory_of_the_previous_release_opens_reads_searches_and_takes_new_fields(tmp_path, request, mode):
    if mode == "ray":
        request.getfixturevalue("ray_session")
    with tarfile.open(LEGACY) as tar:
        tar.extractall(tmp_path, filter="data")
    data = tmp_path / "data"
    assert "sim_time" not in columns(data / "history.duckdb", "messages")

    mem = memray.open(str(data), mode=mode, hosts=1, shards=1, debounce_ms=10)
    try:
        conv = mem.conversation(user_id="ada", conversation_id="c1", app="legacy")
        old = conv.messages()
        assert [(m.id, m.seq, m.sim_time, m.agent_id) for m in old] == [("m1", 1, None, None), ("m2", 2, None, None)]
        assert conv.working_memory.get().text == "likes bees"
        assert [h.message.id for h in conv.search("bees roof", limit=1)] == ["m1"]
        assert [
            h.message.id for h in conv.search("bees", limit=2, created_after=1.0)
        ] != []  # created_at from the old snapshot
        found = mem.memory_service.search(SearchRequest(query="oolong tea", user_id="ada", app_name="legacy"))
        assert [m.entry.id for m in found.memories] == ["e1"]

        assert conv.add(
            {"role": "user", "content": "the bees swarmed", "sim_time": 7200.0, "importance": 0.8, "agent_id": "ada"},
            durable=True,
        ) == [3]
        mem.wait_indexed()
        hits = conv.search(
            "bees", limit=3, scoring=Scoring.stream(now=7200.0, recency=1.0, importance=1.0, relevance=0.1)
        )
        assert hits[0].message.id != "m1" and hits[0].message.importance == 0.8
        assert [m.id for m in conv.messages(after=0.0)] == [hits[0].message.id]
        mem.memory_service.add_entry("legacy", "ada", MemoryEntry(content="new fact", sim_time=1.0, importance=0.1))
        if mode == "inprocess":
            mem.export()

    finally:
        mem.close(terminate=True)  # the store actor lets go of the file

    for table, wanted in (
        ("messages", {"sim_time", "importance", "agent_id", "sub_agent_id"}),
        ("entries", {"sim_time", "importance"}),
    ):
        assert wanted <= set(columns(data / "history.duckdb", table))
