"""Shard recovery: a (re)started shard catches up with the store, then snapshots periodically.

A shard actor that dies is restarted by Ray and reloads its last snapshot, which misses what was
indexed since, and what the embedding pipeline failed to index while the shard was down. The
store is the truth, so :class:`ShardKeeper` pages through the shard's items in the store
(``scan_index_rows(..., unembedded=True)``: with their vector, or ``None`` for items not yet
embedded, which are indexed lexically) and reconciles the shard with them: missing or stale
items are upserted, items the store no longer has are deleted. Writes that arrive during the
pass are remembered by the shard (``begin_reconcile``), so nothing new is deleted.

Why a background thread rather than reconciling lazily on the first call, or in ``__init__``:
Ray restarts an actor by re-running ``__init__`` and queues calls until it returns, so a long
``__init__`` would stall every write and search (and Ray's restart health checks) for the length
of a full store scan; a lazy first call would stall that one caller instead. In a thread, the
shard answers at once: searches raise :class:`~memray.errors.UnavailableError` while it is
:attr:`RecoveringShard.recovering` (the router turns that into a ``degraded`` result naming the
shard, as for a dead shard: a half-recovered shard would silently miss items), and writes are
applied as they come. The keeper touches the shard only through ``call`` — in Ray, calls on the
actor's own handle — so its work is serialised with every other call and the shard needs no lock.

After recovery the keeper snapshots every ``snapshot_every_s`` if anything changed (only dirty
namespaces are rewritten; the others are hard-linked), so a restart replays little.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from memray.config import IndexConfig
from memray.errors import UnavailableError
from memray.index.fork import clear_marker
from memray.index.search import Query, ShardReply
from memray.index.shard import VectorShard
from memray.store.base import IndexRow
from memray.store.rows import Namespace

__all__ = ["RecoveringShard", "ShardKeeper", "RecoveryReport", "Scan"]

log = logging.getLogger(__name__)

#: ``scan(after, limit)``: the next page of this shard's rows in the store (see module docstring).
Scan = Callable[[tuple[Namespace, str] | None, int], list[IndexRow]]


class RecoveryReport(NamedTuple):
    rows: int  # rows read from the store
    upserted: int  # items the shard lacked or held stale
    deleted: int  # items the store no longer has


class RecoveringShard(VectorShard):
    """A :class:`VectorShard` that refuses searches until a :class:`ShardKeeper` has brought it
    level with the store, and snapshots only when something changed."""

    def __init__(
        self, shard_id: int, path: str, dim: int, model_id: str, config: IndexConfig, recovering: bool = True,
    ) -> None:
        super().__init__(shard_id, path, dim, model_id, config)
        self.recovering = recovering

    def is_recovering(self) -> bool:
        return self.recovering

    def finish_recovery(self) -> int:
        """End the reconcile pass (deleting what the store no longer has); searches resume."""
        deleted = self.end_reconcile()
        self.recovering = False
        clear_marker(self.path)  # a fork's shard: now level with its store (memray.index.fork)
        return deleted

    def _guard(self) -> None:
        if self.recovering:
            raise UnavailableError(f"shard {self.shard_id}", "recovering: catching up with the store")

    def search(self, namespaces: list[Namespace], query: Query) -> ShardReply:
        """:meth:`VectorShard.search` (which ``search_user``/``search_app`` go through), refused
        while recovering."""
        self._guard()
        return super().search(namespaces, query)


class ShardKeeper:
    """Recovers one :class:`RecoveringShard` from the store, then snapshots it periodically.

    ``call(method, *args)`` runs a shard method serialised with the shard's other calls and
    returns its result; ``scan`` reads the store (both may raise: the keeper retries with
    backoff until it succeeds or is stopped).
    """

    def __init__(
        self, call: Callable[..., Any], scan: Scan, snapshot_every_s: float, page_size: int = 2_000,
        retry_s: float = 0.5, retry_max_s: float = 10.0,
    ) -> None:
        self.call = call
        self.scan = scan
        self.snapshot_every_s = snapshot_every_s
        self.page_size = page_size
        self.retry_s = retry_s
        self.retry_max_s = retry_max_s
        self.report: RecoveryReport | None = None
        self.snapshots = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def recover(self) -> RecoveryReport:
        """One full reconcile pass, page by page; the shard serves searches again after it."""
        self.call("begin_reconcile")
        rows = upserted = 0
        after: tuple[Namespace, str] | None = None
        while True:
            page = self.scan(after, self.page_size)
            if not page:
                break
            rows += len(page)
            upserted += int(self.call("reconcile", page))
            after = (Namespace(*page[-1].namespace), page[-1].doc_id)
        deleted = int(self.call("finish_recovery"))
        return RecoveryReport(rows, upserted, deleted)

    def run(self) -> None:
        """Recover (retrying), then snapshot every ``snapshot_every_s`` until :meth:`stop`."""
        delay = self.retry_s
        while not self._stop.is_set():
            try:
                self.report = self.recover()
                log.info("shard recovered from the store: %s", self.report)
                break
            except Exception as exc:  # the store (or this shard's queue) is not ready: retry
                log.warning("shard recovery failed (%r); retrying in %.1f s", exc, delay)
                self._stop.wait(delay)
                delay = min(delay * 2, self.retry_max_s)
        while not self._stop.wait(self.snapshot_every_s):
            try:
                self.snapshots += bool(self.call("snapshot_if_changed"))
            except Exception as exc:
                log.warning("periodic shard snapshot failed: %r", exc)

    def start(self, name: str = "memray-shard-keeper") -> ShardKeeper:
        self._thread = threading.Thread(target=self.run, name=name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
