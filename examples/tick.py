"""A simulation tick as you would write it: every agent says something, recalls, and answers.

    python examples/tick.py                              # 1,000 agents, 8 ticks, ray mode, batches
    python examples/tick.py --style coroutines --mode inprocess --agents 200

Each agent holds one conversation. On every tick it adds a user message, asks for its context
(the 4 recent messages and 3 recalled ones) and adds a reply. Two ways to write that:

- ``--style batches``: the driver collects the whole tick and makes three calls, ``add_many``,
  ``context_many`` and ``add_many`` again (one call per host and per shard each);
- ``--style coroutines``: each agent is its own coroutine, awaiting ``aadd`` and ``acontext``
  as if it were alone; memray batches the calls made at the same time (coalescing).

Both run on ``memray.open()``'s defaults (a local Ray, the static embedder, offline). On the
first tick each agent states a fact; from the fourth on it asks about it, and the example counts
how many contexts brought the fact back (it has left the recent window by then). It prints one
line per tick and exits 1 if a recall missed. ``benchmarks/user_tick.py`` times these very
functions.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Sequence

import memray

PETS = ["a tortoise", "two cats", "a parrot", "a greyhound", "goldfish", "a hamster", "a rabbit", "a ferret"]


def said(agent: int, tick: int) -> str:
    """What ``agent`` says on ``tick``: a fact first, a question about it on ticks 3, 5, ..."""
    if tick == 0:
        return f"For the record, at home I keep {PETS[agent % len(PETS)]}."
    if tick >= 3 and tick % 2 == 1:
        return "Remind me, which animals do I keep at home?"
    return f"Today (day {tick}) I tidied the garden and read for an hour."


def reply(agent: int, tick: int) -> str:
    return f"Noted for day {tick}, agent {agent}."


def recalled_fact(ctx: memray.Context, agent: int) -> bool:
    pet = PETS[agent % len(PETS)]
    recalled = set(ctx.recalled_ids)
    return any(pet in m.text for m in ctx.messages if m.id in recalled)


async def tick_batches(mem: memray.Memory, agents: Sequence[memray.ConversationHandle], tick: int) -> int:
    """One tick as three batched calls; returns how many contexts recalled their fact."""
    await mem.aadd_many([(a, [{"role": "user", "content": said(i, tick)}]) for i, a in enumerate(agents)])
    contexts = await mem.acontext_many(
        [memray.ContextCall(a, said(i, tick), limit=4, semantic_limit=3) for i, a in enumerate(agents)]
    )
    await mem.aadd_many([(a, [{"role": "assistant", "content": reply(i, tick)}]) for i, a in enumerate(agents)])
    return sum(recalled_fact(c, i) for i, c in enumerate(contexts))


async def tick_coroutines(mem: memray.Memory, agents: Sequence[memray.ConversationHandle], tick: int) -> int:
    """One tick as one coroutine per agent; returns how many contexts recalled their fact."""

    async def agent(i: int, conv: memray.ConversationHandle) -> bool:
        await conv.aadd({"role": "user", "content": said(i, tick)})
        ctx = await conv.acontext(said(i, tick), limit=4, semantic_limit=3)
        await conv.aadd({"role": "assistant", "content": reply(i, tick)})
        return recalled_fact(ctx, i)

    return sum(await asyncio.gather(*(agent(i, a) for i, a in enumerate(agents))))


STYLES = {"batches": tick_batches, "coroutines": tick_coroutines}


def asks(tick: int) -> bool:
    return tick >= 3 and tick % 2 == 1


async def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--ticks", type=int, default=8)
    ap.add_argument("--style", choices=sorted(STYLES), default="batches")
    ap.add_argument("--mode", choices=["ray", "inprocess"], default="ray")
    args = ap.parse_args(argv)
    missed = 0
    with tempfile.TemporaryDirectory() as path, memray.open(path, mode=args.mode) as mem:
        agents = [mem.conversation(user_id=f"agent-{i}", conversation_id="main") for i in range(args.agents)]
        for tick in range(args.ticks):
            t0 = time.perf_counter()
            hits = await STYLES[args.style](mem, agents, tick)
            took = time.perf_counter() - t0
            recall = f", recalled {hits}/{len(agents)}" if asks(tick) else ""
            missed += len(agents) - hits if asks(tick) else 0
            ops = 3 * len(agents) / took
            print(f"tick {tick}: {took * 1000:.0f} ms, {ops:,.0f} memory operations/s{recall}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
