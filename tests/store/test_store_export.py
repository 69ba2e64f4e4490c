from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.dataset as ds

from memray.ids import ConversationKey, user_hash
from memray.store.export import EXPORT_BUCKETS
from memray.store.history import HistoryStore

from .conftest import entry, msg

ODD = ConversationKey("a/b=c% 日本", "u 1", "c1")


def read(root: Path, table: str) -> list[tuple]:
    if not list((root / table).glob("**/*.parquet")):
        return []  # DuckDB's read_parquet raises on a glob with no files
    con = duckdb.connect()
    return con.sql(
        f"SELECT app, user_id, id, text, bucket FROM read_parquet('{root}/{table}/**/*.parquet', "
        f"hive_partitioning=true) ORDER BY app, user_id, id"
    ).fetchall()


def test_export_is_incremental_and_readable(store: HistoryStore, tmp_path: Path) -> None:
    root = tmp_path / "exp"
    a, b = ConversationKey("app", "u1", "c1"), ConversationKey("app", "u2", "c1")
    store.append_messages([msg(1, a), msg(2, a), msg(1, b), msg(1, ODD)])
    store.put_entries([entry("e1"), entry("e2", project="P")])
    first = store.export_parquet(str(root))
    assert first["rows"] == 6 and first["files"]
    rows = read(root, "messages")
    assert len(rows) == 4
    assert ("a/b=c% 日本", "u 1", "m1", "message 1", user_hash(ODD.app, ODD.user_id) % EXPORT_BUCKETS) in rows
    assert len(read(root, "entries")) == 2
    assert ds.dataset(str(root / "messages"), partitioning="hive").count_rows() == 4

    again = store.export_parquet(str(root))
    assert again["rows"] == 0 and again["files"] == [] and again["watermark"] == first["watermark"]

    store.append_messages([msg(2, a, text="edited"), msg(3, a)])
    third = store.export_parquet(str(root))
    assert third["rows"] == 2
    assert all("app_key=app" in f for f in third["files"])
    rows = read(root, "messages")
    assert len(rows) == 5  # one row per key: the edit replaced the old copy
    assert ("app", "u1", "m2", "edited", user_hash("app", "u1") % EXPORT_BUCKETS) in rows


def test_export_roots_are_independent(store: HistoryStore, tmp_path: Path) -> None:
    store.append_messages([msg(1)])
    assert store.export_parquet(str(tmp_path / "one"))["rows"] == 1
    assert store.export_parquet(str(tmp_path / "two"))["rows"] == 1
    assert store.export_parquet(str(tmp_path / "one"))["rows"] == 0


def test_deletes_do_not_resurrect_in_exports(store: HistoryStore, tmp_path: Path) -> None:
    root = tmp_path / "exp"
    a, a2 = ConversationKey("app", "u1", "c1"), ConversationKey("app", "u1", "c2")
    store.append_messages([msg(1, a), msg(2, a), msg(1, a2)])
    store.export_parquet(str(root))
    counts = store.delete_conversation(a)
    assert counts["export_rows"] == 2
    assert [r[2] for r in read(root, "messages")] == ["m1"]  # c2's message stays
    store.append_messages([msg(2, a2)])
    store.export_parquet(str(root))
    assert len(read(root, "messages")) == 2  # and the deleted conversation did not come back


def test_purge_exports_removes_only_the_user(store: HistoryStore, tmp_path: Path) -> None:
    root = tmp_path / "exp"
    users = [f"u{i}" for i in range(40)]  # several users share buckets
    store.append_messages([msg(1, ConversationKey("app", u, "c")) for u in users])
    store.put_entries([entry("e1", user="u3")])
    store.export_parquet(str(root))
    assert store.purge_exports(str(root), "app", "u3") == 2
    left = read(root, "messages")
    assert len(left) == 39 and all(r[1] != "u3" for r in left)
    assert read(root, "entries") == []
    assert store.purge_exports(str(root), "app", "u3") == 0


def test_crashed_swap_is_repaired_by_next_export(store: HistoryStore, tmp_path: Path) -> None:
    root = tmp_path / "exp"
    store.append_messages([msg(1)])
    store.export_parquet(str(root))
    # simulate a crash after the old partition went to .trash, before the new one moved in
    part = next((root / "messages").glob("app_key=*/bucket=*"))
    held = root / ".trash" / "op" / "messages" / part.parent.name / part.name
    held.parent.mkdir(parents=True)
    part.rename(held)
    assert list((root / "messages").glob("**/*.parquet")) == []
    store.export_parquet(str(root))  # nothing changed, but the missing partition is rebuilt
    assert [r[2] for r in read(root, "messages")] == ["m1"]
    assert not (root / ".trash").exists()


def test_the_longest_apps_fit_a_folder_name_and_read_back_exactly(store: HistoryStore, tmp_path: Path) -> None:
    from memray.ids import MAX_ID_CHARS
    from memray.store.export import app_key

    apps = ["a" * MAX_ID_CHARS, "日" * MAX_ID_CHARS, "😀" * MAX_ID_CHARS, "/%~" * (MAX_ID_CHARS // 3), "~", "short app"]
    keys = [ConversationKey(app, "u" * MAX_ID_CHARS, "c" * MAX_ID_CHARS) for app in apps]
    store.append_messages([msg(1, k) for k in keys])
    store.put_entries([entry("e1", app=app, user="u", project="p" * MAX_ID_CHARS) for app in apps])
    root = tmp_path / "exp"
    assert store.export_parquet(str(root))["rows"] == 2 * len(apps)
    for path in root.rglob("*"):
        assert len(path.name.encode()) <= 255, path.name
    assert sorted(r[0] for r in read(root, "messages")) == sorted(apps)
    assert sorted(r[0] for r in read(root, "entries")) == sorted(apps)
    assert len({app_key(a) for a in apps}) == len(apps) and app_key("short app") == "short app"
    assert store.purge_exports(str(root), apps[1], "u" * MAX_ID_CHARS) == 1
    assert sorted(r[0] for r in read(root, "messages")) == sorted(a for a in apps if a != apps[1])


def test_a_root_in_the_old_layout_is_rebuilt_in_the_new_one(store: HistoryStore, tmp_path: Path) -> None:
    root = tmp_path / "exp"
    store.append_messages([msg(1), msg(2)])
    store.export_parquet(str(root))
    new = next((root / "messages").glob("app_key=*"))
    new.rename(new.with_name("app=app"))  # as an export before this layout left it
    store.export_parquet(str(root))  # nothing changed, but the old folders are replaced
    assert [p.name for p in (root / "messages").iterdir()] == ["app_key=app"]
    assert [r[2] for r in read(root, "messages")] == ["m1", "m2"]


def test_a_crashed_swap_of_a_hashed_partition_is_repaired(store: HistoryStore, tmp_path: Path) -> None:
    root = tmp_path / "exp"
    long_app = ConversationKey("x" * 200, "u1", "c1")
    store.append_messages([msg(1, long_app)])
    store.export_parquet(str(root))
    part = next((root / "messages").glob("app_key=*/bucket=*"))
    held = root / ".trash" / "op" / "messages" / part.parent.name / part.name
    held.parent.mkdir(parents=True)
    part.rename(held)
    store.export_parquet(str(root))
    assert [r[0] for r in read(root, "messages")] == ["x" * 200]
