"""`GroupCommitter`: one store transaction for the writes of many conversations.

Every conversation's persist chain submits its drained rows here. While one ``append_messages``
call is in flight, new submissions accumulate; the next call carries all of them. So the store
sees few large Arrow inserts (DuckDB ingests ~1 M rows/s that way, ~2 k rows/s row by row), and
a conversation's write still completes in order because its chain waits for it.
"""

from __future__ import annotations

import asyncio

from memray.runtime.ref import ActorRef
from memray.store.rows import MessageRow

__all__ = ["GroupCommitter", "Correction"]

Correction = tuple[str, str, str, str, int, float]  # (app, user_id, conversation_id, id, seq, created_at)


class GroupCommitter:
    def __init__(self, store: ActorRef, max_rows: int = 20_000) -> None:
        self._store = store
        self._max_rows = max_rows
        self._queue: list[tuple[list[MessageRow], asyncio.Future[list[Correction]]]] = []
        self._task: asyncio.Task[None] | None = None
        self.commits = 0
        self.rows = 0

    async def submit(self, rows: list[MessageRow]) -> list[Correction]:
        """Persist ``rows``; return store corrections for them. Durable when it returns."""
        fut: asyncio.Future[list[Correction]] = asyncio.get_running_loop().create_future()
        self._queue.append((rows, fut))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        return await fut

    async def _run(self) -> None:
        try:
            while self._queue:
                batch: list[tuple[list[MessageRow], asyncio.Future[list[Correction]]]] = []
                size = 0
                while self._queue and (not batch or size + len(self._queue[0][0]) <= self._max_rows):
                    rows, fut = self._queue.pop(0)
                    batch.append((rows, fut))
                    size += len(rows)
                await self._commit(batch)
        finally:
            self._task = None

    async def _commit(self, batch: list[tuple[list[MessageRow], asyncio.Future[list[Correction]]]]) -> None:
        all_rows = [row for rows, _ in batch for row in rows]
        try:
            corrections: list[Correction] = await self._store.call("append_messages", all_rows)
        except Exception as exc:
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        self.commits += 1
        self.rows += len(all_rows)
        by_row = {(c[0], c[1], c[2], c[3]): c for c in corrections}
        for rows, fut in batch:
            if not fut.done():
                mine = [by_row[k] for k in ((r.app, r.user_id, r.conversation_id, r.id) for r in rows) if k in by_row]
                fut.set_result(mine)
