"""`ActorRef`: how one core calls another, the same way in both modes.

A core that depends on another (a host on the store, the router on shards) holds an
``ActorRef`` and awaits ``ref.call("method", ...)``. In-process the call runs on the object
itself (serialised like an actor); in Ray mode it is an actor method call. Cores never import
``ray``.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ActorRef"]


class ActorRef(Protocol):
    #: What to call this actor in errors ("shard 3", "history store").
    label: str

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Run ``method`` on the actor and return its result; raise its error.

        Raises :class:`memray.errors.UnavailableError` naming ``label`` if the actor is down.
        """
        ...
