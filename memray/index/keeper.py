"""A shard kept level with the store, through the shard's client.

What runs *outside* a shard and reaches it only through its :class:`~memray.index.client.ShardClient`
(in Ray, a client of the shard actor's own handle, so the work queues with every other call and
the shard needs no lock): :class:`ShardKeeper`, which recovers a (re)started
:class:`~memray.index.recovery.RecoveringShard` from the store and snapshots it periodically;
:func:`level_shard`, which sends a shard the vectors the store has and it lacks; and the fork's
reconcile passes (:func:`reconcile_shard`, :func:`reconcile_marked`). Why each is needed:
:mod:`memray.index.recovery` and :mod:`memray.index.fork`. The client is derived from the shard
(:mod:`memray.rpc.client`), so these sit above both.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import NamedTuple

from memray.errors import UnavailableError
from memray.ids import Namespace
from memray.index.client import ShardClient
from memray.index.recovery import RecoveryReport
from memray.models.wire import RefList
from memray.store.partitions import StorePartitions

__all__ = [
    "ShardKeeper",
    "level_shard",
    "level_all",
    "LevelReport",
    "LEVEL_SETTLE_S",
    "LEVEL_AFTER_S",
    "reconcile_shard",
    "reconcile_marked",
]

log = logging.getLogger(__name__)

#: When a restarted shard's keeper levels it with the store, in seconds after it recovered: the
#: vectors whose store write landed after the recovery pass read their item land within seconds.
LEVEL_AFTER_S = (1.0, 5.0, 30.0)

#: How long a leveling while hosts write waits for what a shard lacks to arrive, each round
#: (:func:`level_shard`'s ``settle_s``).
LEVEL_SETTLE_S = 1.0


class LevelReport(NamedTuple):
    level: bool  # every item with a stored vector has its vector in the shard
    sent: int  # items sent to the shard to get there


async def level_shard(
    store: StorePartitions,
    shard: ShardClient,
    shard_id: int,
    shards: int,
    page_size: int = 2_000,
    settle_s: float = 0.0,
) -> LevelReport:
    """Bring the shard's vectors level with the store's (module docstring). Items the shard
    holds beyond the store's are left alone (deletes reach shards on their own path).

    ``settle_s``: while hosts write, what the shard lacks may be on its way (a host's pipeline
    gives the store and the shard a batch at once). So the shard is asked again after
    ``settle_s``, for as long as what it lacks keeps arriving, and only what stopped arriving is
    sent. 0: once (nothing is being written: ``wait_indexed``)."""
    model_id = str((await shard.stats())["model_id"])
    want = tuple(await store.index_digest(shard_id, shards, model_id))
    if want == tuple(await shard.vector_digest()):
        return LevelReport(True, 0)
    # the shard is told what the store holds and answers what it lacks: one transfer, not one
    # each way (while writes go on, the shard holds vectors the store has not marked yet, so the
    # digests differ even when nothing is missing)
    listed = await store.index_refs(shard_id, shards, model_id)
    missing = await shard.missing_from(RefList((ns, d) for ns, d, vectored in listed if vectored), vectors=True)
    while missing and settle_s > 0:
        await asyncio.sleep(settle_s)
        still = await shard.missing_from(RefList(missing), vectors=True)
        if len(still) == len(missing):
            break  # nothing arrived meanwhile: what is left is not on its way
        missing = still
    for start in range(0, len(missing), page_size):
        rows = await store.fetch_index_rows(missing[start : start + page_size], model_id)
        await shard.reconcile(rows)
    if missing:
        log.info("shard %d leveled with the store: %d vectors were missing", shard_id, len(missing))
    return LevelReport(True, len(missing))


async def level_all(
    store: StorePartitions,
    shards: list[ShardClient],
    timeout_s: float | None = None,
    poll_s: float = 0.05,
    settle_s: float = 0.0,
) -> LevelReport:
    """:func:`level_shard` every shard (with ``settle_s``), each once it serves: a recovering
    shard is waited for (its recovery reads the store itself), a restarting one (unavailable)
    tried again. ``level`` is False if ``timeout_s`` passed first; ``sent`` counts the vectors
    sent to all of them."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout_s is None else loop.time() + timeout_s
    sent = 0
    for i, shard in enumerate(shards):
        while True:
            try:
                if not await shard.is_recovering():
                    sent += (await level_shard(store, shard, i, len(shards), settle_s=settle_s)).sent
                    break
            except UnavailableError:  # restarting: it recovers, then is leveled
                pass
            if deadline is not None and loop.time() >= deadline:
                return LevelReport(False, sent)
            await asyncio.sleep(poll_s)
    return LevelReport(True, sent)


