"""A scripted many-agent simulation: the main job (``memray demo``) and a benchmark's core.

Each agent holds one conversation. Every tick it says something (a user message), recalls with
``context(limit=4, semantic_limit=3)`` and answers (an assistant message); the tick sends the
users' messages, the contexts and the replies as three batches (``add_many``, ``context_many``,
``add_many``): one call per host and per shard each, whatever the number of agents. On the
first tick each agent states two facts (a colour, a city); from tick 3 on, every other tick it
asks about one of them. By then the fact has left the four recent messages, so a hit counts
only when *recall* brought it back (a message in ``ctx.recalled_ids`` holding the answer). With
fewer than 4 turns nothing is asked and the hit rate is ``None``. At the end it verifies,
reading the store directly (not the hosts' buffers), that every acknowledged message is durable
with the seq it was acknowledged with.

Progress (a bar over the messages, with rate and ETA, and one over the verification) goes to
stderr when it is a terminal; see :mod:`memray.progress`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from memray.facade.conversation import ContextCall
from memray.facade.memory import Memory
from memray.ids import ConversationKey
from memray.models import Context
from memray.progress import bar

__all__ = ["SimulationReport", "simulate"]

_TOPICS = [
    "astronomy",
    "gardening",
    "jazz",
    "mountain biking",
    "sourdough",
    "chess",
    "sailing",
    "pottery",
    "beekeeping",
    "origami",
    "robotics",
    "birdwatching",
    "calligraphy",
    "kayaking",
    "fermentation",
]
_COLOURS = ["crimson", "teal", "amber", "violet", "olive", "indigo", "coral", "saffron", "slate", "jade"]
_CITIES = ["Lisbon", "Osaka", "Nairobi", "Quito", "Tallinn", "Hobart", "Da Nang", "Cusco", "Bergen", "Tbilisi"]


@dataclass
class SimulationReport:
    agents: int
    turns: int
    messages: int
    seconds: float
    messages_per_s: float
    add_p50_ms: float
    add_p99_ms: float
    recall_p50_ms: float  # the tick's context() batch (every agent waits for it)
    recall_p99_ms: float
    recall_hit_rate: float | None  # None: nothing was asked (fewer than FIRST_QUESTION + 1 turns)
    recall_questions: int
    degraded: int
    verified: bool
    missing: int
    extra: int
    extras: dict[str, Any] = field(default_factory=dict)


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000.0


#: ``context(limit=RECENT)``: the recent window (two turns). The first question comes when the
#: facts of turn 0 have left it.
RECENT = 4
FIRST_QUESTION = 3


def asks(turn: int) -> bool:
    """Whether agents ask about their facts on ``turn`` (3, 5, 7, ...)."""
    return turn >= FIRST_QUESTION and turn % 2 == 1


def _script(agent: int, turn: int, rng: random.Random) -> tuple[str, str]:
    """(what the agent says, the answer a recalled message must hold when it is a question)."""
    colour, city = _COLOURS[agent % len(_COLOURS)], _CITIES[(agent // 10) % len(_CITIES)]
    if turn == 0:
        return (f"Remember this: my favourite colour is {colour} and I live in {city}.", "")
    if asks(turn):
        if (turn - FIRST_QUESTION) % 4 == 0:
            return ("Which colour did I say was my favourite?", colour)
        return ("Which city did I say I live in?", city)
    topic = rng.choice(_TOPICS)
    return (f"Tell me something new about {topic}; I started {topic} last month (turn {turn}).", "")


#: Benchmark hooks: ``decorate(agent, turn, text) -> text`` rewrites a user message before it is
#: added; ``on_ack(turn, handles, seqs)`` runs (awaited) right after the users' add_many returns.
Decorate = Callable[[int, int, str], str]
OnAck = Callable[[int, list[Any], list[list[int]]], Awaitable[None]]


async def simulate(
    mem: Memory,
    agents: int,
    turns: int,
    app: str = "sim",
    seed: int = 7,
    decorate: Decorate | None = None,
    on_ack: OnAck | None = None,
    progress: bool | None = None,
) -> SimulationReport:
    """Run the simulation on ``mem`` and verify the store against what was acknowledged.
    ``extras`` holds the tick latencies (a tick: the users' add_many, every agent's context(),
    the replies' add_many). ``progress``: None shows bars when stderr is a terminal."""
    rng = random.Random(seed)
    convs = [mem.conversation(user_id=f"agent-{a}", conversation_id="main", app=app) for a in range(agents)]
    acked: dict[ConversationKey, dict[str, int]] = {c.key: {} for c in convs}
    add_lat: list[float] = []
    recall_lat: list[float] = []
    tick_lat: list[float] = []
    hits = asked = degraded = 0
    start = time.perf_counter()

    def check(ctx: Context, expect: str) -> None:
        nonlocal hits, asked, degraded
        degraded += ctx.degraded
        if expect:
            asked += 1
            recalled = set(ctx.recalled_ids)
            hits += any(expect in m.text for m in ctx.messages if m.id in recalled)

    shown = bar(agents * turns * 2, f"{agents} agents x {turns} turns", unit="msg", enabled=progress)
    for turn in range(turns):
        lines = [_script(a, turn, rng) for a in range(agents)]
        said = [decorate(a, turn, text) if decorate else text for a, (text, _) in enumerate(lines)]
        users = [{"id": f"t{turn}-u", "role": "user", "content": text} for text in said]
        t0 = tick0 = time.perf_counter()
        seqs = await mem.aadd_many([(c, [u]) for c, u in zip(convs, users)])
        add_lat.append(time.perf_counter() - t0)
        for c, s in zip(convs, seqs):
            acked[c.key][f"t{turn}-u"] = s[0]
        if on_ack is not None:
            await on_ack(turn, convs, seqs)
        shown.update(agents)
        t0 = time.perf_counter()  # every agent's context(), as one batch: one call per host and per shard
        contexts = await mem.acontext_many([ContextCall(c, text, RECENT, 3) for c, (text, _) in zip(convs, lines)])
        recall_lat.append(time.perf_counter() - t0)
        for ctx, (_, expect) in zip(contexts, lines):
            check(ctx, expect)
        replies = [
            {"id": f"t{turn}-a", "role": "assistant", "content": f"Noted ({turn}): {text[:60]}"} for text, _ in lines
        ]
        t0 = time.perf_counter()
        seqs = await mem.aadd_many([(c, [r]) for c, r in zip(convs, replies)])
        add_lat.append(time.perf_counter() - t0)
        tick_lat.append(time.perf_counter() - tick0)
        shown.update(agents)
        if asked:
            shown.set_postfix_str(f"recall {hits / asked:.0%}", refresh=False)
        for c, s in zip(convs, seqs):
            acked[c.key][f"t{turn}-a"] = s[0]
    elapsed = time.perf_counter() - start
    shown.close()
    await mem.aflush()
    missing, extra = await _verify(mem, acked, progress)
    n = agents * turns * 2
    return SimulationReport(
        agents=agents,
        turns=turns,
        messages=n,
        seconds=round(elapsed, 3),
        messages_per_s=round(n / elapsed, 1),
        add_p50_ms=round(_pct(add_lat, 0.5), 2),
        add_p99_ms=round(_pct(add_lat, 0.99), 2),
        recall_p50_ms=round(_pct(recall_lat, 0.5), 2),
        recall_p99_ms=round(_pct(recall_lat, 0.99), 2),
        recall_hit_rate=round(hits / asked, 3) if asked else None,
        recall_questions=asked,
        degraded=degraded,
        verified=missing == 0 and extra == 0,
        missing=missing,
        extra=extra,
        extras={
            "tick_p50_ms": round(_pct(tick_lat, 0.5), 2),
            "tick_p99_ms": round(_pct(tick_lat, 0.99), 2),
            "ticks": len(tick_lat),
            "ticks_per_s": round(len(tick_lat) / sum(tick_lat), 3) if tick_lat else 0.0,
            "tick_ms": [round(t * 1000, 1) for t in tick_lat],
            "recall_ms": [round(t * 1000, 1) for t in recall_lat],
        },
    )


#: Conversations the verification reads from the store in one call (one windowed query per
#: partition); one call per conversation took 40 minutes of the store for 100,000 agents.
VERIFY_BATCH = 2000


async def _verify(
    mem: Memory, acked: dict[ConversationKey, dict[str, int]], progress: bool | None = None
) -> tuple[int, int]:
    """Count acknowledged messages missing from the store (or at another seq) and unexpected ones.

    Each conversation's newest ``len(acknowledged) + 1`` stored rows are read, so a store that
    holds more than was acknowledged shows at least one unexpected row (the count is of those
    read), and every acknowledged row is among them if the store holds nothing else."""
    store = mem.internals.deployment.stores
    keys = list(acked)
    missing = extra = 0
    with bar(len(keys), "verifying the store", unit="conv", enabled=progress) as shown:
        for i in range(0, len(keys), VERIFY_BATCH):
            chunk = keys[i : i + VERIFY_BATCH]
            window = 1 + max(len(acked[k]) for k in chunk)
            snapshots = await mem.internals.arun(store.load_conversations(chunk, window))
            for key, snap in zip(chunk, snapshots):
                stored = {r.id: r.seq for r in snap.recent}
                want = acked[key]
                missing += sum(1 for mid, seq in want.items() if stored.get(mid) != seq)
                extra += len(set(stored) - set(want))
            shown.update(len(chunk))
    return missing, extra


def summary_line(report: SimulationReport) -> str:
    return (
        f"{report.agents} agents x {report.turns} turns: {report.messages} messages in {report.seconds:.1f}s "
        f"({report.messages_per_s:,.0f} msg/s, {report.extras.get('ticks_per_s', 0.0):.2f} ticks/s, "
        f"tick p50 {report.extras.get('tick_p50_ms', 0.0):.0f} ms); add_many p50 {report.add_p50_ms:.1f} ms; "
        f"context_many p50 {report.recall_p50_ms:.1f} ms p99 {report.recall_p99_ms:.1f} ms; "
        f"{_recall(report)}; degraded {report.degraded}; "
        f"verification {'PASSED' if report.verified else 'FAILED'} "
        f"(missing {report.missing}, unexpected {report.extra})"
    )


def _recall(report: SimulationReport) -> str:
    if report.recall_hit_rate is None:
        return (
            f"recall not measured (questions start at turn {FIRST_QUESTION}: use --turns {FIRST_QUESTION + 1} or more)"
        )
    return (
        f"recall {report.recall_hit_rate:.0%} of {report.recall_questions} questions "
        f"about facts outside the {RECENT} recent messages"
    )
