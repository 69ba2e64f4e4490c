"""`ShardClient`: the typed calls to a vector shard (a :class:`~memray.index.recovery.RecoveringShard`:
its actor in Ray mode, the object itself in-process).

Every method has the shard's signature and contract (see :class:`~memray.index.shard.VectorShard`
and :class:`~memray.index.recovery.RecoveringShard`).
"""

from __future__ import annotations

from memray.index.recovery import RecoveringShard
from memray.rpc.client import Client, remote

__all__ = ["ShardClient"]


class ShardClient(Client, core=RecoveringShard):
    """Typed calls to one vector shard (see the module docstring)."""

    # -- lifecycle ---------------------------------------------------------------------------------
    open = remote(RecoveringShard.open)
    close = remote(RecoveringShard.close)
    ping = remote(RecoveringShard.ping)
    pid = remote(RecoveringShard.pid)
    stats = remote(RecoveringShard.stats)
    work_stats = remote(RecoveringShard.work_stats)
    is_recovering = remote(RecoveringShard.is_recovering)

    # -- writes ------------------------------------------------------------------------------------
    upsert = remote(RecoveringShard.upsert)
    delete = remote(RecoveringShard.delete)
    drop = remote(RecoveringShard.drop)

    # -- reads -------------------------------------------------------------------------------------
    search = remote(RecoveringShard.search)
    search_many = remote(RecoveringShard.search_many)
    search_user = remote(RecoveringShard.search_user)
    search_app = remote(RecoveringShard.search_app)
    inventory = remote(RecoveringShard.inventory)
    missing_from = remote(RecoveringShard.missing_from)
    count_user = remote(RecoveringShard.count_user)
    count_items = remote(RecoveringShard.count_items)

    # -- model versions (re-embedding) -------------------------------------------------------------
    stage_begin = remote(RecoveringShard.stage_begin)
    stage_upsert = remote(RecoveringShard.stage_upsert)
    cutover = remote(RecoveringShard.cutover)
    stage_abort = remote(RecoveringShard.stage_abort)
    retire_release = remote(RecoveringShard.retire_release)

    # -- recovery and leveling ---------------------------------------------------------------------
    begin_reconcile = remote(RecoveringShard.begin_reconcile)
    reconcile = remote(RecoveringShard.reconcile)
    end_reconcile = remote(RecoveringShard.end_reconcile)
    finish_recovery = remote(RecoveringShard.finish_recovery)
    vector_digest = remote(RecoveringShard.vector_digest)
    vectored_refs = remote(RecoveringShard.vectored_refs)

    # -- snapshots ---------------------------------------------------------------------------------
    snapshot = remote(RecoveringShard.snapshot)
    snapshot_if_changed = remote(RecoveringShard.snapshot_if_changed)
    fork_to = remote(RecoveringShard.fork_to)
