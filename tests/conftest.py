"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_server import FakeOpenAIServer


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A fresh fake OpenAI-compatible server (64-dim embeddings, echo chat replies) per test.

    Point the client or an embedder at ``openai_server.url``; script failures with
    ``fail_next`` / ``fail_always`` / ``hang_next``; inspect ``requests``. Set ``reply`` to a
    function of the request body to control chat answers.
    """
    with FakeOpenAIServer() as server:
        yield server
