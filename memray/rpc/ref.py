"""`ActorRef`: how one core reaches another, the same way in both modes.

A core that depends on another (a host on the store, the router on shards) holds the other's
typed client (:mod:`memray.rpc.client`), which sends each call through an ``ActorRef`` by the
method's name. In-process the call runs on the object itself (serialised like an actor); in Ray
mode it is an actor method call. Cores never import ``ray``.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ActorRef", "RetryingRef"]


class ActorRef(Protocol):
    #: What to call this actor in errors ("shard 3", "history store").
    label: str

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Run ``method`` on the actor and return its result; raise its error.

        Raises :class:`memray.errors.UnavailableError` naming ``label`` if the actor is down.
        """
        ...


class RetryingRef:
    """An :class:`ActorRef` that retries calls while the actor is restarting.

    Only for actors whose calls are idempotent: a host's ``add`` carries message ids assigned by
    the caller, so an ``add`` retried after its actor died (acknowledgement lost or not) merges
    into the same messages instead of duplicating them. ``on_retry`` adds keyword arguments to a
    method's retries (``{"add": {"retried": True}}``: the host then looks up the seqs the first
    attempt may have given, so the retry returns those).
    """

    def __init__(
        self,
        ref: ActorRef,
        timeout_s: float = 30.0,
        backoff_s: float = 0.05,
        on_retry: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.ref = ref
        self.label = ref.label
        self._timeout_s = timeout_s
        self._backoff_s = backoff_s
        self._on_retry = on_retry or {}

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        import asyncio

        from memray.errors import UnavailableError

        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + self._timeout_s, self._backoff_s
        while True:
            try:
                return await self.ref.call(method, *args, **kwargs)
            except UnavailableError:
                if loop.time() + delay > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                kwargs = {**kwargs, **self._on_retry.get(method, {})}  # e.g. add(..., retried=True)

    def __getattr__(self, name: str) -> Any:  # e.g. ``.handle`` of a Ray ref
        return getattr(self.ref, name)
