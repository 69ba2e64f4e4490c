"""The typed calls to a :class:`~memray.store.history.HistoryStore` (its actor in Ray mode, the
object itself in-process), derived from the store's own methods.

Every call has the store's signature, contract and declared priority (see
:class:`~memray.store.history.HistoryStore` and :mod:`memray.rpc.client`): the store actor serves
one call at a time and lets the most urgent waiting call in first — message commits, which durable
lag waits for, before reads and other writes, before background work (vectors, scans, exports).

- :class:`StoreCalls`: the calls a whole store answers, one partition or many (each has a
  ``@route`` on the store: :mod:`memray.store.routing`). Both views below are ``StoreCalls``.
- :class:`StoreClient`: one partition's client: every store call, the partition's own ones too
  (``pid``, ``scan_index_rows``, ``version``, exports into a given root…).
- :class:`~memray.store.partitions.StorePartitions`: the router over every partition's client.
"""

from __future__ import annotations

from memray.rpc.client import Calls, Client, remote
from memray.store.history import HistoryStore

__all__ = ["StoreCalls", "StoreClient"]


class StoreCalls(Calls):
    """The store calls that a store of many partitions answers too (each routed on the store)."""

    # -- lifecycle -----------------------------------------------------------------------------
    open = remote(HistoryStore.open)
    close = remote(HistoryStore.close)
    ping = remote(HistoryStore.ping)

    # -- messages and dead letters -------------------------------------------------------------
    append_messages = remote(HistoryStore.append_messages)
    commit_messages = remote(HistoryStore.commit_messages)
    record_dead_letters = remote(HistoryStore.record_dead_letters)
    dead_letters = remote(HistoryStore.dead_letters)
    resolve_acknowledged = remote(HistoryStore.resolve_acknowledged)
    stored_seqs = remote(HistoryStore.stored_seqs)
    assigned_seqs = remote(HistoryStore.assigned_seqs)
    count_dead_letters = remote(HistoryStore.count_dead_letters)
    load_conversation = remote(HistoryStore.load_conversation)
    context_extras = remote(HistoryStore.context_extras)
    load_conversations = remote(HistoryStore.load_conversations)
    get_messages = remote(HistoryStore.get_messages)
    fetch_messages = remote(HistoryStore.fetch_messages)

    # -- conversations -------------------------------------------------------------------------
    create_conversation = remote(HistoryStore.create_conversation)
    get_conversation = remote(HistoryStore.get_conversation)
    list_conversations = remote(HistoryStore.list_conversations)
    count_conversations = remote(HistoryStore.count_conversations)
    retitle = remote(HistoryStore.retitle)
    update_conversation = remote(HistoryStore.update_conversation)
    delete_conversation = remote(HistoryStore.delete_conversation)
    delete_messages = remote(HistoryStore.delete_messages)
    clear_messages = remote(HistoryStore.clear_messages)
    count_messages = remote(HistoryStore.count_messages)

    # -- embeddings and shard recovery ---------------------------------------------------------
    put_embeddings = remote(HistoryStore.put_embeddings)
    mark_embedding_failed = remote(HistoryStore.mark_embedding_failed)
    pending_embeddings = remote(HistoryStore.pending_embeddings)
    missing_embeddings = remote(HistoryStore.missing_embeddings)
    index_digest = remote(HistoryStore.index_digest)
    index_refs = remote(HistoryStore.index_refs)
    fetch_index_rows = remote(HistoryStore.fetch_index_rows)

    # -- working memory and summaries ----------------------------------------------------------
    get_working_memory = remote(HistoryStore.get_working_memory)
    put_working_memory = remote(HistoryStore.put_working_memory)
    get_summary = remote(HistoryStore.get_summary)
    put_summary = remote(HistoryStore.put_summary)

    # -- long-term entries ---------------------------------------------------------------------
    get_entries = remote(HistoryStore.get_entries)
    list_entries = remote(HistoryStore.list_entries)
    entry_projects = remote(HistoryStore.entry_projects)
    delete_entries = remote(HistoryStore.delete_entries)

    # -- the server's API keys (the first partition's) -----------------------------------------
    put_api_key = remote(HistoryStore.put_api_key)
    api_keys = remote(HistoryStore.api_keys)
    revoke_api_key = remote(HistoryStore.revoke_api_key)
    delete_user_api_keys = remote(HistoryStore.delete_user_api_keys)
    count_user_api_keys = remote(HistoryStore.count_user_api_keys)

    # -- erasure and exports -------------------------------------------------------------------
    delete_user = remote(HistoryStore.delete_user)
    count_user = remote(HistoryStore.count_user)
    export_roots = remote(HistoryStore.export_roots)


class StoreClient(Client, StoreCalls, core=HistoryStore):
    """Typed calls to one history store (partition): every call of :class:`StoreCalls`, and the
    partition's own."""

    # -- a partition's own: diagnostics, shard scans, forks, exports into a given root ---------
    pid = remote(HistoryStore.pid)
    write_stats = remote(HistoryStore.write_stats)
    scan_index_rows = remote(HistoryStore.scan_index_rows)
    put_entries = remote(HistoryStore.put_entries)
    fork_to = remote(HistoryStore.fork_to)
    version = remote(HistoryStore.version)
    changed_refs = remote(HistoryStore.changed_refs)
    table_counts = remote(HistoryStore.table_counts)
    export_parquet = remote(HistoryStore.export_parquet)
    purge_exports = remote(HistoryStore.purge_exports)
