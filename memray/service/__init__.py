"""The long-term memory service: entries per app/user/project, search, scoped deletes,
and the agent helpers that preload memories, expose a ``load_memory`` tool and store sessions.

:class:`MemoryService` is the async core (no Ray); :mod:`memray.service.erasure` carries out and
verifies ``delete_user`` across every store. What ``mem.memory_service`` returns (sync calls with
``a``-prefixed async twins) is the facade's :class:`~memray.facade.service.MemoryServiceHandle`.
"""

from memray.service.agent import (
    LOAD_MEMORY_TOOL,
    acall_load_memory,
    arelevant_memories_block,
    astore_session,
    call_load_memory,
    format_memories,
    load_memory_tool,
    messages_to_entries,
    relevant_memories_block,
    store_session,
)
from memray.service.entries import coerce_entries, entry_matches
from memray.service.longterm import DEFAULT_LIMIT, MemoryService

__all__ = [
    "MemoryService",
    "DEFAULT_LIMIT",
    "coerce_entries",
    "entry_matches",
    "relevant_memories_block",
    "arelevant_memories_block",
    "format_memories",
    "load_memory_tool",
    "LOAD_MEMORY_TOOL",
    "call_load_memory",
    "acall_load_memory",
    "store_session",
    "astore_session",
    "messages_to_entries",
]
