"""`WorkingMemoryHandle`: a conversation's working-memory note as the facade offers it
(``conv.working_memory``): each call written once as an ``a``-prefixed coroutine, its sync twin
derived by :func:`~memray.facade.runner.blocking`."""

from __future__ import annotations

from typing import Any

from memray.conversation.working_memory import WorkingMemory
from memray.conversation.working_memory_spec import WMMode, WorkingMemorySpec, WorkingMemoryValue
from memray.facade.runner import Internals, blocking
from memray.ids import ConversationKey

__all__ = ["WorkingMemoryHandle"]


class WorkingMemoryHandle:
    """The conversation's working-memory note (sync calls and ``a``-prefixed async twins)."""

    def __init__(self, internals: Internals, key: ConversationKey, spec: WorkingMemorySpec) -> None:
        self._runner = internals
        self.key = key
        self.spec = spec

    @property
    def _core(self) -> WorkingMemory:
        stores = self._runner.session.deployment.stores
        return WorkingMemory(stores, self.key.app, self.key.user_id, self.key.conversation_id, self.spec)

    async def aget(self) -> WorkingMemoryValue:
        """The note: its content and version."""
        return await self._runner.arun(self._core.get())

    get = blocking(aget)

    async def aupdate(
        self, content: Any, mode: WMMode = "append", expected_version: int | None = None
    ) -> WorkingMemoryValue:
        """Append (default, safe) or replace; validated after the merge; versioned."""
        return await self._runner.arun(self._core.update(content, mode, expected_version))

    update = blocking(aupdate)

    async def aclear(self) -> WorkingMemoryValue:
        """Empty the note (a new version)."""
        return await self._runner.arun(self._core.clear())

    clear = blocking(aclear)

    async def ainstructions(self) -> str:
        """The note and how to keep it, as text for the system prompt."""
        return await self._runner.arun(self._core.instructions())

    instructions = blocking(ainstructions)

    def tools(self) -> list[dict[str, Any]]:
        """``get_working_memory``, ``update_working_memory``, ``clear_working_memory`` (OpenAI JSON)."""
        return self._core.tools()

    async def acall_tool(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        """Run one of :meth:`tools` by name with the model's arguments; its answer as text."""
        return await self._runner.arun(self._core.call_tool(name, arguments))

    call_tool = blocking(acall_tool)
