"""A shard actor that dies is restarted by Ray, catches up with the store, and misses nothing.

Ray restarts a killed shard within milliseconds and a small shard catches up as fast, so whether
a search lands in the outage is a race. The test therefore waits on state, never on time: it
asserts what holds whichever way the race goes (a search is either flagged degraded naming the
shard, or complete), waits until Ray reports the shard restarted, and checks the degraded path
itself on a shard that stays down.
"""

from __future__ import annotations

import time

import pytest

import memray
from memray.ids import ConversationKey, conversation_namespace, user_hash
from memray.index.keeper import LEVEL_AFTER_S

pytestmark = pytest.mark.ray

SHARDS = 2
APP = "rec"


def users_on(shard: int, n: int) -> list[str]:
    return [u for u in (f"user-{i}" for i in range(200)) if user_hash(APP, u) % SHARDS == shard][:n]


def turns(user: str, start: int, n: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"{user} note {i}: the parcel code is zebra{i}"} for i in range(start, start + n)
    ]


def restarted(handle) -> bool:
    """Ray's own word: the actor behind ``handle`` is a restarted incarnation (False while the
    old one still answers or the new one is not up yet)."""
    import ray

    try:
        return bool(
            ray.get(handle.__ray_call__.remote(lambda _self: ray.get_runtime_context().was_current_actor_reconstructed))
        )
    except ray.exceptions.RayActorError:  # dying or restarting right now
        return False


def dead(handle) -> bool:
    import ray

    try:
        ray.get(handle.__ray_call__.remote(lambda _self: None))
        return False
    except ray.exceptions.RayActorError as exc:
        return not isinstance(exc, ray.exceptions.ActorUnavailableError)  # unavailable: restarting, not dead


def degraded_or_complete(result, shard: int, expect: str) -> bool:
    if result.degraded:
        return f"shard {shard}" in (result.reason or "")
    return any(h.message.text.endswith(expect) for h in result)


def poll(check, timeout_s: float = 60.0, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(every_s)


def test_killed_shard_degrades_then_recovers_everything(ray_session, tmp_path) -> None:
    import ray

    config = memray.MemoryConfig(path=str(tmp_path / "m"), mode="ray", hosts=1, shards=SHARDS, debounce_ms=20)
    mem = memray.open(config=config)
    try:
        victims, others = users_on(1, 3), users_on(0, 2)
        convs = {u: mem.conversation(user_id=u, conversation_id="c", app=APP) for u in victims + others}
        for u, conv in convs.items():
            conv.add(turns(u, 0, 5))
        assert mem.wait_indexed(30)
        shard_ref = mem.internals.deployment.shards[1]
        assert mem.internals.router.shard_of(APP, victims[0]) == 1

        from ray._private import state as ray_state

        def levels_planned() -> tuple[float, ...]:  # when the shard's keeper levels it after recovering
            return tuple(ray.get(shard_ref.ref.handle.__ray_call__.remote(lambda shard: shard._keeper.level_after_s)))

        assert levels_planned() == ()  # a first start: every upsert reached it, the recovery read the rest

        actor_id = shard_ref.ref.handle._actor_id.hex()
        ray.kill(shard_ref.ref.handle, no_restart=False)
        # wait until the kill has landed (ray.kill returns first): a search sent now reaches the
        # new actor before its recovery can start, or finds it dead
        assert poll(lambda: ray_state.actors(actor_id)["State"] == "RESTARTING", every_s=0.005)
        during = convs[victims[0]].search("parcel code zebra2", limit=3, scope="user")
        assert degraded_or_complete(during, 1, "zebra2"), (
            during.degraded,
            during.reason,
            [h.message.text for h in during],
        )
        assert convs[others[0]].search("parcel code zebra2", limit=3).degraded is False  # the other shard serves

        for u, conv in convs.items():  # writes go on during the outage: durable, indexed later
            conv.add(turns(u, 5, 3))
        mem.flush()
        assert poll(lambda: restarted(shard_ref.ref.handle)), "Ray did not restart shard 1"
        assert levels_planned() == LEVEL_AFTER_S  # upserts failed while it was away

        def level() -> bool:
            res = convs[victims[1]].search("zebra7", limit=10, mode="lexical")
            return not res.degraded and any(h.message.text.endswith("zebra7") for h in res)

        assert poll(level), "shard 1 did not come back level with the store"
        assert mem.wait_indexed(30)
        store, held = mem.internals.deployment.stores, set(mem.internals.run(shard_ref.inventory()))
        for u in victims:
            key = ConversationKey(APP, u, "c")
            rows = mem.internals.run(store.get_messages(key))
            assert len(rows) == 8
            assert {(conversation_namespace(key), r.id) for r in rows} <= held
        stats = mem.internals.run(shard_ref.stats())  # complete by vector too: every item has its vector back
        assert stats["vectors"] == stats["items"] > 0, stats
        for u in victims:
            hits = convs[u].search(f"{u} note 6: the parcel code is zebra6", limit=8, mode="vector")
            assert not hits.degraded and hits[0].message.text.endswith("zebra6")

        ray.kill(shard_ref.ref.handle, no_restart=True)  # down for good: every search of its users degrades
        assert poll(lambda: dead(shard_ref.ref.handle)), "shard 1 did not die"
        down = convs[victims[0]].search("parcel code zebra2", limit=3, scope="user")
        assert down.degraded and "shard 1" in (down.reason or "") and list(down) == []
        assert convs[others[0]].search("parcel code zebra2", limit=3).degraded is False  # the other shard serves
    finally:
        mem.close(terminate=True)
