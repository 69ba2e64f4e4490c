"""One real ``memray serve`` application for the tests: Ray Serve on the test session's Ray, over a
memray opened in Ray mode, with keys made through the facade; httpx talks to it over loopback.
``served`` is one fixture for the whole session (registered in ``tests/conftest.py``): Serve's
HTTP proxy is one per Ray, so the server tests and the load benchmark's smoke test share it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

import memray
from benchmarks._harness import free_port
from memray.facade.memory import Memory

APP, OTHER = "acme", "globex"


@dataclass
class Served:
    url: str
    mem: Memory
    keys: dict[str, str] = field(default_factory=dict)  # name -> key
    key_ids: dict[str, str] = field(default_factory=dict)

    def client(self, key: str | None = None, **kwargs: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[key]}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60.0, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def served(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from ray import serve

    from memray.server.deployment import APP_NAME, deploy
    from memray.server.settings import ServerSettings

    path = Path(tmp_path_factory.mktemp("served")) / "data"
    config = memray.MemoryConfig(path=str(path), mode="ray", hosts=1, shards=1)
    mem = memray.open(config=config)
    server = Served("", mem)
    for name, app, user, read_only in [
        ("admin", APP, None, False),  # every user of acme
        ("reader", APP, None, True),
        ("ada", APP, "ada", False),  # only ada of acme
        ("other", OTHER, None, False),
        ("revoked", APP, None, False),
    ]:
        key, record = mem.keys.create(app, user, read_only, label=name)
        server.keys[name], server.key_ids[name] = key, record.key_id
    mem.keys.revoke(server.key_ids["revoked"])
    server.url = deploy(
        ServerSettings(config=config, max_body_bytes=256 * 1024, floor_route=True), "127.0.0.1", free_port()
    )
    try:
        yield server
    finally:
        try:
            serve.delete(APP_NAME)
            serve.shutdown()
        finally:
            mem.close(terminate=True)
