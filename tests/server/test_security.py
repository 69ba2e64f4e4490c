"""Every route in the OpenAPI schema (not a hand-written list) and every MCP tool, attacked with
missing, revoked, foreign, read-only and user-bound keys, oversized and malformed bodies, lone
surrogates and SQL-ish ids: refused with the right status, and nothing of the tenant read or written.

Request bodies are generated from the schema itself (the smallest valid instance of each body
model), so a route added later is covered without touching this file.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memray.server.operations import OPERATIONS
from memray.server.routes import NOOP_PATH
from tests.support.serve import APP, OTHER, Served

SQLISH = ["' OR '1'='1", 'x"; DROP TABLE messages; --', "%' OR user_id LIKE '%"]


def example(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    """The smallest valid instance of a JSON schema (required fields only)."""
    if "$ref" in schema:
        return example(components[schema["$ref"].rsplit("/", 1)[1]], components)
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            options = [s for s in schema[combinator] if s.get("type") != "null"]
            return example(options[0], components)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: example(props[name], components) for name in schema.get("required", [])}
    if kind == "array":
        return [example(schema.get("items", {"type": "string"}), components)] * max(1, schema.get("minItems", 1))
    if kind == "integer":
        return 1
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return False
    return "x" if "default" not in schema else schema["default"]


class Route:
    def __init__(self, path: str, method: str, op: dict[str, Any], components: dict[str, Any]) -> None:
        self.path, self.method, self.op = path, method.upper(), op
        self.write = bool(op.get("x-memray-write"))
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        self.body = example(body, components) if body is not None else None
        if self.body is not None and "user_id" in json.dumps(self.body):  # batch items: act on ada
            self.body = json.loads(json.dumps(self.body).replace('"user_id": "x"', '"user_id": "ada"'))
        self.query = {
            p["name"]: example(p["schema"], components)
            for p in op.get("parameters", [])
            if p["in"] == "query" and p.get("required")
        }

    def __repr__(self) -> str:
        return f"{self.method} {self.path}"

    def url(self, app: str = APP, user: str = "ada", ident: str = "sec") -> str:
        a, u, i = (quote(x, safe="") for x in (app, user, ident))
        return self.path.format(app=a, user_id=u, conversation_id=i, project_id=i, session_id=i)

    def send(self, http: httpx.Client, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        kw.setdefault("json", self.body)
        if kw["json"] is None and self.method in ("POST", "PUT", "PATCH") and "content" not in kw:
            kw["json"] = {}  # a JSON content type is required even without a body (no form can post)
        if kw["json"] is None:
            del kw["json"]
        return http.request(self.method, kw.pop("url", self.url()), params=self.query, headers=headers, **kw)


@pytest.fixture(scope="module")
def routes(served: Served) -> list[Route]:
    schema = httpx.get(served.url + "/openapi.json").json()
    components = schema["components"]["schemas"]
    found = [
        Route(path, method, op, components)
        for path, ops in schema["paths"].items()
        if path.startswith("/v1/")
        for method, op in ops.items()
    ]
    # every route is an operation of the table (or the no-op floor), and says it writes iff it does
    declared = {(op.method, op.route): op.write for op in OPERATIONS} | {("POST", NOOP_PATH): False}
    assert {(r.method, r.path): r.write for r in found} == declared
    return found


#: The paths outside ``/v1`` and the test that covers each: a new one fails
#: ``test_every_route_is_covered`` until it is listed here with its test.
COVERED_ELSEWHERE = {
    "/healthz": "test_health_answers_without_a_key_and_metrics_needs_one",
    "/readyz": "test_health_answers_without_a_key_and_metrics_needs_one",
    "/metrics": "test_health_answers_without_a_key_and_metrics_needs_one",
    "/mcp": "tests/server/test_mcp.py::test_every_tool_refuses_who_may_not (generated from the tool list)",
}


def test_every_route_is_covered(served: Served, routes: list[Route]) -> None:
    """Every path the server answers is probed: those under ``/v1`` by the tests below, generated
    from the OpenAPI schema (each an operation of the table); the others by the test named in
    :data:`COVERED_ELSEWHERE`. The app's own route list counts, not only the schema (``/mcp`` is
    not in it)."""
    from memray.server.api import build_app
    from memray.server.edge import PUBLIC_PATHS
    from memray.server.settings import ServerSettings

    app: Any = build_app(served.mem, None, ServerSettings(config=served.mem.config, floor_route=True))
    while not hasattr(app, "routes"):  # through the layers in front of the FastAPI app
        app = app.app
    paths = {getattr(r, "path", None) for r in app.routes}
    probed = {r.path for r in routes}
    uncovered = {p for p in paths if p and p not in probed and p not in COVERED_ELSEWHERE and p not in PUBLIC_PATHS}
    assert not uncovered, f"routes no security test covers: {sorted(uncovered)}"


def tenant_state(served: Served) -> dict[str, Any]:
    """Everything of app acme the attacks could touch, read through the library."""
    mem, out = served.mem, {}
    for user in ("ada", "bob"):
        convs = mem.list_conversations(user, APP)
        out[user] = {
            c.conversation_id: [m.model_dump() for m in mem.conversation(user, c.conversation_id, APP).messages()]
            for c in convs
        }
        out[user + ":entries"] = [r.entry.id for r in mem.memory_service.list_entries(APP, user, None)]
        out[user + ":wm"] = mem.conversation(user, "sec", APP).working_memory.get().model_dump()
    return out


@pytest.fixture(scope="module")
def seeded(served: Served) -> Served:
    for user in ("ada", "bob"):
        conv = served.mem.conversation(user, "sec", APP)
        conv.add({"role": "user", "content": f"{user}'s secret: the vault code is 4711"}, durable=True)
        conv.working_memory.update(f"{user} notes")
        served.mem.memory_service.add_entry(APP, user, {"content": f"{user} private fact"})
    return served


def refused(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, (response.request.method, response.request.url, response.text)
    body = response.json()
    assert body["status"] == status and "4711" not in response.text and "private fact" not in response.text


def test_every_route_refuses_who_may_not(seeded: Served, routes: list[Route]) -> None:
    before = tenant_state(seeded)
    k = seeded.keys
    with httpx.Client(base_url=seeded.url, timeout=60.0) as http:
        for route in routes:
            refused(route.send(http), 401)
            refused(route.send(http, {"Authorization": "Bearer mry_nope_nope"}), 401)
            refused(route.send(http, {"Authorization": f"Bearer {k['revoked']}"}), 401)
            refused(route.send(http, {"X-API-Key": k["other"]}), 403)  # another app's key
            if route.write:
                refused(route.send(http, {"X-API-Key": k["reader"]}), 403)
            if "{user_id}" in route.path or (route.body and "ada" in json.dumps(route.body)):
                bob = route.url(user="bob")
                body = json.loads(json.dumps(route.body).replace('"ada"', '"bob"')) if route.body is not None else None
                refused(route.send(http, {"X-API-Key": k["ada"]}, url=bob, json=body), 403)  # ada's key, bob's data
    assert tenant_state(seeded) == before


def test_foreign_app_paths_are_refused_even_with_a_valid_body(seeded: Served, routes: list[Route]) -> None:
    """acme's key on globex's paths: 403, and globex stays empty."""
    with seeded.client("admin") as http:
        for route in routes:
            refused(route.send(http, url=route.url(app=OTHER)), 403)
    assert seeded.mem.list_conversations("ada", OTHER).total == 0


def test_bodies_too_large_malformed_or_with_lone_surrogates(seeded: Served, routes: list[Route]) -> None:
    before = tenant_state(seeded)
    with_body = [r for r in routes if r.body is not None]
    assert with_body
    with seeded.client("admin") as http:
        for route in with_body:
            big = b'{"pad": "' + b"x" * (300 * 1024) + b'"}'
            refused(route.send(http, content=big, json=None, headers={"content-type": "application/json"}), 413)
            bad = route.send(http, content=b"{not json", json=None, headers={"content-type": "application/json"})
            refused(bad, 422)
            text = json.dumps(route.body)
            if '"x"' in text:  # a string field: a lone surrogate in it (JSON allows the escape)
                poisoned = text.replace('"x"', '"\\ud800"', 1).encode()
                r = route.send(http, content=poisoned, json=None, headers={"content-type": "application/json"})
                refused(r, 422)
    assert tenant_state(seeded) == before


def test_sqlish_ids_reach_nothing_but_their_own_scope(seeded: Served, routes: list[Route]) -> None:
    """Ids are any printable text (memray's id rules), so SQL-ish ones are valid ids: they are
    bound parameters everywhere, never SQL. Writes under them stay under them; reads under them
    find nothing of anyone else."""
    before = tenant_state(seeded)
    with seeded.client("admin") as http:
        for ident in SQLISH:
            for route in routes:
                if route.write:
                    continue
                r = route.send(http, url=route.url(user=ident, ident=ident))
                assert r.status_code in (200, 404, 422), (route, r.text)
                assert "4711" not in r.text and "private fact" not in r.text
            conv = f"/v1/apps/{APP}/users/{quote(ident, safe='')}/conversations/c/messages"
            assert http.post(conv, json={"messages": [{"role": "user", "content": "injected"}]}).status_code == 200
            assert seeded.mem.conversation(ident, "c", APP).messages()[-1].text == "injected"
    assert tenant_state(seeded) == before


def test_health_answers_without_a_key_and_metrics_needs_one(served: Served) -> None:
    with httpx.Client(base_url=served.url) as http:
        assert http.get("/healthz").status_code == 200 and http.get("/readyz").status_code == 200
        refused(http.get("/metrics"), 401)
        refused(http.post("/mcp", json={}), 401)


def test_a_revoked_key_stops_working_at_once(served: Served) -> None:
    key, record = served.mem.keys.create(APP, None, False, label="short-lived")
    url = f"/v1/apps/{APP}/users/ada/conversations/sec/messages"
    with httpx.Client(base_url=served.url, headers={"X-API-Key": key}, timeout=60.0) as http:
        for _ in range(100):  # the replica follows the ring: wait on state, bounded
            if http.get(url).status_code == 200:
                break
        assert http.get(url).status_code == 200
        served.mem.keys.revoke(record.key_id)
        refused(http.get(url), 401)


def test_erasing_a_user_revokes_the_keys_bound_to_them(served: Served) -> None:
    """After the erasure the bound key neither reads nor writes (it could
    re-create the erased user's data), and the receipt counts it."""
    key, _ = served.mem.keys.create(APP, "bound", label="bound-laptop")
    conv = f"/v1/apps/{APP}/users/bound/conversations/c/messages"
    add = {"messages": [{"role": "user", "content": "bound's note"}], "ack": "durable"}
    with httpx.Client(base_url=served.url, headers={"X-API-Key": key}, timeout=60.0) as bound:
        for _ in range(100):  # the replica follows the ring: wait on state, bounded
            if bound.get(conv).status_code == 200:
                break
        assert bound.post(conv, json=add).status_code == 200
        with served.client("admin") as admin:
            receipt = admin.delete(f"/v1/apps/{APP}/users/bound").json()
        assert receipt["counts"]["api_keys"] == 1 and receipt["counts"]["messages"] == 1
        refused(bound.get(conv), 401)
        refused(bound.post(conv, json=add), 401)
    proof = served.mem.verify_deleted(app=APP, user_id="bound")
    assert proof.clean and proof.remaining["api_keys"] == 0
    assert all(r.user_id != "bound" for r in served.mem.keys.list(APP))
