"""A replica's copy of the keys fails closed: once the key ring has not answered for ``stale_s``
(here the memray holding it is closed), the copy accepts no key — a revoke it cannot hear of
must not leave a key working."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import memray
from memray.server.auth import KeyCache


def test_a_copy_that_stops_hearing_from_the_ring_accepts_no_key(tmp_path: Path) -> None:
    mem = memray.open(config=memray.MemoryConfig(path=str(tmp_path / "d"), mode="inprocess", hosts=1, shards=1))
    key, _ = mem.keys.create("acme", label="laptop")

    async def run() -> tuple[bool, bool, bool]:
        cache = KeyCache(mem.keys, poll_s=0.05, stale_s=0.5)
        await cache.start()
        try:
            known = cache.principal(key) is not None and cache.fresh
            await asyncio.to_thread(mem.close)  # the ring is gone: every poll now fails
            deadline = time.monotonic() + 10.0
            while cache.fresh:  # wait on the copy's own state, bounded
                assert time.monotonic() < deadline, "the copy never went stale"
                await asyncio.sleep(0.05)
            return known, cache.fresh, cache.principal(key) is None
        finally:
            await cache.stop()

    known, fresh, refused = asyncio.run(run())
    assert known and not fresh and refused
