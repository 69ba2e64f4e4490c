"""`HostClient`: the typed calls to a :class:`~memray.conversation.host.ConversationHost` (its actor
in Ray mode, the object itself in-process).

Every method has the host's signature and contract. Host calls carry caller-assigned message ids,
so the facade retries them while Ray restarts a host (:meth:`~memray.rpc.client.Client.retrying`);
a retried ``add`` says so (``retried=True``) and gets the seqs its first attempt was given.
"""

from __future__ import annotations

from typing import Any

from memray.config import EmbedderConfig
from memray.conversation.read_your_writes import Tail
from memray.ids import ConversationKey, Namespace
from memray.models import Message
from memray.models.wire import MessageBatch
from memray.rpc.client import Client, resend
from memray.sim_time import Window

__all__ = ["HostClient"]


class HostClient(Client):
    """Typed calls to one conversation host (see the module docstring)."""

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        return await self._call("start")

    async def close(self, timeout_s: float | None = None) -> dict[str, Any]:
        return await self._call("close", timeout_s)

    async def ping(self) -> bool:
        return await self._call("ping")

    async def stats(self) -> dict[str, Any]:
        return await self._call("stats")

    async def durable_lag(self, reset: bool = False, samples: bool = False) -> dict[str, Any]:
        return await self._call("durable_lag", reset, samples)

    async def set_embedder(self, config: EmbedderConfig) -> str:
        return await self._call("set_embedder", config)

    # -- writes (a retry says so: the host then returns the seqs the first attempt gave) -----------
    @resend(retried=True)
    async def add(
        self,
        key: ConversationKey,
        messages: list[Message],
        durable: bool = False,
        retried: bool = False,
        block: bool = True,
    ) -> list[int]:
        return await self._call("add", key, messages, durable, retried=retried, block=block)

    @resend(retried=True)
    async def add_many(
        self,
        batch: list[tuple[ConversationKey, list[Message]]] | MessageBatch,
        durable: bool = False,
        retried: bool = False,
        block: bool = True,
    ) -> list[list[int]]:
        return await self._call("add_many", batch, durable, retried=retried, block=block)

    async def flush(
        self, key: ConversationKey | None = None, timeout_s: float | None = None, report: bool = True
    ) -> None:
        return await self._call("flush", key, timeout_s, report)

    async def wait_indexed(self, timeout_s: float | None = None) -> bool:
        return await self._call("wait_indexed", timeout_s)

    # -- reads -------------------------------------------------------------------------------------
    async def messages(
        self,
        key: ConversationKey,
        limit: int | None = None,
        before_seq: int | None = None,
        after_seq: int | None = None,
        roles: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        window: Window | None = None,
        agent_id: str | None = None,
        sub_agent_id: str | None = None,
    ) -> list[Message]:
        return await self._call(
            "messages", key, limit, before_seq, after_seq, roles, metadata, window, agent_id, sub_agent_id
        )

    async def recent_many(self, requests: list[tuple[ConversationKey, int]]) -> list[tuple[list[Message], Tail]]:
        return await self._call("recent_many", requests)

    async def last_seq(self, key: ConversationKey) -> tuple[int, int]:
        return await self._call("last_seq", key)

    # -- deletes and erasure -----------------------------------------------------------------------
    async def evict(self, key: ConversationKey) -> None:
        return await self._call("evict", key)

    async def delete_messages(self, key: ConversationKey, ids: list[str], timeout_s: float = 60.0) -> dict[str, int]:
        return await self._call("delete_messages", key, ids, timeout_s)

    async def clear(self, key: ConversationKey, timeout_s: float = 60.0) -> dict[str, int]:
        return await self._call("clear", key, timeout_s)

    async def count_messages(self, key: ConversationKey, ids: list[str] | None = None) -> dict[str, int]:
        return await self._call("count_messages", key, ids)

    async def unconfirmed(self) -> list[tuple[Namespace, str]]:
        return await self._call("unconfirmed")

    async def evict_user(self, app: str, user_id: str, timeout_s: float = 60.0) -> int:
        return await self._call("evict_user", app, user_id, timeout_s)

    async def count_user(self, app: str, user_id: str) -> dict[str, int]:
        return await self._call("count_user", app, user_id)

    async def clear_caches(self) -> int:
        return await self._call("clear_caches")