class ShardKeeper:
    """Recovers one :class:`RecoveringShard` from the store, then snapshots it periodically.

    It runs in a thread of its own with its own event loop, and reaches the shard only through
    ``shard`` (in Ray, a client of the shard actor's own handle: its calls queue with every other
    call) and the store through ``store``; either may fail (the keeper retries with backoff until
    it succeeds or is stopped).
    """

    def __init__(
        self,
        shard: ShardClient,
        store: StorePartitions,
        snapshot_every_s: float,
        shard_id: int = 0,
        shards: int = 1,
        page_size: int = 2_000,
        retry_s: float = 0.5,
        retry_max_s: float = 10.0,
        level_after_s: tuple[float, ...] = LEVEL_AFTER_S,
    ) -> None:
        self.shard = shard
        self.store = store
        self.shard_id = shard_id
        self.shards = shards
        self.level_after_s = level_after_s
        self.leveled = 0  # vectors sent to the shard by leveling after recovery
        self.snapshot_every_s = snapshot_every_s
        self.page_size = page_size
        self.retry_s = retry_s
        self.retry_max_s = retry_max_s
        self.report: RecoveryReport | None = None
        self.snapshots = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    async def recover(self) -> RecoveryReport:
        """One full reconcile pass, page by page, over the store's items of the shard's model (as
        it is when the pass starts); the shard serves searches again after it."""
        model_id = str((await self.shard.stats())["model_id"])
        await self.shard.begin_reconcile()
        rows = upserted = 0
        async for page in self.store.index_pages(self.shard_id, self.shards, model_id, self.page_size, True):
            rows += len(page)
            upserted += int(await self.shard.reconcile(page))
        deleted = int(await self.shard.finish_recovery())
        return RecoveryReport(rows, upserted, deleted)

    def run(self) -> None:
        """Recover (retrying), then snapshot every ``snapshot_every_s`` until :meth:`stop`."""
        asyncio.run(self._run())

    async def _run(self) -> None:
        delay = self.retry_s
        while not self._stop.is_set():
            try:
                self.report = await self.recover()
                log.info("shard recovered from the store: %s", self.report)
                break
            except Exception as exc:  # the store (or this shard's queue) is not ready: retry
                log.warning("shard recovery failed (%r); retrying in %.1f s", exc, delay)
                await self._wait(delay)
                delay = min(delay * 2, self.retry_max_s)
        await self._level_after_recovery()
        while not await self._wait(self.snapshot_every_s):
            try:
                self.snapshots += bool(await self.shard.snapshot_if_changed())
            except Exception as exc:
                log.warning("periodic shard snapshot failed: %r", exc)

    async def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` or until :meth:`stop`; True if stopped."""
        return await asyncio.get_running_loop().run_in_executor(None, self._stop.wait, seconds)

    async def _level_after_recovery(self) -> None:
        """Level the shard with the store a few times after recovering: vectors whose store
        write landed after the recovery pass read their items are sent then."""
        started = time.monotonic()
        for at in self.level_after_s:
            if await self._wait(max(0.0, started + at - time.monotonic())):
                return
            try:
                self.leveled += (
                    await level_shard(
                        self.store, self.shard, self.shard_id, self.shards, self.page_size, LEVEL_SETTLE_S
                    )
                ).sent
            except Exception as exc:  # the store or the shard is busy or down: the next round, or wait_indexed
                log.warning("leveling shard %d failed: %r", self.shard_id, exc)

    def start(self, name: str = "memray-shard-keeper") -> ShardKeeper:
        self._thread = threading.Thread(target=self.run, name=name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


async def reconcile_shard(
    shard: ShardClient, store: StorePartitions, shard_id: int, shards: int, model_id: str, page_size: int = 2_000
) -> tuple[int, int, int]:
    """One reconcile pass of ``shard`` against ``store`` (what a Ray shard's keeper does on every
    start): missing or stale items upserted, items the store lacks deleted. Returns (rows read,
    upserted, deleted)."""
    await shard.begin_reconcile()
    rows = upserted = 0
    async for page in store.index_pages(shard_id, shards, model_id, page_size, True):
        rows += len(page)
        upserted += await shard.reconcile(page)
    deleted = await shard.end_reconcile()
    return rows, upserted, deleted


async def reconcile_marked(
    shard: ShardClient,
    store: StorePartitions,
    shard_id: int,
    shards: int,
    model_id: str,
    changed: list[tuple[Namespace, str]],
) -> tuple[int, int]:
    """Make a fork's shard exact against the fork's store (module docstring) when the marker
    lists the items ``changed`` after the copy. Returns (upserted, deleted)."""
    listed = await store.index_refs(shard_id, shards, model_id)
    # (a Namespace is a tuple: it hashes and compares as one, so no key is rebuilt)
    stored = {(ns, doc) for ns, doc, _ in listed}
    with_vectors = {(ns, doc) for ns, doc, has in listed if has}
    held = set(await shard.inventory())
    held_vectors = set(await shard.vectored_refs())
    todo = (stored - held) | (with_vectors - held_vectors) | (set(changed) & stored)
    rows = await store.fetch_index_rows(sorted(todo), model_id) if todo else []
    upserted = await shard.reconcile(rows, True) if rows else 0
    extra = sorted(held - stored)
    deleted = await shard.delete(extra) if extra else 0
    return upserted, deleted
