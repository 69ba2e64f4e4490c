"""The records memray stores and returns (pydantic v2 models): conversation records in
:mod:`.messages`, the long-term service's in :mod:`.entries`; and :class:`.filter.MessageFilter`,
the request record a message read becomes below the facade (a NamedTuple).

Input is parsed here, at the boundary; past it, code works with these types and never with
untyped dicts.
"""

from memray.models.entries import (
    DeletionProof,
    DeletionReceipt,
    MemoryEntry,
    MemoryResult,
    SearchMemoryResponse,
    SearchRequest,
    check_entry,
)
from memray.models.filter import MessageFilter
from memray.models.messages import (
    MAX_CONTENT_CHARS,
    Context,
    ConversationInfo,
    ConversationOrder,
    DataPart,
    Hit,
    Merge,
    Message,
    MessageInput,
    Part,
    ReasoningPart,
    RetrievalMode,
    Role,
    Scope,
    TextPart,
    ToolPart,
    ToolState,
    check_message,
    coerce_message,
    new_id,
)

__all__ = [
    "MessageFilter",
    "Context",
    "ConversationInfo",
    "ConversationOrder",
    "DataPart",
    "DeletionProof",
    "DeletionReceipt",
    "Hit",
    "MAX_CONTENT_CHARS",
    "MemoryEntry",
    "MemoryResult",
    "Merge",
    "Message",
    "MessageInput",
    "Part",
    "ReasoningPart",
    "RetrievalMode",
    "Role",
    "Scope",
    "SearchMemoryResponse",
    "SearchRequest",
    "TextPart",
    "ToolPart",
    "ToolState",
    "check_entry",
    "check_message",
    "coerce_message",
    "new_id",
]
