from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from memray.ids import ConversationKey, conversation_namespace
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow

from .conftest import entry, msg

MARKER = "ZQXJ-ERASE-ME-7781"
VICTIM = ConversationKey("app", "victim", "c1")
BYSTANDER = ConversationKey("app", "bystander", "c1")


def raw_hits(directory: Path, needle: str) -> list[str]:
    """Every file under ``directory`` whose raw bytes contain ``needle``."""
    hits = []
    for dirpath, _, files in os.walk(directory):
        for f in files:
            path = os.path.join(dirpath, f)
            with open(path, "rb") as fh:
                if needle.encode() in fh.read():
                    hits.append(path)
    return hits


def fill(store: HistoryStore) -> None:
    # enough rows that DuckDB writes real blocks (not only the WAL) before the delete
    store.append_messages([msg(i, VICTIM, text=f"{MARKER} secret {i}") for i in range(1, 301)])
    store.append_messages([msg(i, BYSTANDER, text=f"KEEP-BYSTANDER {i}") for i in range(1, 301)])
    store.put_entries([entry("e1", user="victim", text=f"{MARKER} entry")])
    store.put_embeddings([EmbeddingRow(conversation_namespace(VICTIM), "m1", "h", np.ones(4))])
    store.put_working_memory("app", "victim", "user", None, f"{MARKER} wm", 0)
    store.put_summary(VICTIM, f"{MARKER} summary", 10, 0)


def test_delete_user_erases_bytes_physically(store_path: str) -> None:
    data = Path(store_path).parent
    store = HistoryStore(store_path)
    store.open()
    fill(store)
    store.close()  # checkpoint: the marker is now in the .duckdb file's blocks
    store.open()
    assert raw_hits(data, MARKER)
    counts = store.delete_user("app", "victim")
    assert counts == {
        "embeddings": 1,
        "messages": 300,
        "summaries": 1,
        "working_memory": 1,
        "conversations": 1,
        "entries": 1,
        "dead_letters": 0,
        "export_rows": 0,
    }
    assert all(v == 0 for v in store.count_user("app", "victim").values())
    assert raw_hits(data, MARKER) == []
    assert not os.path.exists(store_path + ".wal")
    # the bystander survives, in the store and in the file
    assert len(store.get_messages(BYSTANDER)) == 300
    assert store.count_user("app", "bystander")["messages"] == 300
    store.append_messages([msg(301, BYSTANDER)])  # the reopened connection writes
    store.close()
    assert raw_hits(data, "KEEP-BYSTANDER 7")
    assert raw_hits(data, MARKER) == []
    store.open()
    assert len(store.get_messages(BYSTANDER)) == 301
    store.close()


def test_delete_user_erases_exports_too(store: HistoryStore, tmp_path: Path) -> None:
    fill(store)
    root = tmp_path / "exports"
    store.export_parquet(str(root))
    assert raw_hits(root, MARKER)
    counts = store.delete_user("app", "victim")
    assert counts["export_rows"] == 301  # 300 messages + 1 entry
    assert raw_hits(root, MARKER) == []
    assert raw_hits(root, "KEEP-BYSTANDER")


def test_interrupted_rewrite_is_redone_on_open(store_path: str) -> None:
    store = HistoryStore(store_path)
    store.open()
    fill(store)
    store.close()
    store.open()
    # simulate a crash between the committed delete and the rewrite
    db = store._db  # noqa: SLF001 - driving the two halves of delete_user separately
    with db.transaction():
        for t in ("messages", "conversations", "entries", "embeddings", "working_memory", "summaries"):
            db.sql(f"DELETE FROM {t} WHERE user_id = 'victim'")
        db.mark_rewrite_pending()
    store.close()
    assert raw_hits(Path(store_path).parent, MARKER)  # the freed blocks still hold the bytes
    store.open()
    assert raw_hits(Path(store_path).parent, MARKER) == []
    assert len(store.get_messages(BYSTANDER)) == 300
    store.close()
