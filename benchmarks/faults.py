"""Fault injection: SIGKILL memray's own actor processes during ingest and during searches, then
count what callers were told against what the store holds.

``python -m benchmarks.faults --conversations 200 --messages 50 --batch 10 --threads 16``

Scenarios (``--scenarios``, comma-separated; all by default), all on one memray in Ray mode:

- ``none_durable``: the same ingest with no fault (the floor the others are read against);
- ``host_durable`` / ``host_buffered``: a ConversationHost killed mid-ingest, adds with
  ``durable=True`` / ``durable=False``;
- ``host_add_many``: the same kill, the adds made by ``Memory.add_many`` (durable);
- ``paused_store``: a durable add of 100 messages reaches a store paused with ``SIGSTOP``, its
  host is killed, the store resumes and commits the orphaned batch, the facade's retry answers
  (:func:`host_killed_while_store_paused`);
- ``fork_open``: ``fork()`` while writers add to the source, the fork opened in-process here while
  the source runs in Ray, both written at once (:func:`fork_under_writes`);
- ``store_durable`` / ``store_buffered``: the HistoryStore actor killed mid-ingest;
- ``store_restart``: durable adds from one writer while the store is killed ``--restarts``
  times: how long a restart holds up one durable add, free of the queueing of 16 writers on a
  loaded machine (:func:`store_restarts`);
- ``shard_ingest``: a VectorShard killed mid-ingest; after ``wait_indexed()`` every stored vector
  must be in its shard and every message findable by vector and lexically;
- ``shard_search``: a shard killed while clients search: every search must answer (degraded while
  the shard is away), none may raise;
- ``reopen``: close in Ray mode, reopen in-process, then in Ray mode again: every message, seq and
  vector of every scenario must still be there.

Prints one JSON line per scenario, as each ends: ``benchmark``, ``scenario``, git sha, machine,
parameters, then the figures every scenario reports (:data:`FIGURES`; ``null`` where a scenario
writes nothing):

- ``acked``: messages whose ``add`` returned (for ``reopen``: every message read back before the
  close; for ``fork_open``: those acknowledged before ``fork()``);
- ``stored``: of those, the ones the store (the fork, the reopened memray) holds;
- ``seq_mismatch``: stored with another seq than the one acknowledged (must be 0);
- ``lost``: acknowledged, not stored (0 but for ``host_buffered``, where each is named);
- ``duplicated``: ids or seqs stored twice;
- ``stall_s``: how long the fault held up the calls it caught (:func:`add_figures`);

then its own: for an ingest scenario ``lost_recorded`` (lost messages recorded as ``lost`` dead
letters: must equal ``lost``), ``lost_max_age_s`` (age of the oldest lost message at the kill:
the debounce window bounds it), ``seq_reused`` (a lost message's seq held by another message),
``gaps`` (seqs neither stored nor dead-lettered), ``restart_s`` (kill → Ray has the actor alive
again: the floor ``stall_s`` is read against), ``recovery_s`` (kill → the new process answered
the benchmark), ``caller_errors`` (what ``add`` raised, by type), ``add_ms`` / ``add_max_ms``.
``--plot`` draws acknowledged vs stored vs lost per ingest scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from benchmarks._harness import emit, log, pct_ms, plot_bars, scratch, start_ray
from benchmarks.fault_checks import index_figures, stored_against_acked

__all__ = [
    "SCENARIOS",
    "FIGURES",
    "ingest_under_fault",
    "store_restarts",
    "acked_against",
    "searches_under_fault",
    "reopen_across_modes",
    "open_memory",
    "main",
]

INGEST = (
    "none_durable",
    "host_durable",
    "host_add_many",
    "host_buffered",
    "store_durable",
    "store_buffered",
    "shard_ingest",
)
SCENARIOS = (*INGEST, "store_restart", "paused_store", "fork_open", "shard_search", "reopen")
#: What every scenario's line reports first (see the module docstring).
FIGURES = ("acked", "stored", "seq_mismatch", "lost", "duplicated", "stall_s")


def open_memory(path: str, hosts: int = 2, shards: int = 2, namespace: str = "memray-faults") -> Any:
    import memray

    return memray.open(
        config=memray.MemoryConfig(
            path=path, mode="ray", hosts=hosts, shards=shards, namespace=namespace, write_timeout_s=120.0
        )
    )


def _pid(mem: Any, client: Any, timeout_s: float = 5.0) -> int:
    """The process id of the actor behind ``client`` (a host says it in its stats)."""
    from memray.conversation.client import HostClient

    async def once() -> int:
        if isinstance(client, HostClient):
            return int((await asyncio.wait_for(client.stats(), timeout_s))["pid"])
        return int(await asyncio.wait_for(client.pid(), timeout_s))

    return int(mem.internals.run(once()))


def _victim(mem: Any, target: str) -> Any:
    dep = mem.internals.deployment
    return {"host": dep.hosts[0], "store": dep.stores.clients[0], "shard": dep.shards[0]}[target]


def kill_and_time(mem: Any, client: Any, timeout_s: float = 120.0) -> dict[str, float]:
    """SIGKILL the actor's process. ``at``: when; ``restart_s``: until Ray's control plane has
    the actor ALIVE again (what Ray's restart takes); ``recovery_s``: until a new process answers."""
    old = _pid(mem, client)
    os.kill(old, signal.SIGKILL)
    at = time.monotonic()
    restarted = False  # seen away: the table may still have the killed process ALIVE at first
    while True:
        where = mem.internals.run(client.ref.placement())
        if where is not None and where.state != "ALIVE":
            restarted = True
        elif restarted:
            break
        if time.monotonic() - at > timeout_s:
            raise RuntimeError(f"Ray did not restart {client.label} within {timeout_s} s")
        time.sleep(0.005)
    restart_s = time.monotonic() - at
    while time.monotonic() - at < timeout_s:
        try:
            if _pid(mem, client) != old:
                return {"at": at, "restart_s": restart_s, "recovery_s": time.monotonic() - at}
        except Exception:  # dead or restarting: ask again
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{client.label} did not come back within {timeout_s} s")


def ingest_under_fault(
    mem: Any,
    scenario: str,
    conversations: int,
    messages: int,
    batch: int,
    threads: int,
    kill_at: float = 0.4,
    users: int = 50,
) -> dict[str, Any]:
    """Ingest ``conversations`` x ``messages`` in adds of ``batch`` from ``threads`` threads (one
    thread per conversation at a time, so per-conversation order is the caller's), SIGKILL the
    scenario's target once ``kill_at`` of the messages are acknowledged, then count."""
    from memray.errors import DeadLetterError
    from memray.models import Message, TextPart

    target = scenario.split("_")[0]  # host, store, shard or none
    durable = scenario.endswith(("durable", "add_many"))
    many = scenario.endswith("add_many")  # Memory.add_many, one conversation per call, as a driver batches
    app = f"faults-{scenario}"
    convs = [mem.conversation(user_id=f"u{c % users}", conversation_id=f"c{c}", app=app) for c in range(conversations)]
    total = conversations * messages
    acked: dict[tuple[int, str], tuple[int, float]] = {}  # (conversation, id) -> (seq, acked at)
    errors: Counter[str] = Counter()
    spans: list[tuple[float, float]] = []  # (start, end) of every add
    lock = threading.Lock()
    done = threading.Event()
    kill: dict[str, float] = {}

    def work(mine: list[int]) -> None:
        for c in mine:
            for start in range(0, messages, batch):
                msgs = [
                    Message(
                        role="user" if i % 2 else "assistant",  # type: ignore[list-item]
                        parts=[TextPart(text=f"conversation {c} says zq{c}x{i}: message {i} of the fault run")],
                    )
                    for i in range(start, min(start + batch, messages))
                ]
                t0 = time.monotonic()
                try:
                    if many:
                        seqs = mem.add_many([(convs[c], msgs)], durable=durable)[0]
                    else:
                        seqs = convs[c].add(msgs, durable=durable)
                except Exception as exc:  # counted: what callers saw
                    with lock:
                        errors[type(exc).__name__] += 1
                        spans.append((t0, time.monotonic()))
                    continue
                now = time.monotonic()
                with lock:
                    spans.append((t0, now))
                    for m, s in zip(msgs, seqs):
                        acked[(c, m.id)] = (s, now)

    def killer() -> None:
        if target == "none":
            return
        while len(acked) < kill_at * total and not done.is_set():
            time.sleep(0.005)
        if not done.is_set():
            kill.update(kill_and_time(mem, _victim(mem, target)))

    workers = [
        threading.Thread(target=work, args=([c for c in range(conversations) if c % threads == t],))
        for t in range(threads)
    ]
    k = threading.Thread(target=killer)
    t0 = time.monotonic()
    k.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    k.join()
    wall = time.monotonic() - t0
    log(
        f"{scenario}: {len(acked)}/{total} acknowledged in {wall:.1f}s"
        + (f", kill at {kill['at'] - t0:.1f}s, back in {kill['recovery_s']:.2f}s" if kill else ", no fault")
    )

    reported = 0
    for conv in convs:  # each conversation's next flush names what it lost
        try:
            conv.flush()
        except DeadLetterError as exc:
            reported += len(exc.letters)
    # counted by the restarted host itself (a fresh process: its counter is this kill's)
    lost_stat = sum(s["lost_on_restart"] for s in mem.stats()) if target == "host" else None
    indexed = mem.wait_indexed(180) if target == "shard" else None
    return {
        **stored_against_acked(mem, app, convs, acked, kill),
        "lost_reported_to_flush": reported,
        "hosts_lost_on_restart": lost_stat,
        "restart_s": round(kill["restart_s"], 2) if kill else None,
        "wall_s": round(wall, 2),
        "caller_errors": dict(errors),
        **add_figures(spans, kill),
        **({"wait_indexed": indexed, **index_figures(mem, app, convs)} if indexed is not None else {}),
    }


def add_figures(spans: list[tuple[float, float]], kill: dict[str, float]) -> dict[str, Any]:
    """Latency of the adds (``spans``: start and end of each) and ``stall_s``: how long the
    fault held up the adds it caught — those in flight at the kill or begun before the actor
    answered again — from the kill (or their start, if later) to their answer. With no fault:
    the longest add of the run (the floor the stalls are read against)."""
    lat = [end - start for start, end in spans]
    if "at" in kill:
        at, back = kill["at"], kill["at"] + kill["recovery_s"]
        caught = [end - max(start, at) for start, end in spans if end >= at and start <= back]
    else:
        caught = lat
    return {
        "add_ms": pct_ms(lat),
        "add_max_ms": round(max(lat, default=0) * 1000, 1),
        "stall_s": round(max(caught, default=0.0), 2),
    }


def acked_against(acked: dict[Any, int], stored: dict[Any, int]) -> dict[str, int]:
    """``acked``, ``stored``, ``seq_mismatch`` and ``lost`` of :data:`FIGURES`: what was
    acknowledged (``acked``: message -> seq) against what is stored (message -> seq)."""
    return {
        "acked": len(acked),
        "stored": sum(1 for i in acked if i in stored),
        "seq_mismatch": sum(1 for i, seq in acked.items() if i in stored and stored[i] != seq),
        "lost": sum(1 for i in acked if i not in stored),
    }


def store_restarts(mem: Any, restarts: int = 5, batch: int = 10, timeout_s: float = 120.0) -> dict[str, Any]:
    """Durable adds of ``batch`` messages to one conversation, one at a time from one writer (an
    add then takes the store's time, not a queue's), while the conversation's store partition is
    SIGKILLed ``restarts`` times, each once the writer's adds run again after the last kill.
    ``stall_s``: the longest an add caught by a kill took from the kill (``stalls_s``: per kill);
    ``restart_s``: how long Ray took to have the store alive again, per kill (the floor of each
    stall); ``add_ms``: every add."""
    from memray.models import Message, TextPart

    conv = mem.conversation(user_id="restarts", conversation_id="c", app="faults-restart")
    store = mem.internals.deployment.stores.of_key(conv.key)
    acked: dict[str, int] = {}
    spans: list[tuple[float, float]] = []
    errors: Counter[str] = Counter()
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            msgs = [Message(role="user", parts=[TextPart(text=f"restart note {n}.{i}")]) for i in range(batch)]
            t0 = time.monotonic()
            try:
                seqs = conv.add(msgs, durable=True)
            except Exception as exc:  # counted: what the caller saw
                errors[type(exc).__name__] += 1
                continue
            spans.append((t0, time.monotonic()))
            acked.update(zip((m.id for m in msgs), seqs))
            n += 1

    def running() -> None:  # ten more adds answered
        ran = len(spans)
        _wait_for(lambda: len(spans) >= ran + 10, timeout_s, "the writer's adds to run again")

    writer = threading.Thread(target=write)
    writer.start()
    kills: list[dict[str, float]] = []
    try:
        for _ in range(restarts):
            running()
            kills.append(kill_and_time(mem, store, timeout_s))
        running()
    finally:
        stop.set()
        writer.join(timeout_s)
    rows = mem.internals.run(mem.internals.deployment.stores.get_messages(conv.key))
    stored = {r.id: r.seq for r in rows}
    stalls = [add_figures(spans, kill)["stall_s"] for kill in kills]
    log(f"store_restart: {len(kills)} kills, stalls {stalls} s")
    return {
        **acked_against(acked, stored),
        "duplicated": 2 * len(rows) - len(stored) - len(set(stored.values())),
        "stall_s": max(stalls, default=0.0),
        "stalls_s": stalls,
        "restart_s": [round(k["restart_s"], 2) for k in kills],
        "caller_errors": dict(errors),
        "add_ms": pct_ms([end - start for start, end in spans]),
    }


def host_killed_while_store_paused(mem: Any, batch: int = 100, timeout_s: float = 120.0) -> dict[str, Any]:
    """A retried durable add whose first attempt reached a paused store. A conversation holds
    one message; its store partition is paused (``SIGSTOP``) while a durable add of ``batch``
    messages reaches it; the host is killed (``SIGKILL``); the store resumes (``SIGCONT``) and
    commits the orphaned batch for nobody; the facade's retry is answered by the restarted host.
    Every seq the add returns must be the stored one. ``stall_s``: resume → answer."""
    from memray.models import Message, TextPart

    dep = mem.internals.deployment
    conv = mem.conversation(user_id="paused", conversation_id="c", app="faults-paused")
    conv.add({"role": "user", "content": "the one message before the pause"}, durable=True)
    host = dep.hosts[conv.key.route(len(dep.hosts))]
    host_pid, store_pid = _pid(mem, host), _pid(mem, dep.stores.of_key(conv.key))
    msgs = [Message(role="user", parts=[TextPart(text=f"paused batch message {i}")]) for i in range(batch)]
    answer: dict[str, Any] = {}

    def add() -> None:
        try:
            answer["seqs"] = conv.add(msgs, durable=True)
        except Exception as exc:  # counted: what the caller saw
            answer["error"] = f"{type(exc).__name__}: {exc}"
        answer["at"] = time.monotonic()

    os.kill(store_pid, signal.SIGSTOP)
    try:
        caller = threading.Thread(target=add)
        caller.start()
        _wait_for(
            lambda: mem.internals.run(host.stats())["writing"] >= batch, timeout_s, "the batch's commit to be sent"
        )
        os.kill(host_pid, signal.SIGKILL)
        _wait_for(lambda: not _alive(host_pid), timeout_s, f"host process {host_pid} to die")
    finally:
        os.kill(store_pid, signal.SIGCONT)
    resumed = time.monotonic()
    caller.join(timeout_s)
    stored = {r.id: r.seq for r in mem.internals.run(dep.stores.get_messages(conv.key))}
    seqs = dict(zip((m.id for m in msgs), answer.get("seqs", [])))
    log(f"paused store, killed host: {answer.get('error') or f'{len(seqs)} acknowledged'}")
    return {
        **acked_against(seqs, stored),
        "duplicated": len(stored.values()) - len(set(stored.values())),
        "stall_s": round(answer["at"] - resumed, 2) if "at" in answer else None,
        "caller_error": answer.get("error"),
    }


def fork_under_writes(mem: Any, path: str, conversations: int = 20, threads: int = 4) -> dict[str, Any]:
    """Fork while ``threads`` threads add to ``conversations`` conversations, open the fork in
    this process in-process (the source runs in Ray), and write both at once. ``acked``: the
    messages acknowledged before ``fork()`` was called; each must be in the fork at its seq
    (``stored``, ``seq_mismatch``, ``lost``); ``duplicated``: ids or seqs the fork holds twice;
    ``stall_s``: the longest add to the source while the fork ran; ``branch_written``: the fork's
    own adds, none of which may reach the source (``leaked``)."""
    from memray.models import Message, TextPart

    app = "faults-fork"
    convs = [mem.conversation(user_id=f"u{c}", conversation_id="c", app=app) for c in range(conversations)]
    acked: dict[str, int] = {}  # message id -> seq
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def write(mine: list[int]) -> None:
        n = 0
        while not stop.is_set():
            for c in mine:
                msg = Message(role="user", parts=[TextPart(text=f"trunk {c} goes on: note zf{c}x{n}")])
                t0 = time.monotonic()
                seqs = convs[c].add(msg)
                with lock:
                    spans.append((t0, time.monotonic()))
                    acked[msg.id] = seqs[0]
            n += 1

    writers = [threading.Thread(target=write, args=(list(range(t, conversations, threads)),)) for t in range(threads)]
    for w in writers:
        w.start()
    _wait_for(lambda: len(acked) >= 5 * conversations, 120, "the writers to warm up")
    with lock:
        before = dict(acked)
    t0 = time.monotonic()
    branch = mem.fork(path, mode="inprocess")
    fork_s = time.monotonic() - t0
    stored: dict[str, int] = {}
    duplicated = leaked = written = 0
    try:
        forked = [branch.conversation(user_id=f"u{c}", conversation_id="c", app=app) for c in range(conversations)]
        for c, conv in enumerate(forked):  # while the source's writers go on
            conv.add([{"role": "user", "content": f"branch {c} diverges: note zb{c}x{i}"} for i in range(5)])
        stop.set()
        for w in writers:
            w.join()
        for conv in (*convs, *forked):
            conv.flush()
        for source, conv in zip(convs, forked):
            msgs = conv.messages()
            duplicated += 2 * len(msgs) - len({m.id for m in msgs}) - len({m.seq for m in msgs})
            written += sum(1 for m in msgs if m.text.startswith("branch"))
            stored.update((m.id, m.seq or 0) for m in msgs if m.text.startswith("trunk"))
            leaked += sum(1 for m in source.messages() if m.text.startswith("branch"))
    finally:
        branch.close()
    during = [end - start for start, end in spans if end >= t0 and start <= t0 + fork_s]
    log(f"fork: {len(before)} acknowledged before it, {fork_s:.2f}s; {written} written to the branch")
    return {
        **acked_against(before, stored),
        "duplicated": duplicated,
        "stall_s": round(max(during, default=0.0), 2),
        "fork_s": round(fork_s, 2),
        "branch_written": written,
        "leaked": leaked,
    }


def _wait_for(done: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"waited {timeout_s} s for {what}")
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a killed process its parent has not reaped yet does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def searches_under_fault(
    mem: Any, conversations: int = 20, messages: int = 10, clients: int = 4, settle_s: float = 2.0
) -> dict[str, Any]:
    """Searches from ``clients`` threads while shard 0 is SIGKILLed: none may raise; degraded ones
    name the shard; recovery is the time from the kill to the first complete answer after it;
    ``stall_s`` the longest a search caught by the outage took (it writes nothing: the other
    figures of :data:`FIGURES` are ``None``)."""
    from memray.ids import user_hash

    app = "faults-search"
    shards = len(mem.internals.deployment.shards)
    users = [u for u in (f"su{i}" for i in range(1000)) if user_hash(app, u) % shards == 0][:conversations]
    convs = [mem.conversation(user_id=u, conversation_id="c", app=app) for u in users]
    for c, conv in enumerate(convs):
        conv.add(
            [{"role": "user", "content": f"searcher {c} remembers the pass phrase zs{c}y{i}"} for i in range(messages)]
        )
    assert mem.wait_indexed(120)
    outcomes: Counter[str] = Counter()
    wrong = 0
    lock = threading.Lock()
    stop = threading.Event()
    first_ok_after_kill: list[float] = []
    kill: dict[str, float] = {}
    spans: list[tuple[float, float]] = []

    def client(n: int) -> None:
        nonlocal wrong
        rng = random.Random(n)
        while not stop.is_set():
            c = rng.randrange(len(convs))
            i = rng.randrange(messages)
            t0 = time.monotonic()
            try:
                res = convs[c].search(f"pass phrase zs{c}y{i}", limit=1)
            except Exception as exc:
                with lock:
                    outcomes[f"raised {type(exc).__name__}"] += 1
                    spans.append((t0, time.monotonic()))
                continue
            now = time.monotonic()
            with lock:
                spans.append((t0, now))
                if res.degraded:
                    outcomes["degraded"] += 1
                else:
                    outcomes["complete"] += 1
                    wrong += not (res and res[0].message.text.endswith(f"zs{c}y{i}"))
                    if "at" in kill and now > kill["at"] and not first_ok_after_kill:
                        first_ok_after_kill.append(now - kill["at"])

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    time.sleep(settle_s)
    kill.update(kill_and_time(mem, mem.internals.deployment.shards[0]))
    deadline = time.monotonic() + 120
    while not first_ok_after_kill and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(settle_s)
    stop.set()
    for t in threads:
        t.join()
    total = sum(outcomes.values())
    log(f"shard_search: {total} searches, {dict(outcomes)}")
    return {
        **dict.fromkeys(FIGURES),
        "stall_s": add_figures(spans, kill)["stall_s"],
        "searches": total,
        "outcomes": dict(outcomes),
        "raised": sum(v for k, v in outcomes.items() if k.startswith("raised")),
        "wrong_top_hit": wrong,
        "restart_s": round(kill["restart_s"], 2),
        "process_back_s": round(kill["recovery_s"], 2),
        "recovery_s": round(first_ok_after_kill[0], 2) if first_ok_after_kill else None,
    }


def reopen_across_modes(mem: Any, path: str, reopen: Callable[[str, str], Any]) -> tuple[dict[str, Any], Any]:
    """Close ``mem`` (Ray), reopen in-process, then in Ray again; compare every message (id, seq,
    text) of every conversation and each shard's vectors with the first reading. ``acked``: the
    messages read before the close; ``stored``: those both reopenings hold, ``seq_mismatch`` /
    ``lost``: those either holds at another seq / not at all; ``duplicated``: ids or seqs either
    holds twice in a conversation (it writes nothing: ``stall_s`` is ``None``). Returns the
    figures and the memray open at the end."""

    def snapshot(m: Any) -> tuple[dict[Any, Any], int]:
        rows: dict[Any, Any] = {}
        for app in sorted({d for d in _apps(m)}):
            for user in _users(m, app):
                for info in m.list_conversations(user, app=app, limit=100_000):
                    conv = m.conversation(user_id=user, conversation_id=info.conversation_id, app=app)
                    rows[(app, user, info.conversation_id)] = [(x.id, x.seq, x.text) for x in conv.messages()]
        vectors = sum(m.internals.run(s.stats())["vectors"] for s in m.internals.deployment.shards)
        return rows, vectors

    assert mem.wait_indexed(180)
    before, vectors = snapshot(mem)
    mem.close(terminate=True)
    local = reopen(path, "inprocess")
    assert local.wait_indexed(180)
    middle, v_local = snapshot(local)
    local.close()
    again = reopen(path, "ray")
    assert again.wait_indexed(180)
    after, v_again = snapshot(again)
    mismatch = sum(1 for k in before if before[k] != middle.get(k)) + sum(
        1 for k in before if before[k] != after.get(k)
    )
    acked = _seqs(before)
    reread = [_seqs(middle), _seqs(after)]
    return {
        "acked": len(acked),
        "stored": sum(1 for k in acked if all(k in r for r in reread)),
        "seq_mismatch": sum(1 for k, seq in acked.items() if any(r.get(k, seq) != seq for r in reread)),
        "lost": sum(1 for k in acked if not all(k in r for r in reread)),
        "duplicated": sum(_twice(rows) for reading in (middle, after) for rows in reading.values()),
        "stall_s": None,
        "conversations": len(before),
        "conversation_mismatches": mismatch,
        "vectors": [vectors, v_local, v_again],
    }, again


def _seqs(reading: dict[Any, list[tuple[str, int, str]]]) -> dict[tuple[Any, str], int]:
    """(conversation, message id) -> seq, over a reading of :func:`reopen_across_modes`."""
    return {(conv, mid): seq for conv, rows in reading.items() for mid, seq, _ in rows}


def _twice(rows: list[tuple[str, int, str]]) -> int:
    """Ids and seqs one conversation's rows hold more than once."""
    return 2 * len(rows) - len({mid for mid, _, _ in rows}) - len({seq for _, seq, _ in rows})


def _apps(m: Any) -> list[str]:
    return [f"faults-{s}" for s in INGEST] + ["faults-search", "faults-paused", "faults-fork", "faults-restart"]


def _users(m: Any, app: str) -> list[str]:
    if app == "faults-search":
        from memray.ids import user_hash

        return [
            u for u in (f"su{i}" for i in range(1000)) if user_hash(app, u) % len(m.internals.deployment.shards) == 0
        ]
    if app == "faults-paused":
        return ["paused"]
    if app == "faults-restart":
        return ["restarts"]
    return [f"u{i}" for i in range(50)]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50, help="per conversation")
    parser.add_argument("--batch", type=int, default=10, help="messages per add")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--kill-at", type=float, default=0.4, help="share of messages acknowledged at the kill")
    parser.add_argument("--restarts", type=int, default=5, help="store kills of store_restart")
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--address", default=None)
    parser.add_argument("--plot", default=None)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    names = [s for s in args.scenarios.split(",") if s]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
    started = start_ray(args.address)
    path = args.dir or scratch("memray-faults-")
    import memray

    def reopen(p: str, mode: str) -> Any:
        return memray.open(
            config=memray.MemoryConfig(
                path=p,
                mode=mode,
                hosts=args.hosts,
                shards=args.shards,
                namespace="memray-faults",
                write_timeout_s=120.0,
            )
        )

    params = {
        k: getattr(args, k)
        for k in ("conversations", "messages", "batch", "threads", "kill_at", "restarts", "hosts", "shards")
    }
    results: dict[str, dict[str, Any]] = {}
    lines: list[dict[str, Any]] = []
    mem = open_memory(path, args.hosts, args.shards)
    try:
        for name in names:
            if name in INGEST:
                figures = ingest_under_fault(
                    mem, name, args.conversations, args.messages, args.batch, args.threads, args.kill_at
                )
            elif name == "store_restart":
                figures = store_restarts(mem, args.restarts)
            elif name == "paused_store":
                figures = host_killed_while_store_paused(mem)
            elif name == "fork_open":
                figures = fork_under_writes(mem, scratch("memray-faults-fork-"))
            elif name == "shard_search":
                figures = searches_under_fault(mem)
            else:
                figures, mem = reopen_across_modes(mem, path, reopen)
            results[name] = figures
            lines.append(emit("faults", params, {"scenario": name, **{k: figures[k] for k in FIGURES}, **figures}))
    finally:
        mem.close(terminate=True)
        if started:
            import ray

            ray.shutdown()
    if args.plot:
        ingest = [n for n in names if n in INGEST]
        plot_bars(
            args.plot,
            "memray under SIGKILL: acknowledged vs stored",
            ingest,
            {k: [results[n][k] for n in ingest] for k in ("acked", "stored", "lost")},
            "messages",
        )
    return lines


if __name__ == "__main__":
    main()
