"""One memray per mode for the whole facade test package; each test uses its own conversations.
Summaries are folded after a few short turns (``trigger_tokens=60``) and leave the newest two
messages out (``keep_messages=2``), so the tests meet summarised conversations too."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memray
from tests.support.memories import MODES, memory_in_mode


@pytest.fixture(scope="package", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    summarizer = memray.SummarizerConfig(trigger_tokens=60, keep_messages=2)
    with memory_in_mode(request, tmp_path_factory, summarizer=summarizer) as m:
        yield m


@pytest.fixture
def app() -> str:
    """A fresh app name: tests sharing one memray never see each other's data."""
    return f"app-{uuid.uuid4().hex[:12]}"
