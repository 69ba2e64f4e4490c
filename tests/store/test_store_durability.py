from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

from memray.ids import conversation_namespace
from memray.store.history import HistoryStore
from memray.store.rows import EmbeddingRow

from .conftest import KEY, entry, msg


def test_reopen_keeps_everything(store_path: str) -> None:
    s = HistoryStore(store_path)
    s.open()
    s.append_messages([msg(1), msg(2)])
    s.put_entries([entry("e1")])
    s.put_embeddings([EmbeddingRow(conversation_namespace(KEY), "m1", "h", np.ones(3))])
    s.put_working_memory("app", "u1", "user", None, "wm", 0)
    s.put_summary(KEY, "sum", 2, 0)
    s.update_conversation(KEY, "title", {"k": "v"})
    s.close()
    s.close()  # idempotent
    s = HistoryStore(store_path)
    s.open()
    assert [r.seq for r in s.get_messages(KEY)] == [1, 2]
    assert s.get_conversation(KEY)["metadata"] == {"k": "v"}  # type: ignore[index]
    assert s.get_working_memory("app", "u1", "user", None) == ("wm", 1)
    assert s.get_summary(KEY) == ("sum", 2, 1)
    assert len(s.scan_index_rows(0, 1, "h", None, 10)) == 1
    assert s.get_entries("app", "u1", ["e1"])[0].text == "entry e1"
    version = s._db.version  # noqa: SLF001 - the change counter must not go backwards
    assert version > 0
    s.append_messages([msg(3)])
    assert s._db.version == version + 1  # noqa: SLF001
    s.close()


def test_committed_rows_survive_sigkill(store_path: str) -> None:
    child = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from memray.store.history import HistoryStore
        from memray.store.rows import MessageRow
        s = HistoryStore({store_path!r}); s.open()
        rows = [MessageRow("app", "u1", "c1", f"m{{i}}", i, "user", "[]", "{{}}", 1.0, "t") for i in range(1, 501)]
        s.append_messages(rows)
        print("committed", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "committed"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    s = HistoryStore(store_path)
    s.open()
    assert len(s.get_messages(KEY)) == 500
    assert s.get_conversation(KEY)["last_seq"] == 500  # type: ignore[index]
    s.close()


def test_closed_store_raises_closed_error(store_path: str) -> None:
    import pytest

    from memray.errors import ClosedError

    s = HistoryStore(store_path)
    assert not s.ping()
    with pytest.raises(ClosedError):
        s.append_messages([msg(1)])
    s.open()
    assert s.ping()
    s.close()
