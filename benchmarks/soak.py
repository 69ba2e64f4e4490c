"""Chaos soak: agents tick against memray in Ray mode while its server takes REST and MCP load,
and a random memray process — a host, a shard, a store partition, the key ring, a Serve replica —
is SIGKILLed every few seconds; at the end, the data directory reopened cold is checked against
every acknowledgement a caller got (:mod:`benchmarks.soak_checks`).

``python -m benchmarks.soak --minutes 30 --kill-every 10 --agents 32 --plot /tmp/soak.png``

- **Agents** (``--agents``, two apps, one conversation each) tick every ``--tick-s``: each adds a
  message (on even ticks one explicit ``add_many``, on odd ticks concurrent ``aadd`` coroutines
  that the facade coalesces; every third tick durable), then reads its context (``context_many``
  / concurrent ``acontext``) and a few search for the word they just wrote. Every fifth tick one
  agent deletes a message and ``flush()`` is called. One user is erased halfway, and one fork is
  taken two thirds of the way (into a new folder again if a kill makes it raise: ``attempts``).
- **The server** (:mod:`benchmarks.soak_server`): the app of ``memray serve`` on Ray Serve
  (``--replicas``), on 127.0.0.1 only, over the same memray, with keys of both apps. Five client
  threads, one round each every ``--tick-s`` from the first tick to the last (at most
  ``--http-requests`` requests each): two REST writers (one per app: a message with an id, durable
  and buffered in turn, its context read back, and a cross-tenant probe — their key asks for the
  other app's conversation and must get 403 or 404, never data), a read-only reader of the first
  app (lists, searches, and every fifth round a write that must be refused), and two MCP clients
  (``add_memory`` durable, ``get_context`` for it). Halfway, a user is erased over REST, and the
  key bound to that user must then be refused (401). Every answer is recorded: status (or the
  transport error), latency, and each acknowledged write (id and seq over REST, seq and text over
  MCP). A 5xx during a kill is expected, and counted.
- **Read-your-writes**, checked as the run goes: the context holds the message just acknowledged
  (the agents', and over REST and MCP), the search finds it, and no context holds another
  agent's message (``cross_reads``). A degraded answer (its shard away) is counted apart; a miss
  whose write was lost in a kill and named to a caller is what memray promises; any other miss
  is a failure (``ryw_failed``).
- **Kills**: after ``--baseline-s`` of quiet ticks (the baseline the tick figures are read
  against; the HTTP load runs through it too), every ``--kill-every`` seconds a victim is
  SIGKILLed: the roles in turn (host, shard, store partition, key ring, Serve replica; shuffled
  each round), a random process of the role (Ray restarts an actor, Serve a replica). For a
  memray actor, a probe conversation that the victim serves then gets a durable add through the
  facade, retried until acknowledged (``recover_s``: kill → ack) and searched for until found
  complete (``searchable_s``); for the key ring or a replica the probe is the same over REST,
  with a key (kill → the next authenticated success). For every kill, also the time until the
  next authenticated REST request sent after it was answered 2xx (``rest_ok_after_s``).
- **Processes**: every ``--sample-s`` the RSS and open files of every actor process (the key
  ring and the replicas included) and of this driver, and each host's queue (acknowledged, not
  durable).

Prints one JSON line: parameters, git sha, ``kills``, ``kills_by_role``, ``acked``, ``stored``,
``lost_durable``, ``duplicated``, ``seq_mismatch`` (these five count every channel: the facade,
REST and MCP; ``by_channel`` splits them), ``unnamed_losses``, ``order_violations``,
read-your-writes counts, ``p99_tick_ratio`` (chaos p99 tick / baseline p99 tick),
``p99_recover_s``, ``p99_searchable_s``, ``rss_slope_mb_per_min`` (all memray processes, over the
last two thirds of the chaos phase; ``driver_rss_slope_mb_per_min`` this process alone), queue
maxima, ``erasure`` and ``rest_erasure`` (verified clean, files holding the id), and ``server``:
requests, answers and errors by status, latency p50/p99 (quiet and under kills), the tenancy
checks (``cross_tenant_reads``, ``read_only_writes_accepted``: must be 0) and
``p99_rest_ok_after_kill_s``; ``--plot`` draws the timeline with the kills marked.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from benchmarks._harness import emit, log, scratch, start_ray
from benchmarks.faults import _pid
from benchmarks.soak_checks import Ack, MessageRef, cold_check, files_holding
from benchmarks.soak_server import (
    ERASED_REST_USER,
    SERVER_ROLES,
    HttpClients,
    Server,
    Traffic,
    mcp_check,
    rest_probe,
    server_pid,
    server_victims,
    start_proxy,
    start_server,
    stop_server,
    traffic_figures,
)

__all__ = ["Record", "main"]

APPS = ("soak-a", "soak-b")
PROBE_APP = "soak-probe"
ROLES = ("host", "shard", "store")
#: The arguments the result line repeats.
PARAMS = (
    "minutes",
    "kill_every",
    "min_kills",
    "agents",
    "tick_s",
    "baseline_s",
    "hosts",
    "shards",
    "stores",
    "replicas",
)
BASELINE_TICKS = 3  # the fewest quiet ticks, however long start-up took
MIN_KILLS_GRACE_S = 300.0  # how long --min-kills may stretch the chaos past --minutes
#: Per channel (facade and REST acks, REST alone, MCP), and what MCP's check calls each.
CHANNEL_FIGURES = ("acked", "stored", "lost_durable", "duplicated", "seq_mismatch", "acked_durable")
MCP_FIGURES = ("mcp_acked", "mcp_stored", "mcp_lost", "mcp_duplicated", "mcp_seq_mismatch", "mcp_acked")


@dataclass
class Record:
    """What callers were told during the run (shared by the agents, the killer and the sampler)."""

    t0: float = field(default_factory=time.monotonic)
    acks: list[Ack] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)  # "op: ErrorType" -> count
    error_log: list[tuple[float, str, str]] = field(default_factory=list)
    reported: set[MessageRef] = field(default_factory=set)  # named to a caller by a DeadLetterError
    deleted: set[MessageRef] = field(default_factory=set)
    unsure: set[MessageRef] = field(default_factory=set)  # a delete that raised
    ryw: Counter[str] = field(default_factory=Counter)
    ryw_missed: set[MessageRef] = field(default_factory=set)  # a read that did not hold its own write
    ryw_miss_log: list[dict[str, Any]] = field(default_factory=list)  # what each such read found instead
    ticks: list[tuple[float, float, bool]] = field(default_factory=list)  # (start, seconds, chaos)
    kills: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def ack(self, app: str, user: str, conv: str, ids: list[str], seqs: list[int], durable: bool) -> None:
        at = self.now()
        with self.lock:
            self.acks.extend(Ack(app, user, conv, i, s, durable, at) for i, s in zip(ids, seqs))

    def error(self, op: str, exc: BaseException) -> None:
        from memray.errors import DeadLetterError

        with self.lock:
            self.errors[f"{op}: {type(exc).__name__}"] += 1
            self.error_log.append((self.now(), op, f"{type(exc).__name__}: {str(exc)[:200]}"))
            if isinstance(exc, DeadLetterError):
                self.reported.update((a, u, c, i) for a, u, c, i, *_ in exc.letters)


# -- the agents -------------------------------------------------------------------------------
class Agents:
    """``n`` agents, one conversation each, alternately in the two apps."""

    def __init__(self, mem: Any, n: int, record: Record, seed: int = 1) -> None:
        self.mem, self.n, self.record = mem, n, record
        self.convs = [mem.conversation(user_id=f"agent-{a}", conversation_id="main", app=APPS[a % 2]) for a in range(n)]
        self.last: dict[int, str] = {}  # agent -> id of its last acknowledged message
        self.rng = random.Random(seed)

    async def tick(self, t: int) -> None:
        from memray.errors import MemrayError
        from memray.models import Message, TextPart

        durable = t % 3 == 0
        msgs = [
            Message(role="user", parts=[TextPart(text=f"agent {a} tick {t} notes zq{a}t{t}w about the soak")])
            for a in range(self.n)
        ]
        acked = await self._add(t, msgs, durable)
        await self._contexts(t, acked)
        await self._searches(t, acked)
        if t % 5 == 4:
            await self._delete_one()
            try:
                await self.mem.aflush()
            except MemrayError as exc:  # a DeadLetterError names losses: recorded as reported
                self.record.error("flush", exc)

    async def _add(self, t: int, msgs: list[Any], durable: bool) -> set[int]:
        """Each agent's message, as one explicit batch (even ticks, durable ones) or as concurrent
        coroutines the facade coalesces (odd ticks); the agents acknowledged."""
        from memray.errors import MemrayError

        rec, acked = self.record, set[int]()
        if t % 2 == 0 or durable:
            try:
                seqs = await self.mem.aadd_many([(c, [m]) for c, m in zip(self.convs, msgs)], durable=durable)
            except MemrayError as exc:
                rec.error("add_many", exc)
                return acked
            answers: list[Any] = [s for s in seqs]
        else:
            answers = list(await asyncio.gather(*(c.aadd(m) for c, m in zip(self.convs, msgs)), return_exceptions=True))
        for a, (conv, msg, got) in enumerate(zip(self.convs, msgs, answers)):
            if isinstance(got, BaseException):
                if not isinstance(got, MemrayError):
                    raise got
                rec.error("add", got)
                continue
            rec.ack(conv.key.app, conv.key.user_id, "main", [msg.id], got, durable)
            self.last[a] = msg.id
            acked.add(a)
        return acked

    async def _contexts(self, t: int, acked: set[int]) -> None:
        import memray

        if t % 2 == 0:
            calls = [memray.ContextCall(c, f"zq{a}t{t}w", 4, 2) for a, c in enumerate(self.convs)]
            answers = await self.mem.acontext_many(calls, return_exceptions=True)
        else:
            answers = await asyncio.gather(
                *(c.acontext(f"zq{a}t{t}w", limit=4, semantic_limit=2) for a, c in enumerate(self.convs)),
                return_exceptions=True,
            )
        for a, ctx in enumerate(answers):
            if isinstance(ctx, BaseException):
                self.record.error("context", ctx)
                continue
            self.record.ryw["cross_reads"] += sum(1 for m in ctx.messages if not m.text.startswith(f"agent {a} "))
            if a in acked:
                self._held("context", ctx.degraded, self.last[a] in {m.id for m in ctx.messages}, a)

    async def _searches(self, t: int, acked: set[int], k: int = 4) -> None:
        for a in self.rng.sample(sorted(acked), min(k, len(acked))):
            try:
                res = await self.convs[a].asearch(f"zq{a}t{t}w", limit=1, mode="lexical")
            except Exception as exc:
                self.record.error("search", exc)
                continue
            found = [(hit.message.id, hit.message.text[:40], round(hit.score, 3)) for hit in res]
            self._held("search", res.degraded, bool(res) and res[0].message.id == self.last[a], a, found)

    def _held(self, what: str, degraded: bool, held: bool, a: int, found: Any = None) -> None:
        """Count a read-your-writes check; a miss that was not degraded is kept to be explained
        (its write lost in a kill, and named: then it held what memray promises), with what the
        read found instead."""
        self.record.ryw[f"{what}_degraded" if degraded and not held else f"{what}_{'held' if held else 'missed'}"] += 1
        if not held and not degraded:
            key = self.convs[a].key
            self.record.ryw_missed.add((key.app, key.user_id, "main", self.last[a]))
            at = round(self.record.now(), 2)
            self.record.ryw_miss_log.append({"at_s": at, "read": what, "wanted": self.last[a], "found": found})

    async def _delete_one(self) -> None:
        a = self.rng.randrange(self.n)
        if a not in self.last:
            return
        conv, mid = self.convs[a], self.last.pop(a)
        ref = (conv.key.app, conv.key.user_id, "main", mid)
        try:
            await conv.adelete_messages([mid])
            self.record.deleted.add(ref)
        except Exception as exc:
            self.record.unsure.add(ref)
            self.record.error("delete", exc)


# -- the kills --------------------------------------------------------------------------------
def _probe_for(mem: Any, role: str, index: int) -> Any:
    """A conversation the victim serves: routed to host ``index``, a user on shard ``index``, or
    a user of store partition ``index``."""
    from memray.ids import ConversationKey, user_hash

    dep = mem.internals.deployment
    for u in (f"probe-{role}-{index}-{i}" for i in range(10_000)):
        key = ConversationKey(PROBE_APP, u, "p")
        if (
            (role == "host" and key.route(len(dep.hosts)) == index)
            or (role == "shard" and user_hash(PROBE_APP, u) % len(dep.shards) == index)
            or (role == "store" and dep.stores.partition(PROBE_APP, u) == index)
        ):
            return mem.conversation(user_id=u, conversation_id="p", app=PROBE_APP)
    raise RuntimeError(f"no probe user for {role} {index}")


def _victims(mem: Any, served: bool = False) -> list[tuple[str, int, Any]]:
    """Every process the killer may pick: memray's actors, and with ``served`` the key ring's and
    the Serve replicas' (:func:`benchmarks.soak_server.server_victims`)."""
    dep = mem.internals.deployment
    clients = {"host": dep.hosts, "shard": dep.shards, "store": dep.stores.clients}
    ours = [(role, i, c) for role in ROLES for i, c in enumerate(clients[role])]
    return ours + (server_victims(mem) if served else [])


