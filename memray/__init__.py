"""memray: conversation and long-term memory for AI agents, distributed on Ray.

    import memray
    with memray.open("./memray-data", mode="inprocess") as mem:
        conv = mem.conversation(user_id="u1", conversation_id="c1")
        conv.add([{"role": "user", "content": "hi"}])

The cores (``memray.conversation``, ``memray.store``, ``memray.embedding``, ``memray.index``,
``memray.service``) import without Ray; only ``memray.runtime.actors`` imports it.
"""

from memray.config import EmbedderConfig, IndexConfig, MemoryConfig, SummarizerConfig
from memray.errors import (
    ClosedError,
    ConflictError,
    DeadLetterError,
    EmbeddingError,
    InvalidIdError,
    MemrayError,
    MissingExtraError,
    ModelMismatchError,
    NotFoundError,
    StoreError,
    UnavailableError,
    ValidationError,
)
from memray.ids import ConversationKey, validate_id, validate_project_id
from memray.facade import ConversationHandle, Memory, MemoryServiceHandle, open
from memray.models import (
    Context,
    ConversationInfo,
    DataPart,
    DeletionProof,
    DeletionReceipt,
    Hit,
    MemoryEntry,
    MemoryResult,
    Message,
    ReasoningPart,
    SearchMemoryResponse,
    SearchRequest,
    TextPart,
    ToolPart,
)

__version__ = "0.1.0"

__all__ = [
    "open",
    "Memory",
    "ConversationHandle",
    "MemoryServiceHandle",
    "ConversationKey",
    "MemoryConfig",
    "EmbedderConfig",
    "SummarizerConfig",
    "IndexConfig",
    "Message",
    "TextPart",
    "ReasoningPart",
    "ToolPart",
    "DataPart",
    "Hit",
    "Context",
    "ConversationInfo",
    "MemoryEntry",
    "SearchRequest",
    "MemoryResult",
    "SearchMemoryResponse",
    "DeletionReceipt",
    "DeletionProof",
    "validate_id",
    "validate_project_id",
    "MemrayError",
    "ValidationError",
    "InvalidIdError",
    "NotFoundError",
    "ConflictError",
    "EmbeddingError",
    "ModelMismatchError",
    "StoreError",
    "DeadLetterError",
    "UnavailableError",
    "MissingExtraError",
    "ClosedError",
]
