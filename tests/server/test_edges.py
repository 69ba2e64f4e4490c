"""Protocol edges of the real server: every refusal is a problem detail, sent before the
body is read or anything is parsed; and the front door's deadline on a loopback uvicorn server
with a deadline short enough to test."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from memray.server.edge import guarded
from tests.support.serve import APP, Served, free_port

CONV = f"/v1/apps/{APP}/users/ada/conversations/edge"


def problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = response.json()
    assert body["status"] == status and body["detail"]
    return body


def test_mcp_answers_post_only(served: Served) -> None:
    with served.client("reader") as http:
        for method in ("GET", "DELETE", "PUT"):
            r = http.request(
                method, "/mcp", headers={"Accept": "text/event-stream"}, json={} if method == "PUT" else None
            )
            problem(r, 405)
            assert r.headers["allow"] == "POST"


def test_unknown_paths_and_methods_are_problem_details(served: Served) -> None:
    with served.client("admin") as http:
        problem(http.get("/v1/nowhere"), 404)
        problem(http.patch(CONV + "/messages", json={}), 405)


def test_a_foreign_host_is_refused_on_mcp(served: Served) -> None:
    with served.client("admin") as http:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        r = http.post("/mcp", json=ping, headers={"Host": "evil.example", "Accept": "application/json"})
        assert problem(r, 421)["error"] == "HostNotAllowed"


def test_two_different_keys_are_refused_and_one_key_twice_is_not(served: Served) -> None:
    k = served.keys
    with httpx.Client(base_url=served.url, timeout=60.0) as http:
        both = {"Authorization": f"Bearer {k['admin']}", "X-API-Key": k["ada"]}
        problem(http.get(CONV + "/messages", headers=both), 400)
        same = {"Authorization": f"Bearer {k['admin']}", "X-API-Key": k["admin"]}
        assert http.get(CONV + "/messages", headers=same).status_code == 200


def test_the_key_is_checked_before_the_body_is_read(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=60.0) as http:
        r = http.post(CONV + "/search", content=b"{not json", headers={"content-type": "application/json"})
        assert problem(r, 401)["error"] == "AuthError"


def test_no_route_is_form_postable(served: Served) -> None:
    schema = httpx.get(served.url + "/openapi.json").json()
    posts = [p for p, ops in schema["paths"].items() if p.startswith("/v1/") for m in ops if m in ("post", "put")]
    assert len(posts) >= 10
    with served.client("admin") as http:
        for path in posts:
            url = path.format(app=APP, user_id="ada", conversation_id="edge", project_id="p", session_id="s")
            for kind in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"):
                r = http.post(url, content=b"a=b", headers={"content-type": kind})
                assert problem(r, 415)["error"] == "UnsupportedMediaType", url
            problem(http.post(url), 415)  # no content type at all (a body-less cross-site fetch)
    assert served.mem.conversation("ada", "edge", APP).messages() == []


def chunks(total: int) -> Iterator[bytes]:
    yield b'{"query": "'
    for _ in range(total // 65536):
        yield b"x" * 65536
    yield b'"}'


def test_a_chunked_body_over_the_cap_is_413_on_rest_and_mcp(served: Served) -> None:
    with served.client("admin") as http:
        for path in (CONV + "/search", "/mcp"):
            headers = {"content-type": "application/json", "Accept": "application/json, text/event-stream"}
            r = http.post(path, content=chunks(1024 * 1024), headers=headers)  # no Content-Length: chunked
            assert problem(r, 413)["error"] == "BodyTooLarge", path


# -- the deadline, on a loopback server whose deadline is 0.3 s ------------------------------------


async def slow_app(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers after the request's ``?wait=`` seconds (a stand-in for a stuck call)."""
    wait = float(scope["query_string"].decode().partition("=")[2] or 0)
    await asyncio.sleep(wait)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(scope="module")
def deadline_server() -> Iterator[str]:
    port = free_port()
    app = guarded(slow_app, None, allowed_hosts=("127.0.0.1",), max_per_key=4, timeout_s=0.3, max_body_bytes=1024)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not server.started:  # wait on the server's own flag
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.01)
    yield url
    server.should_exit = True
    thread.join(10)


def test_a_request_past_its_deadline_is_504(deadline_server: str) -> None:
    with httpx.Client(base_url=deadline_server, timeout=10.0) as http:
        assert http.get("/x", params={"wait": 0}).text == "ok"
        t0 = time.monotonic()
        r = http.get("/x", params={"wait": 5})
        assert problem(r, 504)["error"] == "DeadlineExceeded" and time.monotonic() - t0 < 4


def test_a_body_that_never_finishes_is_cut_at_the_deadline(deadline_server: str) -> None:
    async def run() -> httpx.Response:
        stop = asyncio.Event()

        async def stalled() -> AsyncIterator[bytes]:
            yield b"{"
            await stop.wait()
            yield b"}"

        async with httpx.AsyncClient(base_url=deadline_server, timeout=10.0) as http:
            task = asyncio.create_task(http.post("/x", content=stalled(), headers={"content-type": "application/json"}))
            # the client reads the answer only once its body is sent: release it after the
            # server's deadline has passed, and check the answer was the deadline's
            await asyncio.sleep(1.0)  # past the 0.3 s deadline: this is the thing under test
            stop.set()
            return await task

    problem(asyncio.run(run()), 504)


def test_a_host_not_allowed_is_refused_without_auth(deadline_server: str) -> None:
    with httpx.Client(base_url=deadline_server, timeout=10.0) as http:
        assert problem(http.get("/x", headers={"Host": "evil.example"}), 421)["error"] == "HostNotAllowed"
        assert http.get("/x").status_code == 200