def kill_and_probe(
    mem: Any,
    record: Record,
    role: str,
    index: int,
    client: Any,
    timeout_s: float = 120.0,
    server: Server | None = None,
    traffic: Traffic | None = None,
) -> None:
    """SIGKILL the victim, then a durable add to its probe conversation, retried until it is
    acknowledged, then searches for it until one answers complete with it: through the facade
    for a memray actor, over REST (:func:`benchmarks.soak_server.rest_probe`) for the key ring
    or a Serve replica."""
    from memray.models import Message, TextPart

    try:
        pid = server_pid(client) if role in SERVER_ROLES else _pid(mem, client, 5.0)
    except Exception as exc:  # not back from an earlier kill: skipped, counted
        record.error(f"pid of {role}", exc)
        return
    os.kill(pid, signal.SIGKILL)
    at = time.monotonic()
    kill: dict[str, Any] = {"t": round(at - record.t0, 2), "role": role, "index": index, "pid": pid}
    n = len(record.kills)
    if role in SERVER_ROLES:
        assert server is not None and traffic is not None
        kill.update(rest_probe(server, record, traffic, n, at, timeout_s))
        with record.lock:
            record.kills.append(kill)
        return
    conv = _probe_for(mem, role, index)
    word = f"zk{n}probe"
    m = Message(role="user", parts=[TextPart(text=f"probe after kill {n}: {word}")])
    while time.monotonic() - at < timeout_s:
        try:
            seqs = conv.add(m, durable=True)  # the same message each try: a retry is idempotent
        except Exception as exc:  # what the caller saw; the probe tries again
            record.error("probe add", exc)
            time.sleep(0.05)
            continue
        record.ack(PROBE_APP, conv.key.user_id, "p", [m.id], seqs, True)
        kill["recover_s"] = round(time.monotonic() - at, 3)
        break
    while "recover_s" in kill and time.monotonic() - at < timeout_s:
        try:
            res = conv.search(word, limit=1, mode="lexical")
            if res and not res.degraded and res[0].message.id == m.id:
                kill["searchable_s"] = round(time.monotonic() - at, 3)
                break
        except Exception as exc:
            record.error("probe search", exc)
        time.sleep(0.05)
    with record.lock:
        record.kills.append(kill)


