"""One memray per mode for the whole service test package; each test uses its own app/user ids.

``inprocess-stores3`` is the in-process mode with three history partitions (``stores=3``): the
whole package runs against it too, so erasure, proofs, exports and app-wide search must give the
answers they give with one partition (in-process only, to keep the run short)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import memray

MODES = ["inprocess", "inprocess-stores3", pytest.param("ray", marks=pytest.mark.ray)]


def mode_and_stores(param: str) -> tuple[str, int]:
    """``"inprocess-stores3"`` -> ``("inprocess", 3)``; a plain mode has one partition."""
    mode, _, stores = param.partition("-stores")
    return mode, int(stores or 1)


def small_config(path: str, mode: str, **overrides: object) -> memray.MemoryConfig:
    mode, stores = mode_and_stores(mode)
    return memray.MemoryConfig(
        path=path,
        mode=mode,  # type: ignore[arg-type]
        hosts=2,
        shards=2,
        stores=stores,
        debounce_ms=20,
        **overrides,  # type: ignore[arg-type]
    )


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
