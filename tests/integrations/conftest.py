"""One in-process memray per integration test module; each test uses its own app or user ids."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memray


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    m = memray.open(str(tmp_path_factory.mktemp("integration")), mode="inprocess", hosts=1, shards=1, debounce_ms=10)
    yield m
    m.close()


@pytest.fixture
def app() -> str:
    """A fresh app name: tests sharing one memray never see each other's data."""
    return f"app-{uuid.uuid4().hex[:12]}"
