"""Where :class:`ContextCall`, :class:`SearchCall` and their checks were first written; they
live with the conversation handle (:mod:`memray.facade.conversation`), whose calls they record."""

from memray.facade.conversation import ContextCall, SearchCall, context_read, reads_of, search_read

__all__ = ["ContextCall", "SearchCall", "context_read", "search_read", "reads_of"]
