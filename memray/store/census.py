"""What a history file holds, counted: rows per table, and how its conversations spread over
hosts (the routing memray uses). ``memray stats`` counts a file it opens read-only, or asks the
store of the memray running on it (:meth:`HistoryStore.table_counts`): the same queries."""

from __future__ import annotations

import duckdb

from memray.ids import ConversationKey

__all__ = ["TABLES", "table_counts"]

TABLES = ("conversations", "messages", "entries", "embeddings", "working_memory", "summaries")


def table_counts(con: duckdb.DuckDBPyConnection, hosts: int) -> tuple[dict[str, int], list[int]]:
    """Rows per table of :data:`TABLES` (those the file has), and conversations per host of ``hosts``."""
    present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    counts = {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]) for t in TABLES if t in present}
    per_host = [0] * hosts
    if "conversations" in present:
        for app, user, conv in con.execute("SELECT app, user_id, conversation_id FROM conversations").fetchall():
            per_host[ConversationKey(app, user, conv).route(hosts)] += 1
    return counts, per_host
