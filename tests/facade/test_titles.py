"""Conversation titles: made by the chat summariser from a conversation's opening, never over a
title the caller set, in both modes."""

from __future__ import annotations

import time
from typing import Any

import pytest

import memray
from tests.support.memories import MODES


def _titles(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    return "Harvest Festival Plans" if "title" in system else "- summary"


@pytest.mark.parametrize("mode", MODES)
def test_titles_come_from_the_chat_summariser_and_never_overwrite_a_callers(mode, request, tmp_path, openai_server):
    if mode == "ray":
        request.getfixturevalue("ray_session")
    openai_server.reply = _titles
    summarizer = memray.SummarizerConfig(kind="openai", model="fake-chat", base_url=openai_server.url, titles=True)
    mem = memray.open(str(tmp_path / "d"), mode=mode, hosts=1, shards=1, debounce_ms=10, summarizer=summarizer)
    try:
        conv = mem.conversation(user_id="u", conversation_id="auto")
        conv.add(
            [
                {"role": "user", "content": "we need stalls for the harvest festival"},
                {"role": "assistant", "content": "I will plan the stalls"},
            ],
            durable=True,
        )
        deadline = time.monotonic() + 60
        while (
            (info := conv.info()) is not None and info.title != "Harvest Festival Plans" and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert info is not None and info.title == "Harvest Festival Plans"
        mine = mem.conversation(user_id="u", conversation_id="mine")
        mine.create(title="My own title")
        mine.add({"role": "user", "content": "we need stalls for the harvest festival"}, durable=True)
        conv.add({"role": "user", "content": "and lanterns"}, durable=True)  # another commit of the opening
        mem.flush()
        assert mine.info().title == "My own title"  # type: ignore[union-attr]
        automatic = "we need stalls for the harvest festival"
        assert not mem.internals.run(mem.internals.deployment.stores.retitle(mine.key, automatic, "Generated"))
        assert conv.info().title == "Harvest Festival Plans"  # type: ignore[union-attr]
    finally:
        mem.close(terminate=True)
