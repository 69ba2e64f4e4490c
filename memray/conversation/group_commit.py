"""`GroupCommitter`: one store transaction for the writes of many conversations.

The host's persist wheel (:mod:`memray.conversation.persist`) submits the drained rows of every
conversation due in a slot here at once, one submission per conversation: they are grouped by
partition, one request per partition. While one ``commit_messages`` call of a partition is in
flight, new requests accumulate; the next call carries all of them (up to ``max_rows``). So the
store sees few large Arrow inserts (DuckDB ingests ~1 M rows/s that way, ~2 k rows/s row by
row), and a conversation's write still completes in order because its chain waits for it.

A row the store cannot hold (a data error) does not fail the batch: the store isolates it and
records it as a dead letter (:mod:`memray.store.deadletter`); its submission learns which of its
rows were rejected, every other row of every conversation is committed.
"""

from __future__ import annotations

import asyncio
import functools
from typing import NamedTuple

from memray.rpc.batch import Coalescer
from memray.store.deadletter import CommitResult, DeadLetter
from memray.store.messages import Correction
from memray.store.partitions import StorePartitions
from memray.store.rows import MessageRow, RowList

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
        self._max_rows = max_rows
        # a request: the submissions of one partition from one batch of the wheel
        self._batches: list[Coalescer[list[list[MessageRow]], list[Outcome]]] = [
            Coalescer(functools.partial(self._commit, p), max_rows, weight=_rows) for p in range(len(store))
        ]
        self.commits = 0
        self.rows = 0
        self.rejected = 0

    async def submit_many(self, submissions: list[list[MessageRow]]) -> list[Outcome | Exception]:
        """Persist each submission (one conversation's rows): one request per partition (split
        at ``max_rows``), its partitions in parallel. Per submission, its :class:`Outcome` (its
        rows committed or dead-lettered), or the exception that failed its partition's commit."""
        out: list[Outcome | Exception] = [_NOTHING] * len(submissions)
        requests: dict[int, list[list[int]]] = {}  # partition -> chunks of submission indexes
        size: dict[int, int] = {}  # partition -> rows in its last chunk
        for i, rows in enumerate(submissions):
            if rows:
                p = self._store.partition(rows[0].app, rows[0].user_id)
                chunks = requests.setdefault(p, [[]])
                if chunks[-1] and size[p] + len(rows) > self._max_rows:
                    chunks.append([])
                    size[p] = 0
                chunks[-1].append(i)
                size[p] = size.get(p, 0) + len(rows)

        async def commit(partition: int, chunk: list[int]) -> None:
            try:
                outcomes = await self._batches[partition].get([submissions[i] for i in chunk])
            except Exception as exc:
                outcomes = [exc] * len(chunk)  # type: ignore[list-item]
            for i, outcome in zip(chunk, outcomes):
                out[i] = outcome

        calls = [commit(p, chunk) for p, chunks in requests.items() for chunk in chunks]
        if len(calls) == 1:
            await calls[0]
        elif calls:
            await asyncio.gather(*calls)
        return out

    async def _commit(self, partition: int, requests: list[list[list[MessageRow]]]) -> list[list[Outcome]]:
        submissions = [rows for request in requests for rows in request]
        all_rows = [row for rows in submissions for row in rows]
        result = CommitResult(*await self._store.clients[partition].commit_messages(RowList(all_rows)))
        self.commits += 1
        self.rows += len(all_rows)
        self.rejected += len(result.rejected)
        by_row = {(c.app, c.user_id, c.conversation_id, c.id): c for c in result.corrections}
        bad = dict(zip(result.positions, (DeadLetter(*d) for d in result.rejected)))
        outcomes = []
        start = 0
        for rows in submissions:
            corrections = (
                [by_row[k] for k in ((r.app, r.user_id, r.conversation_id, r.id) for r in rows) if k in by_row]
                if by_row
                else []
            )
            mine = [i - start for i in sorted(bad) if start <= i < start + len(rows)] if bad else []
            outcomes.append(Outcome(corrections, [bad[start + i] for i in mine], [rows[i].id for i in mine]))
            start += len(rows)
        out = []
        start = 0
        for request in requests:  # back to the requests they came in
            out.append(outcomes[start : start + len(request)])
            start += len(request)
        return out


_NOTHING = Outcome([], [])  # a submission with no rows: nothing to commit


def _rows(request: list[list[MessageRow]]) -> int:
    return sum(len(rows) for rows in request)
