"""One in-process memray for the facade tests; each test uses its own app."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import memray


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    path: Path = tmp_path_factory.mktemp("facade")
    m = memray.open(str(path), mode="inprocess", hosts=2, shards=2, debounce_ms=20)
    yield m
    m.close()


@pytest.fixture
def app() -> str:
    return f"app-{uuid.uuid4().hex[:12]}"
