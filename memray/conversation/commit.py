"""`GroupCommitter`: one store transaction for the writes of many conversations.

Every conversation's persist chain submits its drained rows here. While one ``append_messages``
call is in flight, new submissions accumulate; the next call carries all of them (up to
``max_rows``). So the store sees few large Arrow inserts (DuckDB ingests ~1 M rows/s that way,
~2 k rows/s row by row), and a conversation's write still completes in order because its chain
waits for it.
"""

from __future__ import annotations

from memray.runtime.batch import Coalescer
from memray.runtime.ref import ActorRef
from memray.store.rows import MessageRow

__all__ = ["GroupCommitter", "Correction"]

Correction = tuple[str, str, str, str, int, float]  # (app, user_id, conversation_id, id, seq, created_at)


class GroupCommitter:
    def __init__(self, store: ActorRef, max_rows: int = 20_000) -> None:
        self._store = store
        self._batch: Coalescer[list[MessageRow], list[Correction]] = Coalescer(self._commit, max_rows, weight=len)
        self.commits = 0
        self.rows = 0

    async def submit(self, rows: list[MessageRow]) -> list[Correction]:
        """Persist ``rows``; return store corrections for them. Durable when it returns."""
        return await self._batch.get(rows)

    async def _commit(self, submissions: list[list[MessageRow]]) -> list[list[Correction]]:
        all_rows = [row for rows in submissions for row in rows]
        corrections: list[Correction] = await self._store.call("append_messages", all_rows)
        self.commits += 1
        self.rows += len(all_rows)
        by_row = {c[:4]: c for c in corrections}
        return [[by_row[k] for k in ((r.app, r.user_id, r.conversation_id, r.id) for r in rows) if k in by_row]
                for rows in submissions]