def killer(
    mem: Any,
    record: Record,
    every_s: float,
    stop: threading.Event,
    server: Server | None = None,
    traffic: Traffic | None = None,
    seed: int = 2,
) -> None:
    """Every ``every_s`` (from one kill to the next; longer if a probe took longer), a victim:
    the roles in turn (shuffled each round, so each is hit once a round), a random one of the
    role's processes."""
    rng = random.Random(seed)
    roles: list[str] = []
    while not stop.wait(max(0.0, every_s - _since_last_kill(record))):
        if not roles:
            roles = [*ROLES, *(SERVER_ROLES if server is not None else ())]
            rng.shuffle(roles)
        role = roles.pop()
        victims = [v for v in _victims(mem, server is not None) if v[0] == role]
        if not victims:  # no replica named just now (Serve is replacing it): counted, skipped
            record.error(f"pid of {role}", LookupError(f"no {role} found"))
            continue
        _, index, client = rng.choice(victims)
        kill_and_probe(mem, record, role, index, client, server=server, traffic=traffic)


def _since_last_kill(record: Record) -> float:
    return record.now() - record.kills[-1]["t"] if record.kills else 0.0


# -- the processes ----------------------------------------------------------------------------
def _proc(pid: int) -> tuple[float, int]:
    """RSS (MB) and open files of ``pid`` (0, 0 once gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next((int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:")), 0.0)
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0.0, 0


def sampler(mem: Any, record: Record, every_s: float, stop: threading.Event, served: bool = False) -> None:
    """RSS and open files of every actor process (the key ring's and the Serve replicas' with
    ``served``) and this driver; each host's queue."""
    from memray.conversation.client import HostClient

    while not stop.wait(every_s):
        sample: dict[str, Any] = {"t": round(record.now(), 2), "procs": {}, "pending": 0}
        for role, index, client in _victims(mem, served):
            try:
                if role in SERVER_ROLES:
                    pid = server_pid(client, 2.0)
                elif isinstance(client, HostClient):
                    stats = mem.internals.run(asyncio.wait_for(client.stats(), 2.0))
                    pid = int(stats["pid"])
                    sample["pending"] += int(stats["pending"]) + int(stats["writing"])
                else:
                    pid = _pid(mem, client, 2.0)
            except Exception:  # restarting: not sampled this time
                continue
            sample["procs"][f"{role}{index}"] = _proc(pid)
        sample["procs"]["driver"] = _proc(os.getpid())
        with record.lock:
            record.samples.append(sample)


