"""`WorkingMemoryHandle`: a conversation's working-memory note as the facade offers it
(``conv.working_memory``): sync calls and ``a``-prefixed asyncio twins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memray.conversation.working_memory import WorkingMemory
from memray.conversation.working_memory_spec import WMMode, WorkingMemorySpec, WorkingMemoryValue
from memray.ids import ConversationKey

if TYPE_CHECKING:
    from memray.facade.memory import Memory

__all__ = ["WorkingMemoryHandle"]


class WorkingMemoryHandle:
    """The conversation's working-memory note (sync calls and ``a``-prefixed async twins)."""

    def __init__(self, memory: Memory, key: ConversationKey, spec: WorkingMemorySpec) -> None:
        self._mem = memory
        self.key = key
        self.spec = spec

    @property
    def _core(self) -> WorkingMemory:
        return WorkingMemory(
            self._mem._deployment.stores, self.key.app, self.key.user_id, self.key.conversation_id, self.spec
        )

    def get(self) -> WorkingMemoryValue:
        return self._mem._run(self._core.get())

    async def aget(self) -> WorkingMemoryValue:
        return await self._mem._arun(self._core.get())

    def update(self, content: Any, mode: WMMode = "append", expected_version: int | None = None) -> WorkingMemoryValue:
        """Append (default, safe) or replace; validated after the merge; versioned."""
        return self._mem._run(self._core.update(content, mode, expected_version))

    async def aupdate(
        self, content: Any, mode: WMMode = "append", expected_version: int | None = None
    ) -> WorkingMemoryValue:
        return await self._mem._arun(self._core.update(content, mode, expected_version))

    def clear(self) -> WorkingMemoryValue:
        return self._mem._run(self._core.clear())

    async def aclear(self) -> WorkingMemoryValue:
        return await self._mem._arun(self._core.clear())

    def instructions(self) -> str:
        return self._mem._run(self._core.instructions())

    async def ainstructions(self) -> str:
        return await self._mem._arun(self._core.instructions())

    def tools(self) -> list[dict[str, Any]]:
        """``get_working_memory``, ``update_working_memory``, ``clear_working_memory`` (OpenAI JSON)."""
        return self._core.tools()

    def call_tool(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        return self._mem._run(self._core.call_tool(name, arguments))

    async def acall_tool(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        return await self._mem._arun(self._core.call_tool(name, arguments))
