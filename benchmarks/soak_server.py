"""The chaos soak's server side (:mod:`benchmarks.soak`): memray's Serve app over the soak's memray,
HTTP clients with keys of two apps, and two more victims for the killer: the key ring and a Serve
replica.

- :func:`start_server` deploys the app of ``memray serve`` (REST under ``/v1``, MCP at ``/mcp``)
  as an application of its own, ``memray-soak`` under ``/soak``, on Serve's HTTP proxy on
  127.0.0.1: the one already running in this Ray (the test session's), or one it starts on a
  free loopback port. Its keys: a writer of each app, a read-only reader of the first, one bound
  to a user erased during the run, one for the kill probes.
- :class:`HttpClients`: one thread per client, each a round every ``tick_s`` until ``done`` is set
  (or ``max_requests``): the REST writers add a message (durable and buffered in turn, with an
  id, so the cold check holds it like any other ack), read their context for it
  (read-your-writes), and ask with their key for the other app's conversation (a cross-tenant
  probe: 403 or 404, never data); the reader lists and searches, and now and then tries to
  write (403); the MCP clients add durably through ``add_memory`` (the seq is all an MCP
  client gets back: :func:`mcp_check` finds the text at that seq) and read it back with
  ``get_context``. Halfway, one writer erases a user over REST; the key bound to that user must
  then be refused. Only 127.0.0.1 is ever asked.
- :func:`server_victims`, :func:`server_pid`: the key ring's actor and the Serve replicas
  (found by name, each asked its pid through Ray's ``__ray_call__``); :func:`rest_probe`: after a
  kill, a durable add over REST retried until answered (kill → next authenticated success).
  At a replica kill Serve's proxy answers 500 to a request in flight on it: counted as such.
- :func:`traffic_figures`: requests, answers by status, latency p50/p99 (quiet and under kills),
  the tenancy checks, and per kill the time until the next authenticated REST success.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks._harness import free_port

__all__ = [
    "SERVER_ROLES",
    "ERASED_REST_USER",
    "Server",
    "Traffic",
    "HttpClients",
    "start_proxy",
    "start_server",
    "stop_server",
    "server_victims",
    "server_pid",
    "rest_probe",
    "mcp_check",
    "traffic_figures",
]

SERVE_APP = "memray-soak"
ROUTE = "/soak"
SERVER_ROLES = ("keyring", "replica")
ERASED_REST_USER = "rest-gone"
#: The requests a refusal answers when all is well (the tenancy probes): not counted as errors.
REFUSALS_EXPECTED = frozenset({"rest cross-tenant", "rest read-only write", "rest erased key"})
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


@dataclass(frozen=True)
class Tenant:
    """One client's key: its app, and whether it may write."""

    name: str
    app: str
    key: str
    read_only: bool = False


@dataclass
class Server:
    url: str  # with the route prefix: http://127.0.0.1:PORT/soak
    tenants: dict[str, Tenant]
    started_serve: bool


@dataclass(frozen=True)
class McpAck:
    """A durable ``add_memory`` an MCP client was answered: the seq, and the text it sent."""

    app: str
    user_id: str
    conversation_id: str
    seq: int
    text: str
    at: float


