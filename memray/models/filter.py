"""`MessageFilter`: which messages of one conversation a read keeps.

The request record that ``conversation.messages(...)`` becomes on its way down: the facade
validates it, a host answers it from its buffer where it can (:meth:`MessageFilter.keeps`), and
the store answers the rest in SQL (:func:`memray.store.messages.get_messages`) — one record
instead of nine arguments spelled at every layer.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from memray.models.messages import Message
from memray.sim_time import Window

__all__ = ["MessageFilter", "ALL_MESSAGES"]


class MessageFilter(NamedTuple):
    """Messages by seq; ``limit``: the most recent N that match (None: all), returned oldest
    first. ``before_seq`` / ``after_seq``: exclusive seq bounds. ``roles``: one of these roles
    (an empty list keeps none). ``metadata``: each key present with an equal JSON value.
    ``window``: simulation and creation time bounds (:class:`~memray.sim_time.Window`).
    ``agent_id``, ``sub_agent_id``: written by that agent (and sub-agent).

    A NamedTuple, like :class:`~memray.sim_time.Window`: it crosses to host and store actors on
    every read, and pickles as a plain tuple."""

    limit: int | None = None
    before_seq: int | None = None
    after_seq: int | None = None
    roles: list[str] | None = None
    metadata: dict[str, Any] | None = None
    window: Window | None = None
    agent_id: str | None = None
    sub_agent_id: str | None = None

    @property
    def recent_only(self) -> bool:
        """Nothing narrows it but ``limit`` and ``before_seq``: the most recent messages (before a
        seq), which a host's buffer may hold whole."""
        return (
            self.after_seq is None
            and self.roles is None
            and not self.metadata
            and self.window is None
            and self.agent_id is None
            and self.sub_agent_id is None
        )

    def keeps(self, msg: Message) -> bool:
        """Whether ``msg`` passes every filter but ``limit`` (the store applies the same ones in SQL)."""
        seq = msg.seq or 0
        if self.window is not None and not _in_window(msg, Window(*self.window)):
            return False
        if self.agent_id is not None and msg.agent_id != self.agent_id:
            return False
        if self.sub_agent_id is not None and msg.sub_agent_id != self.sub_agent_id:
            return False
        if self.before_seq is not None and seq >= self.before_seq:
            return False
        if self.after_seq is not None and seq <= self.after_seq:
            return False
        if self.roles is not None and msg.role not in self.roles:
            return False
        if self.metadata:
            return all(k in msg.metadata and msg.metadata[k] == v for k, v in self.metadata.items())
        return True


#: The filter that keeps every message (the default of a read).
ALL_MESSAGES = MessageFilter()


def _in_window(msg: Message, w: Window) -> bool:
    for value, lo, hi in ((msg.sim_time, w.after, w.before), (msg.created_at, w.created_after, w.created_before)):
        if (lo is not None or hi is not None) and value is None:
            return False
        if (lo is not None and value < lo) or (hi is not None and value >= hi):  # type: ignore[operator]
            return False
    return True