# -- the run ----------------------------------------------------------------------------------
async def run_ticks(agents: Agents, record: Record, tick_s: float, until: float, chaos: bool, at_least: int = 0) -> int:
    """Ticks, one starting every ``tick_s``, until ``until`` and at least ``at_least`` of them."""
    t = first = len(record.ticks)
    while record.now() < until or t - first < at_least:
        start = record.now()
        await agents.tick(t)
        record.ticks.append((start, record.now() - start, chaos))
        t += 1
        await asyncio.sleep(max(0.0, start + tick_s - record.now()))
    return t


async def drive(
    mem: Any, args: argparse.Namespace, record: Record, fork_path: str, server: Server, traffic: Traffic
) -> dict[str, Any]:
    """Baseline ticks, then ticks under kills (with one erasure and one fork on the way); the
    HTTP clients load the server from the first tick to the last (the baseline holds their load
    too), and erase a user over REST halfway."""
    agents = Agents(mem, args.agents, record)
    erased = f"erased-{uuid.uuid4().hex[:12]}"
    gone = mem.conversation(user_id=erased, conversation_id="main", app=APPS[0])
    await gone.aadd([{"role": "user", "content": f"{erased} says something to forget"}], durable=True)
    end = args.baseline_s + args.minutes * 60
    span = end - args.baseline_s
    stop = threading.Event()
    clients = HttpClients(server, record, traffic, args.tick_s, args.http_requests)
    clients.start(done=stop, erase_at=args.baseline_s + span / 2)
    # a baseline even where starting up took longer than it (a slow machine): the tick ratio needs one
    await run_ticks(agents, record, args.tick_s, args.baseline_s, False, at_least=BASELINE_TICKS)
    threads = [
        threading.Thread(target=killer, args=(mem, record, args.kill_every, stop, server, traffic), daemon=True),
        threading.Thread(target=sampler, args=(mem, record, args.sample_s, stop, True), daemon=True),
    ]
    for th in threads:
        th.start()
    events: dict[str, Any] = {"erased_user": erased}
    await run_ticks(agents, record, args.tick_s, args.baseline_s + span / 2, True)
    events["erasure"] = await _erase(mem, record, erased)
    await run_ticks(agents, record, args.tick_s, args.baseline_s + 2 * span / 3, True)
    events["fork"], before_fork = await _fork(mem, record, fork_path)
    await run_ticks(agents, record, args.tick_s, end, True)
    # a slow machine recovers slowly, so fewer kills fit the minutes: the chaos goes on, a tick at
    # a time, until the kills asked for are made and probed (a kill is recorded once its probe
    # ends), for at most MIN_KILLS_GRACE_S more
    while len(record.kills) < args.min_kills and record.now() < end + MIN_KILLS_GRACE_S:
        await run_ticks(agents, record, args.tick_s, record.now() + args.tick_s, True)
    stop.set()
    await asyncio.to_thread(clients.join)
    for th in threads:
        await asyncio.to_thread(th.join, 180)
    events["before_fork"] = before_fork
    return events


