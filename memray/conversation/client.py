"""`HostClient`: the typed calls to a :class:`~memray.conversation.host.ConversationHost` (its actor
in Ray mode, the object itself in-process).

Every method has the host's signature and contract. Host calls carry caller-assigned message ids,
so the facade retries them while Ray restarts a host (:meth:`~memray.rpc.client.Client.retrying`);
a retried ``add`` says so (``retried=True``) and gets the seqs its first attempt was given.
"""

from __future__ import annotations

from memray.conversation.host import ConversationHost
from memray.rpc.client import Client, remote

__all__ = ["HostClient"]


class HostClient(Client, core=ConversationHost):
    """Typed calls to one conversation host (see the module docstring)."""

    # -- lifecycle ---------------------------------------------------------------------------------
    start = remote(ConversationHost.start)
    close = remote(ConversationHost.close)
    ping = remote(ConversationHost.ping)
    stats = remote(ConversationHost.stats)
    durable_lag = remote(ConversationHost.durable_lag)
    set_embedder = remote(ConversationHost.set_embedder)

    # -- writes (a retry says so: the host then returns the seqs the first attempt gave) -----------
    add = remote(ConversationHost.add)
    add_many = remote(ConversationHost.add_many)
    flush = remote(ConversationHost.flush)
    wait_indexed = remote(ConversationHost.wait_indexed)

    # -- reads -------------------------------------------------------------------------------------
    messages = remote(ConversationHost.messages)
    recent_many = remote(ConversationHost.recent_many)
    last_seq = remote(ConversationHost.last_seq)

    # -- deletes and erasure -----------------------------------------------------------------------
    evict = remote(ConversationHost.evict)
    delete_messages = remote(ConversationHost.delete_messages)
    clear = remote(ConversationHost.clear)
    count_messages = remote(ConversationHost.count_messages)
    unconfirmed = remote(ConversationHost.unconfirmed)
    evict_user = remote(ConversationHost.evict_user)
    count_user = remote(ConversationHost.count_user)
    clear_caches = remote(ConversationHost.clear_caches)
