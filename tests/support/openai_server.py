"""A real HTTP server that speaks enough of the OpenAI API for the real ``openai`` client.

Runs ``http.server`` in a thread on ``127.0.0.1`` (port 0: the OS picks a free one), so tests use
the real client over real HTTP — retries, timeouts, headers and JSON parsing included — with no
network and no API key.

Endpoints
---------
* ``POST /v1/embeddings``: ``input`` a string or a list of strings (an empty string is a 400, as
  on OpenAI); vectors are :class:`memray.embedding.hashing.HashEmbedder` vectors (deterministic,
  and similar texts get similar vectors) of size ``dimensions`` when sent, else ``dim``, times
  ``vector_scale``; ``encoding_format`` ``float`` or ``base64``; returns ``usage``.
* ``POST /v1/chat/completions``: the reply is ``reply(body)``: a string (the assistant content) or
  a dict (the whole assistant ``message``, e.g. with ``tool_calls``). ``stream: true`` is answered
  as server-sent events.
* ``GET /v1/models``.

Failure injection (each consumed by the next matching request, any path unless ``path`` given)::

    server.fail_next(2, status=429)        # two 429s, with Retry-After: 0 and retry-after-ms: 1
    server.fail_always(500); ...; server.clear_failures()
    server.hang_next(1, seconds=5)         # hold the next request 5 s (or until stop), then answer
    server.force_dim = 12                  # embeddings of a wrong size

Recording: ``server.requests`` (every request: method, path, body, headers with lowercase
names, status),
``server.embedding_batch_sizes``, ``server.count(path)``, ``server.last_body(path)``.

Use ``with FakeOpenAIServer() as server: OpenAI(base_url=server.url, api_key="x")``, or the
``openai_server`` fixture from ``tests/conftest.py``.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from memray.embedding.hashing import HashEmbedder
from memray.text import estimate_tokens

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply", "default_reply"]

Reply = Callable[[dict[str, Any]], "str | dict[str, Any]"]


def default_reply(body: dict[str, Any]) -> str:
    """``"fake reply to: <last message content>"`` (content cut at 200 characters)."""
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content") or ""
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return f"fake reply to: {str(content)[:200]}"


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    status: int = 0


@dataclass
class _Action:
    kind: str  # "fail" | "hang"
    status: int = 500
    retry_after_s: float | None = None
    seconds: float = 0.0
    path: str | None = None


@dataclass
class _State:
    script: deque[_Action] = field(default_factory=deque)
    sticky: _Action | None = None
    requests: list[RecordedRequest] = field(default_factory=list)


class FakeOpenAIServer:
    """OpenAI-compatible test server; see the module docstring. Thread-safe."""

    def __init__(
        self,
        dim: int = 64,
        reply: Reply = default_reply,
        vector_scale: float = 1.0,
        reject_dimensions: bool = False,
        max_batch: int = 2048,
        api_key: str | None = None,
    ) -> None:
        self.dim = dim
        self.reply = reply
        self.vector_scale = vector_scale
        self.reject_dimensions = reject_dimensions
        self.max_batch = max_batch
        self.api_key = api_key  # when set, other bearer tokens get 401
        self.force_dim: int | None = None
        self._state = _State()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._released = threading.Event()
        self._embedders: dict[int, HashEmbedder] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL for ``OpenAI(base_url=...)``: ``http://127.0.0.1:<port>/v1``."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- failure injection -----------------------------------------------------------------
    def fail_next(
        self, n: int = 1, status: int = 429, retry_after_s: float | None = 0.0, path: str | None = None
    ) -> None:
        """The next ``n`` requests (to ``path``, if given) get ``status``. 429/503 carry
        ``Retry-After`` (and ``retry-after-ms``, so the client retries at once when it is 0)."""
        with self._lock:
            for _ in range(n):
                self._state.script.append(_Action("fail", status, retry_after_s, path=path))

    def fail_always(self, status: int = 500, path: str | None = None) -> None:
        """Every request (to ``path``) gets ``status`` until :meth:`clear_failures`."""
        with self._lock:
            self._state.sticky = _Action("fail", status, None, path=path)

    def hang_next(self, n: int = 1, seconds: float = 5.0, path: str | None = None) -> None:
        """Hold the next ``n`` requests ``seconds`` (released early by :meth:`release` or
        :meth:`stop`), then answer them normally."""
        self._released.clear()
        with self._lock:
            for _ in range(n):
                self._state.script.append(_Action("hang", seconds=seconds, path=path))

    def release(self) -> None:
        """Let every held request go on now."""
        self._released.set()

    def clear_failures(self) -> None:
        with self._lock:
            self._state.script.clear()
            self._state.sticky = None

    # -- recording -------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._state.requests)

    def count(self, path: str | None = None) -> int:
        return sum(1 for r in self.requests if path is None or r.path == path)

    def last_body(self, path: str) -> Any:
        bodies = [r.body for r in self.requests if r.path == path]
        return bodies[-1] if bodies else None

    @property
    def embedding_batch_sizes(self) -> list[int]:
        """Number of inputs of each embeddings request received (failed ones included)."""
        out = []
        for r in self.requests:
            if r.path == "/v1/embeddings" and isinstance(r.body, dict):
                inp = r.body.get("input")
                out.append(len(inp) if isinstance(inp, list) else 1)
        return out

    def reset(self) -> None:
        """Forget recorded requests and scripted failures."""
        with self._lock:
            self._state = _State()

    # -- internals used by the handler -----------------------------------------------------
    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._state.requests.append(req)

    def _next_action(self, path: str) -> _Action | None:
        with self._lock:
            sticky = self._state.sticky
            if sticky is not None and sticky.path in (None, path):
                return sticky
            for action in self._state.script:
                if action.path in (None, path):
                    self._state.script.remove(action)
                    return action
        return None

    def _vectors(self, texts: list[str], dim: int) -> np.ndarray:
        with self._lock:
            embedder = self._embedders.setdefault(dim, HashEmbedder(max(dim, 8)))
        vecs = embedder.embed(texts)[:, :dim] * self.vector_scale
        return vecs.astype(np.float32)


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output clean
        pass

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def do_GET(self) -> None:
        rec = RecordedRequest("GET", self.path, None, self._headers())
        self.fake._record(rec)
        if self.path.rstrip("/") == "/v1/models":
            self._json(
                rec,
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": "fake-embed", "object": "model", "owned_by": "memray-tests"},
                        {"id": "fake-chat", "object": "model", "owned_by": "memray-tests"},
                    ],
                },
            )
        else:
            self._error(rec, 404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = raw.decode("utf-8", "replace")
        rec = RecordedRequest("POST", self.path, body, self._headers())
        self.fake._record(rec)
        if self._injected(rec):
            return
        if self.fake.api_key is not None and (self.headers.get("Authorization") != f"Bearer {self.fake.api_key}"):
            self._error(rec, 401, "Incorrect API key provided", "invalid_api_key")
        elif not isinstance(body, dict):
            self._error(rec, 400, "body is not JSON")
        elif self.path == "/v1/embeddings":
            self._embeddings(rec, body)
        elif self.path == "/v1/chat/completions":
            self._chat(rec, body)
        else:
            self._error(rec, 404, f"no route {self.path}")

    def _injected(self, rec: RecordedRequest) -> bool:
        action = self.fake._next_action(self.path)
        if action is None:
            return False
        if action.kind == "hang":
            deadline = time.monotonic() + action.seconds
            while time.monotonic() < deadline and not self.fake._stopping.is_set() and not self.fake._released.is_set():
                self.fake._released.wait(0.05)
            return False
        headers = {}
        if action.retry_after_s is not None:
            headers["Retry-After"] = str(int(action.retry_after_s))
            headers["retry-after-ms"] = str(max(1, int(action.retry_after_s * 1000)))
        self._error(rec, action.status, f"injected failure {action.status}", headers=headers)
        return True

    def _embeddings(self, rec: RecordedRequest, body: dict[str, Any]) -> None:
        inp = body.get("input")
        texts = [inp] if isinstance(inp, str) else inp
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return self._error(rec, 400, "'input' must be a string or a non-empty list of strings")
        if any(t == "" for t in texts):
            return self._error(rec, 400, "'$.input' is invalid: empty string")
        if len(texts) > self.fake.max_batch:
            return self._error(rec, 400, f"at most {self.fake.max_batch} inputs per request")
        dims = body.get("dimensions")
        if dims is not None and self.fake.reject_dimensions:
            return self._error(rec, 400, "this model does not support 'dimensions'")
        dim = self.fake.force_dim or (int(dims) if dims is not None else self.fake.dim)
        vecs = self.fake._vectors(texts, dim)
        as_b64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if as_b64 else [float(x) for x in v],
            }
            for i, v in enumerate(vecs)
        ]
        data.reverse()  # the API does not promise order; clients must sort by index
        tokens = sum(estimate_tokens(t) for t in texts)
        self._json(
            rec,
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _chat(self, rec: RecordedRequest, body: dict[str, Any]) -> None:
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._error(rec, 400, "'messages' must be a non-empty list")
        answer = self.fake.reply(body)
        message = (
            {"role": "assistant", "content": answer} if isinstance(answer, str) else {"role": "assistant", **answer}
        )
        prompt = sum(estimate_tokens(json.dumps(m)) for m in body["messages"])
        done = estimate_tokens(str(message.get("content") or ""))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        ident, created, model = "chatcmpl-fake", int(time.time()), body.get("model", "")
        if body.get("stream"):
            return self._stream(rec, ident, created, model, message, finish)
        self._json(
            rec,
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done},
            },
        )

    def _stream(
        self, rec: RecordedRequest, ident: str, created: int, model: str, message: dict[str, Any], finish: str
    ) -> None:
        def chunk(delta: dict[str, Any], reason: str | None) -> bytes:
            payload = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
            }
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        content = str(message.get("content") or "")
        pieces = [chunk({"role": "assistant", "content": ""}, None)]
        for i in range(0, len(content), 16):
            pieces.append(chunk({"content": content[i : i + 16]}, None))
        if message.get("tool_calls"):
            calls = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
            pieces.append(chunk({"tool_calls": calls}, None))
        pieces += [chunk({}, finish), b"data: [DONE]\n\n"]
        payload = b"".join(pieces)
        rec.status = 200
        self._send(200, payload, "text/event-stream", {})

    def _json(self, rec: RecordedRequest, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        rec.status = status
        self._send(status, json.dumps(obj).encode(), "application/json", headers or {})

    def _error(
        self,
        rec: RecordedRequest,
        status: int,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self._json(
            rec, status, {"error": {"message": message, "type": "fake_error", "param": None, "code": code}}, headers
        )

    def _send(self, status: int, payload: bytes, ctype: str, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass
