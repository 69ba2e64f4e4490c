"""Context assembly: the messages an agent prompt needs, as pure functions.

:func:`assemble` takes the recent messages (oldest first), the recalled ones (best first), the
summary and the working-memory block, and returns a :class:`~memray.models.Context` whose
``messages`` are, in order:

1. the summary as one system message wrapped in ``<agent_summary>`` (when there is one);
2. the working-memory block as one system message (when there is one);
3. the conversation, merged by strategy:

   * ``append`` (default): the recent block, then the recalled block in rank order;
   * ``prepend``: the recalled block in rank order, then the recent block;
   * ``interleave``: one chronological list, recent and recalled together sorted by ``seq``
     (stable; messages without a ``seq`` go last). ``seq`` orders one conversation only, so for
     recall across a user's conversations prefer ``append`` or ``prepend``.

Recalled messages are deduplicated against the recent ones (and each other) by id; old summary
and working-memory messages are dropped from both inputs, so they are never fed back.

With ``token_budget``, messages are dropped until the estimate fits: the lowest-ranked recalled
first, then the oldest recent. A tool call and its result (messages sharing a
``tool_call_id``) are kept or dropped together, and the newest recent message is always kept,
as are the summary and working-memory blocks: the budget is a target those may exceed.
Degradation (recall failed) is the caller's business: pass ``degraded`` and ``reason`` through.
"""

from __future__ import annotations

from typing import Literal, get_args

from memray.conversation.summary import EstimateTokens, is_summary_message, message_tokens, summary_message
from memray.errors import ValidationError
from memray.models import Context, Message, TextPart
from memray.text import estimate_tokens as default_estimate_tokens

__all__ = [
    "MergeStrategy",
    "WORKING_MEMORY_MARKER",
    "WORKING_MEMORY_MESSAGE_ID",
    "assemble",
    "dedupe_recalled",
    "merge_messages",
    "fit_budget",
    "tool_units",
    "working_memory_message",
]

MergeStrategy = Literal["append", "prepend", "interleave"]
#: Metadata key that marks the working-memory system message.
WORKING_MEMORY_MARKER = "memray_working_memory"
WORKING_MEMORY_MESSAGE_ID = "memray-working-memory"


def working_memory_message(block: str) -> Message:
    """The system message that carries the working-memory block into a prompt."""
    return Message(
        id=WORKING_MEMORY_MESSAGE_ID,
        role="system",
        parts=[TextPart(text=block)],
        metadata={WORKING_MEMORY_MARKER: True},
    )


def _is_injected(msg: Message) -> bool:
    return is_summary_message(msg) or msg.metadata.get(WORKING_MEMORY_MARKER) is True


def dedupe_recalled(recent: list[Message], recalled: list[Message]) -> list[Message]:
    """``recalled`` in rank order without the messages in ``recent`` or repeated (by id)."""
    seen = {m.id for m in recent}
    out: list[Message] = []
    for msg in recalled:
        if msg.id not in seen:
            seen.add(msg.id)
            out.append(msg)
    return out


def merge_messages(recent: list[Message], recalled: list[Message], merge: MergeStrategy = "append") -> list[Message]:
    """Merge ``recent`` and (already deduplicated) ``recalled`` by strategy (module docstring)."""
    if merge == "append":
        return recent + recalled
    if merge == "prepend":
        return recalled + recent
    if merge == "interleave":
        combined = recent + recalled
        order = sorted(
            range(len(combined)), key=lambda i: (0, combined[i].seq, i) if combined[i].seq is not None else (1, 0, i)
        )
        return [combined[i] for i in order]
    raise ValidationError("merge", merge, "must be 'append', 'prepend' or 'interleave'")


def tool_units(messages: list[Message]) -> list[list[int]]:
    """For each position, the positions of every message tied to it by a shared
    ``tool_call_id`` (itself included): a tool call and its result form one unit."""
    parent = list(range(len(messages)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_holder: dict[str, int] = {}
    for i, msg in enumerate(messages):
        for call_id in msg.tool_call_ids:
            if call_id in first_holder:
                parent[find(i)] = find(first_holder[call_id])
            else:
                first_holder[call_id] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(messages)):
        groups.setdefault(find(i), []).append(i)
    return [groups[find(i)] for i in range(len(messages))]


def fit_budget(
    messages: list[Message],
    drop_order: list[int],
    keep: int | None,
    budget: int,
    fixed_tokens: int = 0,
    estimate_tokens: EstimateTokens = default_estimate_tokens,
) -> list[Message]:
    """``messages`` without those dropped, in ``drop_order``, until ``fixed_tokens`` plus their
    estimate fits ``budget``. A dropped message takes its whole tool unit with it; the unit of
    position ``keep`` is never dropped."""
    costs = [message_tokens(m, estimate_tokens) for m in messages]
    total = fixed_tokens + sum(costs)
    units = tool_units(messages)
    dropped = [False] * len(messages)
    for pos in drop_order:
        if total <= budget:
            break
        unit = units[pos]
        if dropped[pos] or (keep is not None and keep in unit):
            continue
        for j in unit:
            dropped[j] = True
            total -= costs[j]
    return [m for m, gone in zip(messages, dropped) if not gone]


def assemble(
    recent: list[Message],
    recalled: list[Message],
    merge: MergeStrategy = "append",
    summary: str | None = None,
    working_memory: str | None = None,
    token_budget: int | None = None,
    estimate_tokens: EstimateTokens = default_estimate_tokens,
    degraded: bool = False,
    reason: str | None = None,
) -> Context:
    """Build the :class:`Context` of a prompt; see the module docstring for the exact rules."""
    if merge not in get_args(MergeStrategy):
        raise ValidationError("merge", merge, "must be 'append', 'prepend' or 'interleave'")
    if token_budget is not None and token_budget <= 0:
        raise ValidationError("token_budget", token_budget, "must be a positive number of tokens or None")
    recent = [m for m in recent if not _is_injected(m)]
    recalled = dedupe_recalled(recent, [m for m in recalled if not _is_injected(m)])
    conversation = merge_messages(recent, recalled, merge)
    head: list[Message] = []
    if summary:
        head.append(summary_message(summary))
    if working_memory:
        head.append(working_memory_message(working_memory))
    if token_budget is not None:
        conversation = _fit(conversation, recent, recalled, head, token_budget, estimate_tokens)
    kept = {m.id for m in conversation}
    return Context(
        messages=head + conversation,
        summary=summary or None,
        working_memory=working_memory or None,
        recalled_ids=[m.id for m in recalled if m.id in kept],
        degraded=degraded,
        reason=reason,
    )


def _fit(
    conversation: list[Message],
    recent: list[Message],
    recalled: list[Message],
    head: list[Message],
    budget: int,
    estimate_tokens: EstimateTokens,
) -> list[Message]:
    position = {m.id: i for i, m in enumerate(conversation)}
    drop_order = [position[m.id] for m in reversed(recalled)] + [position[m.id] for m in recent[:-1]]
    newest = position[recent[-1].id] if recent else None
    fixed = sum(message_tokens(m, estimate_tokens) for m in head)
    return fit_budget(conversation, drop_order, newest, budget, fixed, estimate_tokens)
