"""Keys die with their user: erasing a user deletes every API key bound to them, live or
revoked — the receipt counts them, ``api_keys`` keeps no user id or label of theirs, and
``verify_deleted`` checks the table (a key bound to them made afterwards shows as remaining).
Keys of the app's other users, and app-wide keys, stay."""

from __future__ import annotations

from pathlib import Path

import memray
from tests.service.conftest import small_config
from tests.service.test_erasure import files_holding


def test_erasing_a_user_deletes_their_keys_and_only_theirs(mem: memray.Memory, app: str) -> None:
    _, live = mem.keys.create(app, "erased", label="erased-laptop")
    _, revoked = mem.keys.create(app, "erased", read_only=True, label="erased-old")
    mem.keys.revoke(revoked.key_id)
    _, neighbour = mem.keys.create(app, "kept", label="kept-phone")
    _, app_wide = mem.keys.create(app, None, label="ops")
    mem.conversation("erased", "c", app).add({"role": "user", "content": "hello"}, durable=True)

    receipt = mem.delete_user(app=app, user_id="erased")

    assert receipt.counts["api_keys"] == 2 and receipt.counts["messages"] == 1
    left = mem.keys.list(app)
    assert {r.key_id for r in left} == {neighbour.key_id, app_wide.key_id}
    assert not any(r.user_id == "erased" or "erased" in (r.label or "") for r in left)
    proof = mem.verify_deleted(app=app, user_id="erased")
    assert proof.clean and proof.remaining["api_keys"] == 0
    assert live.key_id not in {r.key_id for r in mem.keys.list()}

    mem.keys.create(app, "erased")  # a key made for them after the erasure is theirs again
    assert mem.verify_deleted(app=app, user_id="erased").remaining["api_keys"] == 1


def test_an_erased_users_keys_leave_no_bytes_in_the_key_ring_partition(tmp_path: Path) -> None:
    """The keys live in the first history partition; a user of another partition has their rows
    rewritten out of their own file, and the first file must lose their key rows' bytes too (the
    chaos soak found ``rest-gone`` in ``history-0.duckdb``: its ``api_keys`` column data and its
    zone maps, after a REST erasure that ``verify_deleted`` called clean)."""
    path = str(tmp_path / "data")
    config = small_config(path, "inprocess-stores2")
    with memray.open(config=config) as mem:
        stores = mem.internals.deployment.stores
        user = next(u for u in (f"zqgone{i}" for i in range(1000)) if stores.partition("keys-app", u) != 0)
        mem.keys.create("keys-app", user, label=f"{user}-laptop")
        mem.keys.create("keys-app", None, label="ops")
        mem.conversation(user, "c", "keys-app").add({"role": "user", "content": "hello"}, durable=True)
    with memray.open(config=config) as mem:  # the key rows were checkpointed into the file at the close
        assert files_holding(path, [user])  # the scan sees them before the erasure
        mem.delete_user(app="keys-app", user_id=user)
        assert mem.verify_deleted(app="keys-app", user_id=user).clean
        assert files_holding(path, [user]) == {}
    assert files_holding(path, [user]) == {}  # nor does the close bring them back
