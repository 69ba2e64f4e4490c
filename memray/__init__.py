"""memray: conversation and long-term memory for AI agents, distributed on Ray.

    import memray
    with memray.open("./memray-data", mode="inprocess") as mem:
        conv = mem.conversation(user_id="u1", conversation_id="c1")
        conv.add([{"role": "user", "content": "hi"}])

The cores (``memray.conversation``, ``memray.store``, ``memray.embedding``, ``memray.index``,
``memray.service``) import without Ray; only ``memray.runtime.actors`` imports it.
"""

from memray.config import EmbedderConfig, IndexConfig, MemoryConfig, SummarizerConfig
from memray.conversation.recall import SearchResults
from memray.conversation.working_memory_spec import WorkingMemorySpec, WorkingMemoryValue
from memray.errors import (
    Backpressure,
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
    SummaryError,
    UnavailableError,
    ValidationError,
)
from memray.facade import (
    ContextCall,
    ConversationHandle,
    ConversationList,
    Internals,
    KeysHandle,
    Memory,
    MemoryServiceHandle,
    ProjectView,
    SearchCall,
    WorkingMemoryHandle,
    open,
)
from memray.ids import ConversationKey, validate_id, validate_project_id
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
from memray.ranking import Scoring
from memray.store.deadletter import DeadLetter

__version__ = "0.1.0"

__all__ = [
    "Backpressure",
    "ClosedError",
    "ConflictError",
    "Context",
    "ContextCall",
    "ConversationHandle",
    "ConversationInfo",
    "ConversationKey",
    "ConversationList",
    "DataPart",
    "DeadLetter",
    "DeadLetterError",
    "DeletionProof",
    "DeletionReceipt",
    "EmbedderConfig",
    "EmbeddingError",
    "Hit",
    "IndexConfig",
    "Internals",
    "InvalidIdError",
    "KeysHandle",
    "Memory",
    "MemoryConfig",
    "MemoryEntry",
    "MemoryResult",
    "MemoryServiceHandle",
    "MemrayError",
    "Message",
    "MissingExtraError",
    "ModelMismatchError",
    "NotFoundError",
    "ProjectView",
    "ReasoningPart",
    "Scoring",
    "SearchCall",
    "SearchMemoryResponse",
    "SearchRequest",
    "SearchResults",
    "StoreError",
    "SummarizerConfig",
    "SummaryError",
    "TextPart",
    "ToolPart",
    "UnavailableError",
    "ValidationError",
    "WorkingMemoryHandle",
    "WorkingMemorySpec",
    "WorkingMemoryValue",
    "open",
    "validate_id",
    "validate_project_id",
]
