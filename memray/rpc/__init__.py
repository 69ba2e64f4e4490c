"""Call plumbing, below every core: how one part calls another, the same way in both modes.

:mod:`.ref` (the :class:`~memray.rpc.ref.ActorRef` protocol and retries), :mod:`.local`
(in-process refs and the facade's event-loop thread) and :mod:`.batch` (coalescing concurrent
calls into one). Nothing here imports a core or ``ray``.
"""
