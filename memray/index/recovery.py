"""Shard recovery: a (re)started shard catches up with the store, then snapshots periodically.

A shard actor that dies is restarted by Ray and reloads its last snapshot, which misses what was
indexed since, and what the embedding pipeline failed to index while the shard was down. The
store is the truth, so :class:`ShardKeeper` pages through the shard's items in the store
(``scan_index_rows(..., unembedded=True)``: with their vector, or ``None`` for items not yet
embedded, which are indexed lexically, and for a recomputable model's, whose vectors the shard
recomputes from the text: :mod:`memray.index.recompute`) and reconciles the shard with them: missing or stale
items are upserted, items the store no longer has are deleted. Writes that arrive during the
pass are remembered by the shard (``begin_reconcile``), so nothing new is deleted.

Why a background thread rather than reconciling lazily on the first call, or in ``__init__``:
Ray restarts an actor by re-running ``__init__`` and queues calls until it returns, so a long
``__init__`` would stall every write and search (and Ray's restart health checks) for the length
of a full store scan; a lazy first call would stall that one caller instead. In a thread, the
shard answers at once: searches raise :class:`~memray.errors.UnavailableError` while it is
:attr:`RecoveringShard.recovering` (the router turns that into a ``degraded`` result naming the
shard, as for a dead shard: a half-recovered shard would silently miss items), and writes are
applied as they come. The keeper touches the shard only through a client — in Ray, of the actor's
own handle — so its work is serialised with every other call and the shard needs no lock.

After recovery the keeper snapshots every ``snapshot_every_s`` if anything changed (only dirty
namespaces are rewritten; the others are hard-linked), so a restart replays little.

Leveling (:func:`level_shard`). A recovery pass reads the store as it is at that moment, and the
store takes vectors at its lowest priority: a vector whose shard upsert failed (the shard was
down) may land in the store *after* the pass read that item without it. Nothing would then bring
it to the shard — lexical recall complete, semantic recall silently not. So a shard is leveled
against the store's embeddings: the store and the shard each compute a count and an
order-independent checksum of the items that have a vector (MD5 of :func:`ref_key`, summed mod
2**64); when they differ, the refs are compared and every item the store has a vector for and the
shard lacks is sent to the shard. The keeper levels a few times after recovering (the late
writes land within seconds); ``Memory.wait_indexed()`` levels every shard before it says True,
so True means every committed, embedded item has its vector in its shard.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from typing import TYPE_CHECKING, NamedTuple

from memray.config import IndexConfig
from memray.errors import UnavailableError
from memray.ids import Namespace
from memray.index.fork import clear_marker
from memray.index.recompute import Recompute
from memray.index.search import ShardReply, ShardSearch
from memray.index.shard import VectorShard
from memray.rpc.client import short_read
from memray.store.partitions import StorePartitions

if TYPE_CHECKING:  # the client is derived from RecoveringShard (memray.rpc.client)
    from memray.index.client import ShardClient

__all__ = ["RecoveringShard", "ShardKeeper", "RecoveryReport", "ref_key", "level_shard", "LevelReport"]

log = logging.getLogger(__name__)


def ref_key(ns: Namespace, doc_id: str) -> str:
    """An item's key for leveling checksums: its five parts joined by U+001F (ids hold no control
    characters, so the join is unambiguous). The store computes the same in SQL."""
    return "\x1f".join((ns.app, ns.user_id, ns.kind, ns.scope, doc_id))


def _md5_low(key: str) -> int:
    """The low 64 bits of the MD5 of ``key``, as DuckDB's ``md5_number_lower`` computes them."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[8:], "little")


class LevelReport(NamedTuple):
    level: bool  # every item with a stored vector has its vector in the shard
    sent: int  # items sent to the shard to get there


async def level_shard(
    store: StorePartitions, shard: ShardClient, shard_id: int, shards: int, page_size: int = 2_000
) -> LevelReport:
    """Bring the shard's vectors level with the store's (module docstring). Items the shard
    holds beyond the store's are left alone (deletes reach shards on their own path)."""
    model_id = str((await shard.stats())["model_id"])
    want = tuple(await store.index_digest(shard_id, shards, model_id))
    if want == tuple(await shard.vector_digest()):
        return LevelReport(True, 0)
    held = {(Namespace(*ns), d) for ns, d in await shard.vectored_refs()}
    missing = [
        (Namespace(*ns), d)
        for ns, d, vectored in await store.index_refs(shard_id, shards, model_id)
        if vectored and (Namespace(*ns), d) not in held
    ]
    for start in range(0, len(missing), page_size):
        rows = await store.fetch_index_rows(missing[start : start + page_size], model_id)
        await shard.reconcile(rows)
    if missing:
        log.info("shard %d leveled with the store: %d vectors were missing", shard_id, len(missing))
    return LevelReport(True, len(missing))


class RecoveryReport(NamedTuple):
    rows: int  # rows read from the store
    upserted: int  # items the shard lacked or held stale
    deleted: int  # items the store no longer has


class RecoveringShard(VectorShard):
    """A :class:`VectorShard` that refuses searches until a :class:`ShardKeeper` has brought it
    level with the store, and snapshots only when something changed."""

    def __init__(
        self,
        shard_id: int,
        path: str,
        dim: int,
        model_id: str,
        config: IndexConfig,
        recovering: bool = True,
        recompute: Recompute | None = None,
    ) -> None:
        super().__init__(shard_id, path, dim, model_id, config, recompute)
        self.recovering = recovering

    def is_recovering(self) -> bool:
        return self.recovering

    def vector_digest(self) -> tuple[int, int]:
        """``(count, checksum)`` of the items holding a vector of the active model (the store's
        ``index_digest`` computes the same for what the shard should hold)."""
        n = total = 0
        for ns, space in self._spaces.items():
            for doc, label in space.labels.items():
                if label in space.vectors:
                    n += 1
                    total += _md5_low(ref_key(ns, doc))
        return n, total % (1 << 64)

    def vectored_refs(self) -> list[tuple[Namespace, str]]:
        """Every (namespace, doc_id) holding a vector of the active model."""
        return [
            (ns, doc)
            for ns, space in self._spaces.items()
            for doc, label in space.labels.items()
            if label in space.vectors
        ]

    def finish_recovery(self) -> int:
        """End the reconcile pass (deleting what the store no longer has); searches resume."""
        deleted = self.end_reconcile()
        self.recovering = False
        clear_marker(self.path)  # a fork's shard: now level with its store (memray.index.fork)
        return deleted

    def _guard(self) -> None:
        if self.recovering:
            raise UnavailableError(f"shard {self.shard_id}", "recovering: catching up with the store")

    @short_read
    def search_many(self, requests: list[ShardSearch]) -> list[ShardReply | Exception]:
        """:meth:`VectorShard.search_many` (which every search goes through), refused while
        recovering."""
        self._guard()
        return super().search_many(requests)


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
        level_after_s: tuple[float, ...] = (1.0, 5.0, 30.0),
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
                    await level_shard(self.store, self.shard, self.shard_id, self.shards, self.page_size)
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
