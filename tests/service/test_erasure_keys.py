"""Keys die with their user (issue 31): erasing a user deletes every API key bound to them, live or
revoked — the receipt counts them, ``api_keys`` keeps no user id or label of theirs, and
``verify_deleted`` checks the table (a key bound to them made afterwards shows as remaining).
Keys of the app's other users, and app-wide keys, stay."""

from __future__ import annotations

import memray


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
