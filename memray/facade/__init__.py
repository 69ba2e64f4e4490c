"""The facade: what users hold. :func:`open` gives a :class:`Memory`; from it come
:class:`ConversationHandle` (with its :class:`WorkingMemoryHandle`) and the long-term service's
:class:`MemoryServiceHandle`, and the server's keys (:class:`KeysHandle`). Each call has a sync
form and an ``a``-prefixed asyncio twin; :class:`ContextCall` and :class:`SearchCall` are the
requests of ``mem.context_many`` / ``mem.search_many``. :class:`Internals` (``mem.internals``)
gives jobs and extensions the running parts under a memray.
"""

from memray.facade.conversation import ContextCall, ConversationHandle, SearchCall
from memray.facade.keys import KeysHandle
from memray.facade.memory import Memory, open
from memray.facade.runner import Internals
from memray.facade.service import MemoryServiceHandle, ProjectView
from memray.facade.session import ConversationList
from memray.facade.working_memory import WorkingMemoryHandle

__all__ = [
    "open",
    "Memory",
    "ConversationHandle",
    "ConversationList",
    "WorkingMemoryHandle",
    "MemoryServiceHandle",
    "ProjectView",
    "ContextCall",
    "SearchCall",
    "KeysHandle",
    "Internals",
]
