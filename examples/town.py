"""A small generative-agents town on memray: observations on a simulated clock, importance,
memory-stream retrieval, and a fork into two counterfactual branches.

    python examples/town.py                       # 6 agents, 48 simulated hours, fork at hour 24
    python examples/town.py --agents 3 --ticks 8 --fork-at 4 --mode ray

Each agent keeps its memory stream as one memray conversation (app ``town``, user = the agent).
Every tick is one simulated hour (day 1 starts at 08:00 UTC): each agent observes what happens
around it (``sim_time`` = the tick's time, ``importance`` from a keyword rating as an LLM would
give), then plans by retrieving its memories with memory-stream scoring (recency, importance,
relevance; Park et al. 2023) and records the plan. At tick ``--fork-at`` the whole town is forked
(``mem.fork``) while it keeps running: in branch B, Isabella announces a Valentine's party; branch
A carries on as before. At the end both branches ask every agent what is planned for Valentine's
day: only branch B remembers the party. Offline (hash embedder), well under a minute; it exits 1
if the branches do not diverge as they should.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta

import memray
from memray import Scoring

NAMES = ["isabella", "klaus", "maria", "john", "tom", "ayesha", "carmen", "eddy", "jennifer", "sam"]
PLACES = ["the cafe", "the library", "the park", "the pharmacy", "the college", "the market"]
CHORES = [
    "drinks coffee",
    "reads a book",
    "waters the plants",
    "chats with a neighbour",
    "writes an essay",
    "buys bread",
    "sweeps the floor",
    "studies chemistry",
]
START = datetime(2023, 2, 13, 8, 0, tzinfo=UTC)
PARTY = "isabella is throwing a valentine's day party at the cafe tomorrow at 5pm"
QUESTION = "what is planned for valentine's day"
#: An LLM would rate importance 1-10; a keyword rating stands in for it here (divided by 10).
RATINGS = {"party": 8, "valentine": 8, "fire": 9, "election": 7, "exam": 6, "coffee": 2}


def importance(text: str) -> float:
    return max([rating for word, rating in RATINGS.items() if word in text] + [1]) / 10


def observations(rng: random.Random, agents: list[str], tick: int) -> dict[str, list[str]]:
    """What each agent sees this hour: someone doing a chore somewhere, sometimes big news."""
    out: dict[str, list[str]] = {}
    for name in agents:
        other = rng.choice([a for a in agents if a != name] or [name])
        seen = [f"{other} {rng.choice(CHORES)} at {rng.choice(PLACES)}"]
        if tick % 7 == 3:
            seen.append(f"there is an exam at the college on day {tick // 24 + 2}")
        out[name] = seen
    return out


def step(mem: memray.Memory, agents: list[str], tick: int, rng: random.Random, news: str | None = None) -> int:
    """One simulated hour: observe, recall and plan, each as one batch for the whole town
    (``add_many``, ``search_many``, ``add_many``). Returns adds."""
    now = START + timedelta(hours=tick)
    seen = observations(rng, agents, tick)
    if news is not None:
        for name in agents:
            seen[name].append(news)
    batch = []
    for name in agents:
        msgs = [
            {"role": "user", "content": text, "sim_time": now, "importance": importance(text), "agent_id": name}
            for text in seen[name]
        ]
        batch.append((mem.conversation(user_id=name, conversation_id="stream", app="town"), msgs))
    mem.add_many(batch)
    streams = [stream for stream, _ in batch]
    recalled = mem.search_many(  # the whole town's recall: one call per shard
        [
            memray.SearchCall(
                stream, f"what should {name} do at {PLACES[tick % len(PLACES)]}", 3, scoring=Scoring.stream(now=now)
            )
            for name, stream in zip(agents, streams)
        ]
    )
    plans = []
    for name, stream, hits in zip(agents, streams, recalled):
        focus = hits[0].message.text if hits else "nothing in particular"
        plan = {
            "role": "assistant",
            "content": f"plan: keep in mind that {focus}",
            "sim_time": now,
            "importance": 0.3,
            "agent_id": name,
            "sub_agent_id": "planner",
        }
        plans.append((stream, [plan]))
    mem.add_many(plans)
    return sum(len(m) for _, m in batch) + len(agents)


def recalls_party(mem: memray.Memory, agents: list[str], now: datetime) -> dict[str, bool]:
    """Ask each agent, with stream scoring, what is planned for Valentine's day."""
    out = {}
    for name in agents:
        hits = mem.conversation(user_id=name, conversation_id="stream", app="town").search(
            QUESTION, limit=3, scoring=Scoring.stream(now=now, recency=0.5, importance=1.0, relevance=1.0)
        )
        out[name] = any("party" in h.message.text for h in hits)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=6)
    parser.add_argument("--ticks", type=int, default=48, help="simulated hours")
    parser.add_argument("--fork-at", type=int, default=24, help="the tick after which the town forks")
    parser.add_argument("--mode", choices=["inprocess", "ray"], default="inprocess")
    parser.add_argument(
        "--path",
        default=None,
        help="data directory, kept; an earlier run's trunk/ and branch-b/ in it are replaced "
        "(default: a temporary one, removed after)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.agents <= len(NAMES) or not 0 < args.fork_at < args.ticks:
        parser.error(f"need 1..{len(NAMES)} agents and 0 < --fork-at < --ticks")
    agents = NAMES[: args.agents]
    root = args.path or tempfile.mkdtemp(prefix="memray-town-")
    for earlier in ("trunk", "branch-b"):  # a run again starts the town over
        shutil.rmtree(f"{root}/{earlier}", ignore_errors=True)
    t0 = time.perf_counter()
    mem = memray.open(f"{root}/trunk", mode=args.mode, hosts=2, shards=2, debounce_ms=20)
    try:
        rng = random.Random(7)
        added = sum(step(mem, agents, tick, rng) for tick in range(args.fork_at))
        branch = mem.fork(f"{root}/branch-b")  # the trunk keeps running as branch A
        try:
            info = branch.fork_info or {}
            print(f"forked at hour {args.fork_at}: {added} memories, copy {info.get('seconds', 0.0) * 1000:.0f} ms")
            rng_a, rng_b = random.Random(11), random.Random(11)  # the same world, one difference
            for tick in range(args.fork_at, args.ticks):
                added += step(mem, agents, tick, rng_a)
                added += step(branch, agents, tick, rng_b, news=PARTY if tick == args.fork_at else None)
            end = START + timedelta(hours=args.ticks)
            a, b = recalls_party(mem, agents, end), recalls_party(branch, agents, end)
            example = branch.conversation(user_id=agents[0], conversation_id="stream", app="town")
            top = example.search(QUESTION, limit=1, scoring=Scoring.stream(now=end, recency=0.5, importance=1.0))
            print(f"branch A (no party): {sum(a.values())}/{len(agents)} agents recall a party")
            print(
                f"branch B (party announced at hour {args.fork_at}): {sum(b.values())}/{len(agents)} agents recall it"
            )
            if top:
                print(f"{agents[0]} in branch B recalls: {top[0].message.text!r} (score {top[0].score:.2f})")
        finally:
            branch.close()
    finally:
        mem.close()
        if args.path is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{len(agents)} agents x {args.ticks} hours, {added} memories in {time.perf_counter() - t0:.1f} s")
    return 0 if not any(a.values()) and all(b.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
