"""The key ring in-process: keys made, listed, revoked; followers see each change; a revoke
waits for its followers; a restarted ring's versions are past the old ones."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import memray
from memray.errors import NotFoundError, ValidationError
from memray.service.keys import KeyRing, digest_of


def test_keys_are_made_listed_and_revoked(tmp_path: Path) -> None:
    with memray.open(str(tmp_path / "d"), mode="inprocess") as mem:
        key, record = mem.keys.create("acme", "ada", read_only=True, label="ci")
        assert key.startswith(f"mry_{record.key_id}_") and record.digest == digest_of(key)
        assert (record.app, record.user_id, record.read_only, record.revoked_at) == ("acme", "ada", True, None)
        assert [r.key_id for r in mem.keys.list("acme")] == [record.key_id] and mem.keys.list("other") == []
        revoked = mem.keys.revoke(record.key_id)
        assert revoked.record.revoked_at is not None and revoked.unconfirmed == []  # no follower to wait for
        with pytest.raises(NotFoundError):
            mem.keys.revoke("nope")
        with pytest.raises(ValidationError):
            mem.keys.create("bad\x00app")
    with memray.open(str(tmp_path / "d"), mode="inprocess") as mem:  # stored, revoked state included
        assert [r.revoked_at is not None for r in mem.keys.list()] == [True]


def test_a_follower_sees_each_change_and_a_revoke_waits_for_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with memray.open(str(tmp_path / "d"), mode="inprocess") as mem:
            ring = mem.internals.deployment.keyring()
            first = await ring.changes(0, "f1", timeout_s=0.01)
            assert first is not None and first.live == []
            key, record = await ring.create("acme")
            got = await ring.changes(first.version, "f1", timeout_s=5)
            assert got is not None and [r.key_id for r in got.live] == [record.key_id]
            assert await ring.changes(got.version, "f1", timeout_s=0.01) is None  # nothing new: times out

            async def follow() -> None:  # a follower that applies the revoke, then polls again
                change = await ring.changes(got.version, "f1", timeout_s=5)
                assert change is not None and change.live == []
                await ring.changes(change.version, "f1", timeout_s=0.5)

            follower = asyncio.ensure_future(follow())
            await asyncio.sleep(0)
            revoked = await ring.revoke(record.key_id)  # returns once f1 polled past the revoke
            await follower
            assert revoked.unconfirmed == []

    asyncio.run(scenario())


def test_a_restarted_ring_gives_versions_past_the_old_ones(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with memray.open(str(tmp_path / "d"), mode="inprocess") as mem:
            store = mem.internals.deployment.stores.clients[0]
            old = KeyRing(store)
            await old.create("acme")
            seen = await old.changes(0, "f", timeout_s=0.01)
            new = KeyRing(store)  # what Ray restarting the ring's actor makes
            again = await new.changes(seen.version if seen else 0, "f", timeout_s=0.01)
            assert again is not None and len(again.live) == 1

    asyncio.run(scenario())


def test_a_revoke_names_the_followers_that_did_not_confirm(tmp_path: Path) -> None:
    async def scenario() -> list[str]:
        async with memray.open(str(tmp_path / "d"), mode="inprocess") as mem:
            ring = KeyRing(mem.internals.deployment.stores.clients[0], settle_s=0.2)
            _, record = await ring.create("acme")
            seen = await ring.changes(0, "replica-gone", timeout_s=0.01)  # polls once, then never again
            assert seen is not None
            return (await ring.revoke(record.key_id)).unconfirmed

    assert asyncio.run(scenario()) == ["replica-gone"]
