"""`GroupCommitter`: one store transaction for the writes of many conversations.

Every conversation's persist chain submits its drained rows here. While one ``commit_messages``
call is in flight, new submissions accumulate; the next call carries all of them (up to
``max_rows``). So the store sees few large Arrow inserts (DuckDB ingests ~1 M rows/s that way,
~2 k rows/s row by row), and a conversation's write still completes in order because its chain
waits for it.

A row the store cannot hold (a data error) does not fail the batch: the store isolates it and
records it as a dead letter (:mod:`memray.store.deadletter`); its submission learns which of its
rows were rejected, every other row of every conversation is committed.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from memray.rpc.batch import Coalescer
from memray.store.deadletter import CommitResult, DeadLetter
from memray.store.messages import Correction
from memray.store.partitions import StorePartitions
from memray.store.rows import MessageRow

__all__ = ["GroupCommitter", "Outcome"]


class Outcome(NamedTuple):
    """What became of one submission: seq corrections for ids the store already held, and the
    rows it rejected (dead letters, with ``rejected_ids`` the ids as submitted). Every other row
    is committed."""

    corrections: list[Correction]
    rejected: list[DeadLetter]
    rejected_ids: list[str] = []


class GroupCommitter:
    """Group commits, one stream per history partition: a batch holds one partition's rows, so
    partitions commit in parallel and one that is down holds up no other's writes."""

    def __init__(self, store: StorePartitions, max_rows: int = 20_000) -> None:
        self._store = store
        self._batches: list[Coalescer[list[MessageRow], Outcome]] = [
            Coalescer(functools.partial(self._commit, p), max_rows, weight=len) for p in range(len(store))
        ]
        self.commits = 0
        self.rows = 0
        self.rejected = 0

    async def submit(self, rows: list[MessageRow]) -> Outcome:
        """Persist ``rows`` (one conversation's): committed or dead-lettered when it returns."""
        return await self._batches[self._store.partition(rows[0].app, rows[0].user_id)].get(rows)

    async def _commit(self, partition: int, submissions: list[list[MessageRow]]) -> list[Outcome]:
        all_rows = [row for rows in submissions for row in rows]
        result = CommitResult(*await self._store.clients[partition].commit_messages(all_rows))
        self.commits += 1
        self.rows += len(all_rows)
        self.rejected += len(result.rejected)
        by_row = {(c.app, c.user_id, c.conversation_id, c.id): c for c in result.corrections}
        bad = dict(zip(result.positions, (DeadLetter(*d) for d in result.rejected)))
        out = []
        start = 0
        for rows in submissions:
            keys = [(r.app, r.user_id, r.conversation_id, r.id) for r in rows]
            mine = [i - start for i in sorted(bad) if start <= i < start + len(rows)]
            out.append(
                Outcome(
                    [by_row[k] for k in keys if k in by_row], [bad[start + i] for i in mine], [rows[i].id for i in mine]
                )
            )
            start += len(rows)
        return out
