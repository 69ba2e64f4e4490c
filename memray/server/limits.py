"""Every cap and bound of the server, in one place (``docs/server.md`` lists them).

Caps on what one request may ask for are fixed: they are part of the API (the OpenAPI schema
and the MCP tools' input schemas state them), and a request past one is refused with a 413 or
422 naming the cap and the value, before anything is read or written. Bounds on time and
concurrency are :class:`~memray.server.settings.ServerSettings` fields, with ``memray serve``
flags. Defaults of the operations' arguments are :mod:`memray.arguments`' (the facade's too), so
a default is written once; the operations that state these caps are :mod:`memray.server.operations`.
"""

from __future__ import annotations

__all__ = [
    "MAX_BATCH_ITEMS",
    "MAX_MESSAGES_PER_ADD",
    "MAX_ENTRIES_PER_ADD",
    "MAX_IDS_PER_DELETE",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "MAX_TEXT_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_ID_CHARS",
    "MAX_PARTS",
]

#: Items of one batch (``/messages/batch`` items, ``/search/batch`` searches).
MAX_BATCH_ITEMS = 100
#: Messages of one add (also per item of a batch add).
MAX_MESSAGES_PER_ADD = 100
#: Entries of one add.
MAX_ENTRIES_PER_ADD = 100
#: Ids of one delete by ids.
MAX_IDS_PER_DELETE = 1000
#: ``limit`` of every list and search (results, messages, conversations, entries).
MAX_LIMIT = 1000
#: ``offset`` of a page of conversations.
MAX_OFFSET = 1_000_000
#: Characters of one message's or entry's text content, and of a working memory.
MAX_TEXT_CHARS = 200_000
#: Characters of a search or context query, and of a delete-by-query.
MAX_QUERY_CHARS = 10_000
#: Characters of an id (memray's id rule: 1-256 characters).
MAX_ID_CHARS = 256
#: Parts of one message whose content is a list of parts.
MAX_PARTS = 100
