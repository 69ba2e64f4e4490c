"""``list_conversations()`` pages a user's conversations in the order asked (by title, by creation)
and counts them all, in both modes."""

from __future__ import annotations

import uuid

import pytest

from memray.errors import ValidationError

APP = "listing"


def test_list_conversations_orders_by_title_and_counts_them_all(mem):
    user = uuid.uuid4().hex
    for cid, title in (("c1", "banana"), ("c2", None), ("c3", "apple"), ("c4", "cherry")):
        mem.conversation(user_id=user, conversation_id=cid, app=APP).create(title=title)
    page = mem.list_conversations(user, app=APP, order="title_asc", limit=2)
    assert [c.title for c in page] == ["apple", "banana"] and page.total == 4
    assert [c.conversation_id for c in mem.list_conversations(user, app=APP, order="title_desc")] == [
        "c4",
        "c1",
        "c3",
        "c2",
    ]
    assert mem.list_conversations(user, app=APP, offset=3).total == 4
    assert mem.internals.run(mem.alist_conversations(user, app=APP, order="created_asc")).total == 4
    with pytest.raises(ValidationError, match="title_asc"):
        mem.list_conversations(user, app=APP, order="by_mood")