async def _fork(mem: Any, record: Record, fork_path: str, tries: int = 5) -> tuple[dict[str, Any], list[Ack]]:
    """``fork_to`` a new folder, again into another if a kill caught it (a store restarting
    answers UnavailableError, as a caller would be told): what happened, and the durable acks
    made before the call that succeeded."""
    event: dict[str, Any] = {"ok": False}
    before: list[Ack] = []
    for attempt in range(1, tries + 1):
        with record.lock:
            before = [a for a in record.acks if a.durable]
        path = f"{fork_path}-{attempt}"
        event.update(attempts=attempt)
        try:
            await mem.afork_to(path)
            event.update(ok=True, path=path, acked_before=len(before))
            break
        except Exception as exc:
            record.error("fork", exc)
            event["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return event, before


async def _erase(mem: Any, record: Record, user: str, tries: int = 5) -> dict[str, Any]:
    for attempt in range(tries):
        try:
            await mem.adelete_user(user_id=user, app=APPS[0])
            return {"ok": True, "attempts": attempt + 1}
        except Exception as exc:  # a kill caught it: erasure is idempotent, so again
            record.error("delete_user", exc)
    return {"ok": False, "attempts": tries}


def final_flush(mem: Any, record: Record, tries: int = 10) -> int:
    """``flush()`` until it returns normally (what it names is reported); the attempts."""
    for attempt in range(1, tries + 1):
        try:
            mem.flush()
            return attempt
        except Exception as exc:
            record.error("final flush", exc)
            time.sleep(1.0)
    return tries


# -- the figures ------------------------------------------------------------------------------
def _p(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, max(0, int(-(-q * len(s) // 1)) - 1))], 3)


def _slope_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(seconds, value)`` points, per minute."""
    if len(points) < 3:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return round(60 * sum((x - mx) * (y - my) for x, y in points) / var, 3) if var else None


def run_figures(record: Record, args: argparse.Namespace) -> dict[str, Any]:
    """Ticks against the baseline, recovery per kill, processes over time, read-your-writes."""
    base = [s for _, s, chaos in record.ticks if not chaos]
    under = [s for _, s, chaos in record.ticks if chaos]
    recover = [k["recover_s"] for k in record.kills if "recover_s" in k]
    searchable = [k["searchable_s"] for k in record.kills if "searchable_s" in k]
    late = args.baseline_s + args.minutes * 60 / 3  # the slope skips the first third of the chaos
    total = [(s["t"], sum(rss for rss, _ in s["procs"].values())) for s in record.samples if s["t"] >= late]
    driver = [(s["t"], s["procs"]["driver"][0]) for s in record.samples if s["t"] >= late]
    rss_now = total[-1][1] if total else None
    p99_base, p99_under = _p(base, 0.99), _p(under, 0.99)
    return {
        "kills": len(record.kills),
        "kills_by_role": dict(Counter(k["role"] for k in record.kills)),
        "kills_not_recovered": sum(1 for k in record.kills if "recover_s" not in k),
        "kills_not_searchable": sum(1 for k in record.kills if "searchable_s" not in k),
        "tick_baseline_s": {"p50": _p(base, 0.5), "p99": p99_base, "n": len(base)},
        "tick_chaos_s": {"p50": _p(under, 0.5), "p99": p99_under, "n": len(under)},
        "p99_tick_ratio": round(p99_under / p99_base, 3) if p99_base and p99_under else None,
        "p50_recover_s": _p(recover, 0.5),
        "p99_recover_s": _p(recover, 0.99),
        "recover_s_by_role": {
            role: {"p50": _p(r, 0.5), "p99": _p(r, 0.99), "n": len(r)}
            for role in sorted({k["role"] for k in record.kills})
            if (r := [k["recover_s"] for k in record.kills if k["role"] == role and "recover_s" in k])
        },
        "max_recover_s": max(recover, default=None),
        "p50_searchable_s": _p(searchable, 0.5),
        "p99_searchable_s": _p(searchable, 0.99),
        "rss_slope_mb_per_min": _slope_per_min(total),
        "rss_total_mb_end": round(rss_now, 1) if rss_now is not None else None,
        "driver_rss_slope_mb_per_min": _slope_per_min(driver),
        "open_files_max": max((f for s in record.samples for _, f in s["procs"].values()), default=None),
        "queue_max": max((s["pending"] for s in record.samples), default=None),
        "queue_end": record.samples[-1]["pending"] if record.samples else None,
        "read_your_writes": dict(record.ryw),
        # a miss is explained when its write was lost in a kill and named to a caller
        "ryw_failed": len(record.ryw_missed - record.reported),
        "ryw_miss_samples": record.ryw_miss_log[:10],
        "kills_at_s": [(k["t"], k["role"], k["index"]) for k in record.kills],
        "caller_errors": dict(record.errors),
    }


def fork_check(fork: Any, before: list[Ack], record: Record) -> dict[str, int]:
    """Every durable ack made before ``fork_to`` was called is in the fork at its seq."""
    store = fork.internals.deployment.stores
    stored: dict[MessageRef, int] = {}
    for app, user, conv in {(a.app, a.user_id, a.conversation_id) for a in before}:
        key = fork.conversation(user_id=user, conversation_id=conv, app=app).key
        stored.update(((app, user, conv, r.id), r.seq) for r in fork.internals.run(store.get_messages(key)))
    kept = [a for a in before if a.ref not in record.deleted and a.ref not in record.unsure]
    return {
        "fork_acked": len(kept),
        "fork_missing": sum(1 for a in kept if a.ref not in stored),
        "fork_seq_mismatch": sum(1 for a in kept if a.ref in stored and stored[a.ref] != a.seq),
    }


def plot_timeline(path: str, record: Record, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 8), dpi=90, sharex=True)
    ax1.plot([t for t, _, _ in record.ticks], [s for _, s, _ in record.ticks], ".", ms=3, label="tick (s)")
    ks = [k for k in record.kills if "recover_s" in k]
    ax1.plot([k["t"] for k in ks], [k["recover_s"] for k in ks], "x", label="kill → durable ack (s)")
    ax1.set_ylabel("seconds")
    ax1.legend(loc="upper right", fontsize=8)
    for name in sorted({n for s in record.samples for n in s["procs"]}):
        pts = [(s["t"], s["procs"][name][0]) for s in record.samples if name in s["procs"]]
        ax2.plot([t for t, _ in pts], [r for _, r in pts], label=name, lw=1)
    ax2.set_ylabel("RSS (MB)")
    ax2.legend(loc="upper left", fontsize=7, ncol=4)
    ax3.plot([s["t"] for s in record.samples], [s["pending"] for s in record.samples], label="hosts' queue")
    ax3.set_ylabel("acked, not durable")
    ax3.set_xlabel("seconds since start")
    colors = {"host": "tab:red", "shard": "tab:purple", "store": "tab:brown", "keyring": "tab:olive"}
    colors["replica"] = "tab:cyan"
    for ax in (ax1, ax2, ax3):
        ax.axvline(args.baseline_s, color="gray", ls=":")
        for k in record.kills:
            ax.axvline(k["t"], color=colors[k["role"]], lw=0.5, alpha=0.6)
    said = "red host, purple shard, brown store, olive key ring, cyan replica"
    ax1.set_title(f"memray chaos soak: {len(record.kills)} kills ({said})")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="of kills (after the baseline)")
    parser.add_argument("--kill-every", type=float, default=10.0, help="seconds from one kill to the next")
    parser.add_argument(
        "--min-kills",
        type=int,
        default=0,
        help=f"go on past the minutes until this many kills are probed (≤ {MIN_KILLS_GRACE_S:.0f} s more)",
    )
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--tick-s", type=float, default=1.0, help="one tick starts every this many seconds")
    parser.add_argument("--baseline-s", type=float, default=60.0, help="quiet ticks before the kills")
    parser.add_argument("--sample-s", type=float, default=5.0, help="process RSS and open files every")
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--stores", type=int, default=2, help="history store partitions")
    parser.add_argument("--replicas", type=int, default=2, help="Serve replicas of the server")
    parser.add_argument("--http-requests", type=int, default=100_000, help="requests per HTTP client, at most")
    parser.add_argument("--dir", default=None, help="data directory (default: a new temporary one)")
    parser.add_argument("--plot", default=None, help="PNG timeline with the kills marked")
    args = parser.parse_args(argv)
    import memray

    root = args.dir or scratch("memray-soak-")
    path, fork_path = os.path.join(root, "data"), os.path.join(root, "fork")

    def config(p: str, mode: str) -> memray.MemoryConfig:
        return memray.MemoryConfig(
            path=p, mode=mode, hosts=args.hosts, shards=args.shards, stores=args.stores, namespace="memray-soak"
        )

    started = start_ray(None)
    with ThreadPoolExecutor(1, thread_name_prefix="soak-proxy") as pool:
        proxy = pool.submit(start_proxy)  # Serve's controller and proxy start while the actors do
        mem = memray.open(config=config(path, "ray"))
        port_started = proxy.result()
    server: Server | None = None
    try:
        server = start_server(mem, config(path, "ray"), APPS, PROBE_APP, args.replicas, port_started)
        record = Record()  # times from here: the baseline is of ticks, not of start-up
        traffic = Traffic(record.t0)
        log(
            f"soak: {args.agents} agents and 5 HTTP clients on {server.url} ({args.replicas} replicas), "
            f"{args.baseline_s:.0f} s quiet, then {args.minutes} min with a kill every {args.kill_every} s; "
            f"data in {root}"
        )
        events = asyncio.run(drive(mem, args, record, fork_path, server, traffic))
        log(f"soak: {len(record.kills)} kills, {len(record.acks)} acks; final flush and close")
        flushes = final_flush(mem, record)
        indexed = mem.wait_indexed(180)
        record.reported |= traffic.reported  # losses named to REST callers, in their problem answers
        figures = run_figures(record, args)
        served = traffic_figures(traffic, record.kills, args.baseline_s)
    finally:
        try:
            if server is not None:
                stop_server(server)
        finally:
            mem.close(terminate=True)
            if started:
                import ray

                ray.shutdown()
    cold = memray.open(config=config(path, "inprocess"))
    try:
        checked = cold_check(cold, record.acks, record.reported, record.deleted, record.unsure)
        over_rest = [a for a in record.acks if a.user_id.startswith("rest-")]
        rest = cold_check(cold, over_rest, record.reported, record.deleted, record.unsure)
        mcp = mcp_check(cold, traffic.mcp_acks)
        erased = events["erased_user"]
        proof = cold.verify_deleted(user_id=erased, app=APPS[0])
        rest_proof = cold.verify_deleted(user_id=ERASED_REST_USER, app=APPS[1])
    finally:
        cold.close()
    erasure = {
        **events["erasure"],
        "verified_clean": proof.clean,
        "files_holding_id": files_holding(path, erased) if events["erasure"]["ok"] else None,
    }
    rest_erasure = {
        **served.pop("rest_erasure"),
        "verified_clean": rest_proof.clean,
        "files_holding_id": files_holding(path, ERASED_REST_USER),
    }
    figures["ryw_failed"] += traffic.ryw["mcp_context_missed"]  # durable adds: no loss explains a miss
    by_channel = {
        "all_but_mcp": {k: checked.get(k, 0) for k in CHANNEL_FIGURES},
        "rest": {k: rest.get(k, 0) for k in CHANNEL_FIGURES},
        "mcp": mcp,
    }
    for k, m in zip(CHANNEL_FIGURES, MCP_FIGURES):  # the totals the acceptance check reads count MCP's
        checked[k] = checked.get(k, 0) + mcp[m]
    forked: dict[str, Any] = {k: events["fork"].get(k) for k in ("ok", "attempts")}
    if events["fork"]["ok"]:
        fork = memray.open(config=config(events["fork"]["path"], "inprocess"))
        try:
            forked.update(fork_check(fork, events["before_fork"], record))
        finally:
            fork.close()
    params = {k: getattr(args, k) for k in PARAMS}
    if args.plot:
        plot_timeline(args.plot, record, args)
    return emit(
        "soak",
        params,
        {
            **{k: checked.get(k, 0) for k in ("acked", "stored", "lost_durable", "duplicated", "seq_mismatch")},
            "unnamed_losses": checked.get("unnamed_losses", 0),
            **{k: figures[k] for k in ("kills", "p99_tick_ratio", "p99_recover_s", "rss_slope_mb_per_min")},
            **checked,
            **figures,
            "final_flushes": flushes,
            "wait_indexed": indexed,
            "erasure": erasure,
            "rest_erasure": rest_erasure,
            "fork": forked,
            "by_channel": by_channel,
            "server": served,
            "errors_sample": record.error_log[:20],
        },
    )


if __name__ == "__main__":
    main()
