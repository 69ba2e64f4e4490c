"""One memray per mode for the whole service test package; each test uses its own app/user ids."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memray

MODES = ["inprocess", pytest.param("ray", marks=pytest.mark.ray)]


def small_config(path: str, mode: str, **overrides: object) -> memray.MemoryConfig:
    return memray.MemoryConfig(path=path, mode=mode, hosts=2, shards=2, debounce_ms=20, **overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="package", params=MODES)
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    m = memray.open(config=small_config(str(tmp_path_factory.mktemp(f"svc-{request.param}")), request.param))
    yield m
    m.close(terminate=True)


@pytest.fixture
def app() -> str:
    """A fresh app name: tests sharing one memray never see each other's data."""
    return f"app-{uuid.uuid4().hex[:12]}"
