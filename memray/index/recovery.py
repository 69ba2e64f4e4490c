"""Shard recovery: a (re)started shard catches up with the store, then snapshots periodically.

A shard actor that dies is restarted by Ray and reloads its last snapshot, which misses what was
indexed since, and what the embedding pipeline failed to index while the shard was down. The
store is the truth, so a :class:`~memray.index.keeper.ShardKeeper` pages through the shard's items in the store
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

Leveling (:func:`~memray.index.keeper.level_shard`). A recovery pass reads the store as it is at that moment, and the
store takes vectors at its lowest priority: a vector whose shard upsert failed (the shard was
down) may land in the store *after* the pass read that item without it. Nothing would then bring
it to the shard — lexical recall complete, semantic recall silently not. So a shard is leveled
against the store's embeddings: the store and the shard each compute a count and an
order-independent checksum of the items that have a vector (MD5 of :func:`ref_key`, summed mod
2**64); when they differ, the refs are compared and every item the store has a vector for and the
shard lacks is sent to the shard. The keeper of a restarted shard levels a few times after
recovering (the late writes land within seconds). A shard's first start needs none: no upsert to
it failed (Ray queues calls to an actor that is starting), and its recovery pass read whatever
the store held. ``Memory.wait_indexed()`` levels every shard before it says True, so True means
every committed, embedded item has its vector in its shard.
"""

from __future__ import annotations

import hashlib
import logging
from typing import NamedTuple

from memray.config import IndexConfig
from memray.errors import UnavailableError
from memray.ids import Namespace
from memray.index.fork import clear_marker
from memray.index.recompute import Recompute
from memray.index.search import ShardReply, ShardSearch
from memray.index.shard import VectorShard
from memray.models.wire import RefList
from memray.rpc.client import short_read

__all__ = ["RecoveringShard", "RecoveryReport", "ref_key"]

log = logging.getLogger(__name__)


def ref_key(ns: Namespace, doc_id: str) -> str:
    """An item's key for leveling checksums: its five parts joined by U+001F (ids hold no control
    characters, so the join is unambiguous). The store computes the same in SQL."""
    return "\x1f".join((ns.app, ns.user_id, ns.kind, ns.scope, doc_id))


def _md5_low(key: str) -> int:
    """The low 64 bits of the MD5 of ``key``, as DuckDB's ``md5_number_lower`` computes them."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[8:], "little")


class RecoveryReport(NamedTuple):
    rows: int  # rows read from the store
    upserted: int  # items the shard lacked or held stale
    deleted: int  # items the store no longer has


class RecoveringShard(VectorShard):
    """A :class:`VectorShard` that refuses searches until a :class:`~memray.index.keeper.ShardKeeper` has brought it
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
        return RefList(
            (ns, doc)
            for ns, space in self._spaces.items()
            for doc, label in space.labels.items()
            if label in space.vectors
        )

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