@dataclass
class Traffic:
    """What the HTTP clients saw (shared by their threads, the kill probes and the figures)."""

    t0: float
    calls: list[tuple[str, float, float, str]] = field(default_factory=list)  # (channel op, sent, s, status)
    mcp_acks: list[McpAck] = field(default_factory=list)
    tenancy: Counter[str] = field(default_factory=Counter)
    ryw: Counter[str] = field(default_factory=Counter)
    events: dict[str, Any] = field(default_factory=dict)
    error_samples: list[tuple[float, str, str, str]] = field(default_factory=list)
    reported: set[tuple[str, str, str, str]] = field(default_factory=set)  # losses a problem answer named
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def call(
        self, http: httpx.Client, what: str, method: str, path: str, body: Any = None, headers: Any = None
    ) -> tuple[str, Any]:
        """One request; its status (or the transport error's name) and its JSON body (or None),
        recorded with when it was sent and how long it took."""
        sent = self.now()
        try:
            r = http.request(method, path, json=body, headers=headers)
            status, answer, said = str(r.status_code), _json(r), r.text
        except httpx.HTTPError as exc:  # a replica gone mid-request, a timeout: what the client saw
            status, answer, said = type(exc).__name__, None, str(exc)
        self.answered(what, sent, status, said)
        owner = _app_user(path)
        if isinstance(answer, dict) and answer.get("dead_letters") and owner is not None:
            with self.lock:
                self.reported.update((*owner, d["conversation_id"], d["id"]) for d in answer["dead_letters"])
        return status, answer

    def answered(self, what: str, sent: float, status: str, said: str) -> None:
        """Record one answer; the first few errors' words are kept (``error_samples``)."""
        with self.lock:
            self.calls.append((what, sent, self.now() - sent, status))
            if not status.startswith("2") and what not in REFUSALS_EXPECTED and len(self.error_samples) < 40:
                self.error_samples.append((round(sent, 2), what, status, said[:300]))


def _app_user(path: str) -> tuple[str, str] | None:
    """The app and user of a ``/v1/apps/{app}/users/{user}/...`` path (None: another path)."""
    parts = path.split("/")
    return (parts[3], parts[5]) if len(parts) > 5 and parts[1:3] == ["v1", "apps"] and parts[4] == "users" else None


