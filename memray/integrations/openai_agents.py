"""OpenAI Agents SDK: :class:`MemraySession`, a ``Session`` backed by a memray conversation (the
``[agents]`` extra)::

    from memray.integrations.openai_agents import MemraySession

    session = MemraySession("trip-42", mem, user_id="ada")      # mem = memray.open(...)
    result = await Runner.run(agent, "Book me a table", session=session)

The Runner's history then lives in the conversation ``(app, user_id, session_id)``: it goes
through memray's buffer and persist chain like any message (acknowledged in the buffer, durable
within the debounce window; ``durable=True`` waits for the commit), it is searchable with
memray's recall (``session.conversation.search(...)`` / ``.context(...)``), and
``mem.delete_user`` erases it.

Items
-----
Each item is one message, in order: ``role`` from the item (``developer`` → ``system``; tool
calls, reasoning and other model output → ``assistant``; ``*_output`` items → ``tool``), a text
part with the item's searchable text (a message's text, a call's name and arguments, a tool's
output, a reasoning summary) when it has one, and the item itself, unchanged, in a data part
named ``openai_agents_item``. ``get_items`` returns those items exactly as added (tool calls and
outputs included); a message of the conversation written by other code comes back as
``{"role": ..., "content": text}``. ``pop_item`` deletes the newest message everywhere memray
keeps it (:meth:`memray.facade.conversation.ConversationHandle.delete_messages`); ``clear_session`` deletes
the conversation.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, cast

from memray.errors import MissingExtraError, ValidationError
from memray.facade import ConversationHandle, Memory
from memray.ids import validate_id
from memray.models import DataPart, Message, Part, Role, TextPart, new_id

try:
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised by the missing-extra test in a subprocess
    raise MissingExtraError("openai-agents", "agents") from exc

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["MemraySession", "ITEM_PART"]

#: The name of the data part that carries an Agents SDK item.
ITEM_PART = "openai_agents_item"


class MemraySession:
    """An Agents SDK ``Session`` (the protocol) stored in a memray conversation.

    ``session_id`` is the conversation id; ``user_id`` and ``app`` complete its scope.
    ``session_settings.limit`` is the default ``limit`` of ``get_items``. ``durable=True``
    makes ``add_items`` return only after the store has committed the items.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        memory: Memory,
        *,
        user_id: str,
        app: str = "default",
        session_settings: SessionSettings | None = None,
        durable: bool = False,
    ) -> None:
        self.session_id = validate_id("session_id", session_id)  # (the conversation id, named as the caller named it)
        self.session_settings = session_settings or SessionSettings()
        self.durable = durable
        self._conversation = memory.conversation(user_id=user_id, conversation_id=session_id, app=app)

    @property
    def conversation(self) -> ConversationHandle:
        """The memray conversation holding the history (search, context, summary...)."""
        return self._conversation

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history, oldest first; ``limit``: the latest N items."""
        n = resolve_session_limit(limit, self.session_settings)
        if n is not None and n <= 0:
            return []
        messages = await self._conversation.amessages(limit=n)
        return [item for m in messages if (item := _item_of(m)) is not None]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if items:
            await self._conversation.aadd([_message_of(i) for i in items], durable=self.durable)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item and return it (None when the session is empty)."""
        newest = await self._conversation.amessages(limit=1)
        if not newest:
            return None
        await self._conversation.adelete_messages([newest[0].id])
        return _item_of(newest[0])

    async def clear_session(self) -> None:
        await self._conversation.adelete()


def _message_of(item: TResponseInputItem) -> Message:
    try:
        data = json.loads(json.dumps(item, ensure_ascii=False))  # a detached copy, and proof it round-trips
    except (TypeError, ValueError) as exc:
        raise ValidationError("item", item, f"is not JSON-serialisable: {exc}") from exc
    if not isinstance(data, dict):
        raise ValidationError("item", item, "must be a dict (an Agents SDK input item)")
    text = _text_of(data)
    parts: list[Part] = [TextPart(text=text)] if text else []
    parts.append(DataPart(name=ITEM_PART, data=data))
    return Message(id=new_id(), role=_role_of(data), parts=parts)


def _item_of(message: Message) -> TResponseInputItem | None:
    for part in message.parts:
        if isinstance(part, DataPart) and part.name == ITEM_PART and isinstance(part.data, dict):
            return cast("TResponseInputItem", copy.deepcopy(part.data))
    text = message.text
    if message.role == "tool" or not text:
        return None
    return cast("TResponseInputItem", {"role": message.role, "content": text})


def _role_of(item: dict[str, Any]) -> Role:
    role = item.get("role")
    if role in ("user", "assistant", "system"):
        return cast(Role, role)
    if role == "developer":
        return "system"
    kind = str(item.get("type", ""))
    return "tool" if kind.endswith("_output") else "assistant"


def _text_of(item: dict[str, Any]) -> str:
    """What recall should find the item by."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(p) for p in content if _part_text(p))
    kind = item.get("type")
    if kind == "function_call":
        return f"{item.get('name', '')} {item.get('arguments', '')}".strip()
    if kind == "reasoning":
        return "\n".join(_part_text(p) for p in item.get("summary") or () if _part_text(p))
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(_part_text(p) for p in output if _part_text(p))
    return ""


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return ""
    value = part.get("text") or part.get("refusal")
    return value if isinstance(value, str) else ""


if TYPE_CHECKING:
    from agents.memory.session import Session

    def _is_a_session(session: MemraySession) -> Session:  # mypy proves the protocol is met
        return session
