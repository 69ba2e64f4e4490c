"""The fake server itself: the behaviours other test suites rely on."""

from __future__ import annotations

from typing import Any

import numpy as np
import openai
import pytest
from openai import OpenAI

from tests.support.openai_server import FakeOpenAIServer


def _client(server: FakeOpenAIServer, **kw: Any) -> OpenAI:
    return OpenAI(base_url=server.url, api_key="k", **kw)


def test_chat_reply_function_sees_the_prompt(openai_server: FakeOpenAIServer) -> None:
    seen: list[dict[str, Any]] = []

    def reply(body: dict[str, Any]) -> str:
        seen.append(body)
        return "SUMMARY: " + str(body["messages"][-1]["content"]).upper()

    openai_server.reply = reply
    result = _client(openai_server).chat.completions.create(
        model="fake-chat", messages=[{"role": "system", "content": "summarise"}, {"role": "user", "content": "abc"}]
    )
    assert result.choices[0].message.content == "SUMMARY: ABC"
    assert seen[0]["messages"][0]["content"] == "summarise"
    assert result.usage is not None and result.usage.total_tokens > 0


def test_chat_default_reply_and_stream(openai_server: FakeOpenAIServer) -> None:
    client = _client(openai_server)
    msgs: Any = [{"role": "user", "content": "a fairly long question to stream back"}]
    plain = client.chat.completions.create(model="c", messages=msgs).choices[0].message.content
    assert plain == "fake reply to: a fairly long question to stream back"
    stream = client.chat.completions.create(model="c", messages=msgs, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == plain


def test_chat_tool_call_reply(openai_server: FakeOpenAIServer) -> None:
    openai_server.reply = lambda body: {
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "load_memory", "arguments": '{"query": "x"}'}}
        ],
    }
    result = _client(openai_server).chat.completions.create(model="c", messages=[{"role": "user", "content": "hi"}])
    call = result.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "load_memory"  # type: ignore[union-attr]
    assert result.choices[0].finish_reason == "tool_calls"


def test_base64_default_encoding_matches_float(openai_server: FakeOpenAIServer) -> None:
    client = _client(openai_server)
    b64 = client.embeddings.create(model="m", input=["hello"]).data[0].embedding
    flt = client.embeddings.create(model="m", input=["hello"], encoding_format="float")
    np.testing.assert_allclose(b64, flt.data[0].embedding, rtol=1e-6)
    assert openai_server.requests[0].body["encoding_format"] == "base64"


def test_api_key_enforced_when_set(openai_server: FakeOpenAIServer) -> None:
    openai_server.api_key = "right"
    with pytest.raises(openai.AuthenticationError):
        _client(openai_server, max_retries=0).embeddings.create(model="m", input=["x"])


def test_failures_scoped_to_a_path(openai_server: FakeOpenAIServer) -> None:
    openai_server.fail_next(1, status=503, path="/v1/chat/completions")
    client = _client(openai_server, max_retries=0)
    client.embeddings.create(model="m", input=["x"])
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="c", messages=[{"role": "user", "content": "x"}])
    assert [r.status for r in openai_server.requests] == [200, 503]
    openai_server.reset()
    assert openai_server.requests == []


def test_empty_input_rejected_like_openai(openai_server: FakeOpenAIServer) -> None:
    with pytest.raises(openai.BadRequestError):
        _client(openai_server, max_retries=0).embeddings.create(model="m", input=["ok", ""])