def _json(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return None


# -- the server -------------------------------------------------------------------------------
def start_proxy() -> tuple[int, bool]:
    """Serve's HTTP proxy: the port of the one running in this Ray (the test session's), or of
    one started on a free loopback port; and whether this started it. (It starts while the
    memray opens: ``memray serve`` overlaps them alike.)"""
    from ray.serve.context import _get_global_client

    from memray.server.deployment import start_proxy as start_proxy_on

    started = _get_global_client(raise_if_no_controller_running=False) is None
    if started:
        start_proxy_on("127.0.0.1", free_port())
    client = _get_global_client()
    assert client is not None
    return int(client.http_config.port), started


def start_server(
    mem: Any, config: Any, apps: tuple[str, str], probe_app: str, replicas: int, proxy: tuple[int, bool]
) -> Server:
    """Keys, then the app deployed on ``proxy`` (:func:`start_proxy`; see the module docstring);
    returns once a key is accepted."""
    from ray import serve

    from memray.server.deployment import application
    from memray.server.settings import ServerSettings

    a, b = apps
    made = [
        ("writer-a", a, None, False),
        ("writer-b", b, None, False),
        ("reader-a", a, None, True),
        ("gone", b, ERASED_REST_USER, False),
        ("probe", probe_app, None, False),
    ]
    tenants = {}
    for name, app, user, read_only in made:
        key, _ = mem.keys.create(app, user, read_only, label=f"soak-{name}")
        tenants[name] = Tenant(name, app, key, read_only)
    port, started = proxy  # every request goes to 127.0.0.1, whatever host the proxy was given
    settings = ServerSettings(config=config, replicas=replicas)
    serve.run(application(settings), name=SERVE_APP, route_prefix=ROUTE, blocking=False)
    server = Server(f"http://127.0.0.1:{port}{ROUTE}", tenants, started)
    _ready(server)
    return server


def _ready(server: Server, timeout_s: float = 120.0) -> None:
    """Until an authenticated request is answered 200 (the replicas load the keys as they start)."""
    w = server.tenants["writer-a"]
    deadline = time.monotonic() + timeout_s
    with _client(server, w) as http:
        while time.monotonic() < deadline:
            try:
                if http.get(f"/v1/apps/{w.app}/users/warm/conversations").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    raise RuntimeError(f"the soak's server at {server.url} answered no authenticated request in {timeout_s} s")


def stop_server(server: Server) -> None:
    from ray import serve

    serve.delete(SERVE_APP)
    if server.started_serve:
        serve.shutdown()  # type: ignore[no-untyped-call]


def _client(server: Server, tenant: Tenant, timeout_s: float = 30.0) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {tenant.key}"}, timeout=timeout_s)


# -- the clients ------------------------------------------------------------------------------
class HttpClients:
    """The client threads of the module docstring; ``record`` is the soak's (acks, read misses)."""

    def __init__(self, server: Server, record: Any, traffic: Traffic, tick_s: float, max_requests: int) -> None:
        self.server, self.record, self.traffic = server, record, traffic
        self.tick_s, self.max_requests = tick_s, max_requests
        self.threads: list[threading.Thread] = []

    def start(self, done: threading.Event, erase_at: float) -> None:
        t = self.server.tenants
        self._seed_erased()
        loops = [
            ("rest-a", t["writer-a"], lambda n, h: self._rest_round(n, h, t["writer-a"], t["writer-b"])),
            ("rest-b", t["writer-b"], lambda n, h: self._rest_round(n, h, t["writer-b"], t["writer-a"], erase_at)),
            ("reader-a", t["reader-a"], lambda n, h: self._reader_round(n, h, t["reader-a"], t["writer-a"])),
            ("mcp-a", t["writer-a"], lambda n, h: self._mcp_round(n, h, t["writer-a"])),
            ("mcp-b", t["writer-b"], lambda n, h: self._mcp_round(n, h, t["writer-b"])),
        ]
        for name, tenant, body in loops:
            th = threading.Thread(target=self._loop, args=(name, tenant, body, done), daemon=True, name=name)
            self.threads.append(th)
            th.start()

    def join(self, timeout_s: float = 120.0) -> None:
        for th in self.threads:
            th.join(timeout_s)

    def _loop(self, name: str, tenant: Tenant, body: Any, done: threading.Event) -> None:
        """Rounds until the soak is ``done`` or ``max_requests`` sent; an error is recorded, never raised."""
        n = sent = 0
        with _client(self.server, tenant) as http:
            while not done.is_set() and sent < self.max_requests:
                start = self.traffic.now()
                try:
                    sent += body(n, http)
                except Exception as exc:  # a defect of the client itself: counted, the loop goes on
                    self.record.error(f"http client {name}", exc)
                    sent += 1
                n += 1
                time.sleep(max(0.0, start + self.tick_s - self.traffic.now()))

    def _seed_erased(self) -> None:
        """Messages of the user erased halfway: one added with the app's key, one with the key
        bound to that user."""
        for name in ("writer-b", "gone"):
            tenant = self.server.tenants[name]
            path = f"/v1/apps/{tenant.app}/users/{ERASED_REST_USER}/conversations/main/messages"
            body = {"messages": [{"role": "user", "content": f"{ERASED_REST_USER} says, with {name}'s key"}]}
            with _client(self.server, tenant) as http:
                status, _ = self.traffic.call(http, "rest seed", "POST", path, {**body, "ack": "durable"})
            if status != "200":
                raise RuntimeError(f"the soak's server refused the erased user's first messages: {status}")

    def _rest_round(self, n: int, http: httpx.Client, me: Tenant, other: Tenant, erase_at: float | None = None) -> int:
        tr, user, sent = self.traffic, f"rest-{me.name}", 2
        conv = f"/v1/apps/{me.app}/users/{user}/conversations/main"
        durable = n % 2 == 0
        mid, word = f"{user}-{n}", f"zr{me.name[-1]}{n}w"
        body = {"messages": [{"id": mid, "role": "user", "content": f"{user} round {n} {word}"}]}
        ack = "durable" if durable else "buffered"
        status, got = tr.call(http, "rest add", "POST", conv + "/messages", {**body, "ack": ack})
        if status == "200":
            self.record.ack(me.app, user, "main", [mid], got["seqs"], durable)
            status, ctx = tr.call(http, "rest context", "POST", conv + "/context", {"query": word, "limit": 4})
            sent += 1
            if status == "200":
                held = mid in {m["id"] for m in ctx["messages"]}
                self._held("rest_context", held, (me.app, user, "main", mid))
        # a cross-tenant probe: this key asks for the other app's writer's conversation
        theirs = f"/v1/apps/{other.app}/users/rest-{other.name}/conversations/main/messages"
        status, _ = tr.call(http, "rest cross-tenant", "GET", theirs)
        with tr.lock:
            tr.tenancy["cross_tenant_probes"] += 1
            tr.tenancy[f"cross_tenant_answered_{status}"] += 1
            tr.tenancy["cross_tenant_reads"] += status.startswith("2")  # any 2xx let it in
        if erase_at is not None and tr.now() >= erase_at and "rest_erasure" not in tr.events:
            sent += self._erase(http, me)
        return sent

    def _held(self, what: str, held: bool, ref: tuple[str, str, str, str] | None) -> None:
        with self.traffic.lock:
            self.traffic.ryw[f"{what}_{'held' if held else 'missed'}"] += 1
        if not held and ref is not None:
            with self.record.lock:
                self.record.ryw_missed.add(ref)

    def _erase(self, http: httpx.Client, me: Tenant) -> int:
        """Erase the REST user (retried: erasure is idempotent); then its bound key must be refused."""
        tr = self.traffic
        path = f"/v1/apps/{me.app}/users/{ERASED_REST_USER}"
        event: dict[str, Any] = {"ok": False, "attempts": 0}
        for attempt in range(1, 11):
            event["attempts"] = attempt
            status, _ = tr.call(http, "rest erase", "DELETE", path)
            if status == "200":
                event["ok"] = True
                break
            time.sleep(0.5)
        if event["ok"]:
            gone = self.server.tenants["gone"]
            with _client(self.server, gone) as g:
                status, _ = tr.call(g, "rest erased key", "GET", path + "/conversations")
            event["erased_key_answered"] = status
        tr.events["rest_erasure"] = event
        return int(event["attempts"]) + 1

    def _reader_round(self, n: int, http: httpx.Client, me: Tenant, writer: Tenant) -> int:
        tr = self.traffic
        conv = f"/v1/apps/{me.app}/users/rest-{writer.name}/conversations/main"
        tr.call(http, "rest list", "GET", conv + "/messages?limit=5")
        tr.call(http, "rest search", "POST", conv + "/search", {"query": f"round {n}", "limit": 3, "mode": "lexical"})
        if n % 5 != 0:
            return 2
        # a read-only key may not write
        body = {"messages": [{"id": f"ro-{n}", "role": "user", "content": "a read-only key's write"}]}
        status, _ = tr.call(http, "rest read-only write", "POST", conv + "/messages", body)
        with tr.lock:
            tr.tenancy["read_only_writes"] += 1
            tr.tenancy[f"read_only_writes_answered_{status}"] += 1
            tr.tenancy["read_only_writes_accepted"] += status.startswith("2")
        return 3

    def _mcp_round(self, n: int, http: httpx.Client, me: Tenant) -> int:
        tr, user = self.traffic, f"mcp-{me.app[-1]}"
        word = f"zm{me.app[-1]}{n}w"
        text = f"{user} round {n} {word}"
        args = {"user_id": user, "conversation_id": "main", "content": text, "durable": True}
        status, got = self._tool(http, "mcp add", "add_memory", args)
        if status == "200":
            with tr.lock:
                tr.mcp_acks.append(McpAck(me.app, user, "main", int(got["seqs"][0]), text, tr.now()))
            asked = {"user_id": user, "conversation_id": "main", "query": word}
            status, ctx = self._tool(http, "mcp context", "get_context", asked)
            if status == "200":
                self._held("mcp_context", word in json.dumps(ctx.get("messages", [])), None)
            return 2
        self._tool(http, "mcp search", "search_memories", {"user_id": user, "conversation_id": "main", "query": word})
        return 2

    def _tool(self, http: httpx.Client, what: str, name: str, arguments: dict[str, Any]) -> tuple[str, Any]:
        """A stateless ``tools/call``; a tool's error answers 200 with ``isError``: its status is
        the one its text names (``503 UnavailableError: ...``), else ``tool-error``."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        sent = self.traffic.now()
        try:
            r = http.post("/mcp", json=body, headers=MCP_HEADERS)
            status, answer, said = str(r.status_code), _json(r), r.text
        except httpx.HTTPError as exc:
            status, answer, said = type(exc).__name__, None, str(exc)
        result = (answer or {}).get("result") if status == "200" else None
        if status == "200" and (result is None or result.get("isError")):
            said = str(((result or {}).get("content") or [{}])[0].get("text", "")) if result else said
            status = said[:3] if said[:3].isdigit() else "tool-error"
        self.traffic.answered(what, sent, status, said)
        return status, (result or {}).get("structuredContent")


# -- the kills --------------------------------------------------------------------------------
def server_victims(mem: Any) -> list[tuple[str, int, Any]]:
    """The key ring's actor, and each Serve replica of the soak's app (by index: a replica Serve
    starts after a kill takes the place of the one killed)."""
    import ray

    replicas = sorted(
        n["name"]
        for n in ray.util.list_named_actors(all_namespaces=True)
        if n["namespace"] == "serve" and n["name"].startswith(f"SERVE_REPLICA::{SERVE_APP}#")
    )
    ring = mem.internals.deployment.keyring().ref.handle
    return [("keyring", 0, ring), *(("replica", i, name) for i, name in enumerate(replicas))]


def server_pid(victim: Any, timeout_s: float = 5.0) -> int:
    """The process id of the key ring's actor (its handle) or of a replica (its actor's name)."""
    import ray

    handle = ray.get_actor(victim, namespace="serve") if isinstance(victim, str) else victim
    return int(ray.get(handle.__ray_call__.remote(lambda _: os.getpid()), timeout=timeout_s))


def rest_probe(server: Server, record: Any, traffic: Traffic, n: int, at: float, timeout_s: float) -> dict[str, float]:
    """After kill ``n`` (at ``at``, monotonic): a durable add over REST, the same message each try,
    until answered 200 (``recover_s``), then a search over REST until it finds it
    (``searchable_s``)."""
    probe = server.tenants["probe"]
    user, mid, word = f"rest-probe-{n}", f"rest-probe-{n}", f"zk{n}rest"
    conv = f"/v1/apps/{probe.app}/users/{user}/conversations/p"
    body = {"messages": [{"id": mid, "role": "user", "content": f"probe after kill {n}: {word}"}], "ack": "durable"}
    out: dict[str, float] = {}
    with _client(server, probe, timeout_s=10.0) as http:
        while time.monotonic() - at < timeout_s:
            status, got = traffic.call(http, "rest probe add", "POST", conv + "/messages", body)
            if status == "200":
                record.ack(probe.app, user, "p", [mid], got["seqs"], True)
                out["recover_s"] = round(time.monotonic() - at, 3)
                break
            time.sleep(0.05)
        while "recover_s" in out and time.monotonic() - at < timeout_s:
            query = {"query": word, "limit": 1, "mode": "lexical"}
            status, got = traffic.call(http, "rest probe search", "POST", conv + "/search", query)
            if status == "200" and not got["degraded"] and [h["message"]["id"] for h in got["hits"]] == [mid]:
                out["searchable_s"] = round(time.monotonic() - at, 3)
                break
            time.sleep(0.05)
    return out


# -- the checks and figures -------------------------------------------------------------------
def mcp_check(mem: Any, acks: list[McpAck]) -> dict[str, int]:
    """On the memray reopened cold: each MCP ack's text is stored, once, at the seq it was given."""
    store = mem.internals.deployment.stores
    stored: dict[tuple[str, str, str], list[Any]] = {}
    for key in {(a.app, a.user_id, a.conversation_id) for a in acks}:
        conv = mem.conversation(user_id=key[1], conversation_id=key[2], app=key[0])
        stored[key] = list(mem.internals.run(store.get_messages(conv.key)))
    figures = Counter(mcp_acked=len(acks), mcp_stored=0, mcp_lost=0, mcp_seq_mismatch=0, mcp_duplicated=0)
    for a in acks:
        rows = [r for r in stored[(a.app, a.user_id, a.conversation_id)] if r.text == a.text]
        figures["mcp_stored"] += bool(rows)
        figures["mcp_lost"] += not rows
        figures["mcp_seq_mismatch"] += bool(rows) and rows[0].seq != a.seq
        figures["mcp_duplicated"] += len(rows) > 1
    return dict(figures)


def _p(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, max(0, int(-(-q * len(s) // 1)) - 1))], 3)


def traffic_figures(traffic: Traffic, kills: list[dict[str, Any]], chaos_from: float) -> dict[str, Any]:
    """Requests, answers by status (``errors_by_status``: those not 2xx, but for the refusals the
    tenancy probes expect), latency of the answers 2xx (quiet, under kills), tenancy, and per
    kill the time from it to the next authenticated REST request answered 2xx that was sent
    after it."""
    calls = list(traffic.calls)
    statuses = Counter(s for _, _, _, s in calls)
    errors = Counter(s for what, _, _, s in calls if not s.startswith("2") and what not in REFUSALS_EXPECTED)
    by_op: dict[str, Counter[str]] = {}
    for what, _, _, s in calls:
        by_op.setdefault(what, Counter())[s] += 1
    answered = [(sent, secs) for _, sent, secs, s in calls if s.startswith("2")]
    quiet = [secs for sent, secs in answered if sent < chaos_from]
    chaos = [secs for sent, secs in answered if sent >= chaos_from]
    rest_ok = [(sent, sent + secs) for what, sent, secs, s in calls if what.startswith("rest") and s.startswith("2")]
    after: list[float] = []
    for k in kills:
        done = min((at for sent, at in rest_ok if sent >= k["t"]), default=None)
        k["rest_ok_after_s"] = round(done - k["t"], 3) if done is not None else None
        if done is not None:
            after.append(done - k["t"])
    return {
        "requests": len(calls),
        "requests_rest": sum(1 for w, *_ in calls if w.startswith("rest")),
        "requests_mcp": sum(1 for w, *_ in calls if w.startswith("mcp")),
        "answered_by_status": dict(sorted(statuses.items())),
        "errors_by_status": dict(sorted(errors.items())),
        "by_op": {w: dict(c) for w, c in sorted(by_op.items())},
        "latency_s": {"p50": _p(quiet + chaos, 0.5), "p99": _p(quiet + chaos, 0.99)},
        "latency_quiet_s": {"p50": _p(quiet, 0.5), "p99": _p(quiet, 0.99), "n": len(quiet)},
        "latency_chaos_s": {"p50": _p(chaos, 0.5), "p99": _p(chaos, 0.99), "n": len(chaos)},
        "p99_rest_ok_after_kill_s": _p(after, 0.99),
        "max_rest_ok_after_kill_s": round(max(after), 3) if after else None,
        "mcp_acked": len(traffic.mcp_acks),
        "read_your_writes": dict(traffic.ryw),
        **{k: int(traffic.tenancy[k]) for k in ("cross_tenant_probes", "cross_tenant_reads", "read_only_writes")},
        "read_only_writes_accepted": int(traffic.tenancy["read_only_writes_accepted"]),
        "tenancy_answers": {k: v for k, v in sorted(traffic.tenancy.items()) if "answered" in k},
        "rest_erasure": traffic.events.get("rest_erasure", {"ok": False, "attempts": 0}),
        "error_samples": traffic.error_samples,
    }
