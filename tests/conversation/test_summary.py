from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memray.config import SummarizerConfig
from memray.conversation.summarizer import ExtractiveSummarizer, OpenAIChatSummarizer, build_summarizer
from memray.conversation.summary import (
    SUMMARY_MARKER,
    SummaryKeeper,
    is_summary_message,
    strip_summary_blocks,
    summary_message,
)
from memray.errors import MissingExtraError, SummaryError, ValidationError
from memray.ids import ConversationKey
from memray.models import Message
from memray.store.client import StoreClient
from memray.store.partitions import StorePartitions
from memray.text import estimate_tokens
from tests.conversation.conftest import CountingStore

# The checkout this test runs from, for the subprocesses it starts.
REPO_ROOT = str(Path(__file__).resolve().parents[2])

KEY = ConversationKey("app", "u1", "c1")

FACTS = [
    "My name is Ann and I live in Oslo.",
    "I am allergic to peanuts, please remember that.",
    "The project deadline is March 3rd.",
    "Our budget for the offsite is 4000 euros.",
    "My daughter Lina starts school in August.",
    "The staging server runs Ubuntu 22.04 with Postgres 16.",
]


def user(text: str, **meta: Any) -> Message:
    return Message(role="user", parts=text, metadata=meta)


def assistant(text: str) -> Message:
    return Message(role="assistant", parts=text)


# -- summary messages ------------------------------------------------------------------------
def test_summary_message_is_marked_and_recognised() -> None:
    msg = summary_message("<agent_summary>- Ann lives in Oslo</agent_summary>")  # no double wrap
    assert msg.role == "system" and msg.metadata[SUMMARY_MARKER] is True
    assert msg.text == "<agent_summary>\n- Ann lives in Oslo\n</agent_summary>"
    assert is_summary_message(msg)
    assert is_summary_message(Message(role="system", parts="<agent_summary>x</agent_summary>"))
    assert not is_summary_message(Message(role="system", parts="You are helpful."))
    assert strip_summary_blocks("a <agent_summary>old</agent_summary> b") == "a  b"


# -- extractive ------------------------------------------------------------------------------
def chatter() -> list[Message]:
    msgs: list[Message] = []
    for i, fact in enumerate(FACTS):
        msgs.append(user(f"ok. {fact} thanks"))
        msgs.append(assistant(f"Noted, I will remember point {i}."))
    return msgs


def test_extractive_is_deterministic_and_within_budget() -> None:
    summarizer = ExtractiveSummarizer()
    first = summarizer.summarize(None, chatter(), 60)
    assert first == ExtractiveSummarizer().summarize(None, chatter(), 60)
    assert 0 < estimate_tokens(first) <= 60
    for line in first.splitlines():
        assert line.startswith(("- user: ", "- assistant: "))
    # The budget is spent on the informative sentences, not on "ok." or "thanks".
    assert "- user: ok." not in first
    assert sum(fact in first for fact in FACTS) >= 3


def test_extractive_keeps_previous_key_lines_and_adds_new() -> None:
    summarizer = ExtractiveSummarizer()
    previous = summarizer.summarize(None, [user(FACTS[0]), user(FACTS[1])], 200)
    updated = summarizer.summarize(previous, [user(FACTS[2]), assistant("Sure.")], 200)
    assert updated.splitlines()[:2] == previous.splitlines()
    assert FACTS[2] in updated


def test_extractive_never_includes_an_old_summary_block() -> None:
    summarizer = ExtractiveSummarizer()
    old_block = "<agent_summary>\n- user: SECRET-OLD-LINE repeated\n</agent_summary>"
    msgs = [
        summary_message("- user: MARKED-SUMMARY line"),
        Message(role="system", parts=old_block),
        user(f"{FACTS[3]} <agent_summary>INLINE-BLOCK</agent_summary>"),
    ]
    out = summarizer.summarize("- user: kept line", msgs, 500)
    assert "agent_summary" not in out
    for leaked in ("SECRET-OLD-LINE", "MARKED-SUMMARY", "INLINE-BLOCK"):
        assert leaked not in out
    assert "kept line" in out and FACTS[3] in out
    # A previous summary handed over still wrapped is unwrapped, not nested.
    rewrapped = summarizer.summarize(old_block, [], 500)
    assert rewrapped == "- user: SECRET-OLD-LINE repeated"


def test_extractive_handles_chinese_and_tiny_budgets() -> None:
    out = ExtractiveSummarizer().summarize(None, [user("我叫小明。我住在北京,喜欢喝茶。项目截止日期是三月三日。")], 12)
    assert out and estimate_tokens(out) <= 12
    assert ExtractiveSummarizer().summarize(None, [], 50) == ""


# -- the keeper ------------------------------------------------------------------------------
def keeper(client: StoreClient, trigger: int, keep: int = 2, summarizer: Any = None) -> SummaryKeeper:
    config = SummarizerConfig(trigger_tokens=trigger, keep_messages=keep, max_summary_tokens=300)
    return SummaryKeeper(client, summarizer or ExtractiveSummarizer(), config, estimate_tokens)


def test_trigger_threshold_is_respected(store_client: StorePartitions, store: CountingStore) -> None:
    async def go() -> None:
        keep = keeper(store_client, trigger=60)
        store.add(KEY, [user(FACTS[0]), user(FACTS[1])])  # ~ 30 tokens: under the trigger
        assert await keep.maybe_update(KEY, 2) is None
        assert await keep.current(KEY) is None
        store.add(KEY, [user(FACTS[2]), user(FACTS[3]), user(FACTS[4])])
        state = await keep.maybe_update(KEY, 5)
        assert state is not None and state.version == 1
        assert state.summarized_through_seq == 3  # the last keep_messages=2 stay out
        assert FACTS[3] not in state.text and FACTS[4] not in state.text
        assert await keep.current(KEY) == state.text
        # Nothing new: no refold, and only messages after the counted seq were read.
        calls = len(store.get_messages_calls)
        assert await keep.maybe_update(KEY, 5) is None
        assert len(store.get_messages_calls) == calls

    asyncio.run(go())


def test_incremental_rounds_advance_over_the_whole_history(store_client: StorePartitions, store: CountingStore) -> None:
    async def go() -> None:
        keep = keeper(store_client, trigger=40, keep=2)
        throughs: list[int] = []
        last_seq = 0
        for round_ in range(3):
            batch = [user(f"Round {round_}: {fact}") for fact in FACTS[2 * round_ : 2 * round_ + 2]]
            batch += [user(f"Round {round_} detail number {n} about topic{round_}{n}.") for n in range(3)]
            store.add(KEY, batch)
            last_seq += len(batch)
            state = await keep.maybe_update(KEY, last_seq)
            assert state is not None, f"round {round_} did not fold"
            throughs.append(state.summarized_through_seq)
            assert state.summarized_through_seq == last_seq - 2
        assert throughs == sorted(set(throughs)) and len(throughs) == 3
        text = await keep.current(KEY)
        assert text is not None and "Round 2" in text and "Round 0" in text  # old lines kept
        # Each round read only what was new since the summary.
        assert store.get_messages_calls[-1] == throughs[1]

    asyncio.run(go())


class RecordingSummarizer:
    def __init__(self) -> None:
        self.calls: list[tuple[str | None, list[Message]]] = []

    def summarize(self, previous: str | None, messages: list[Message], max_tokens: int) -> str:
        self.calls.append((previous, list(messages)))
        return f"summary {len(self.calls)}"


def test_old_summary_message_is_not_fed_back_and_keep_messages_stay_out(
    store_client: StorePartitions, store: CountingStore
) -> None:
    async def go() -> None:
        rec = RecordingSummarizer()
        keep = keeper(store_client, trigger=10, keep=3, summarizer=rec)
        msgs = [user(f"{fact}") for fact in FACTS]
        msgs.insert(2, summary_message("an old summary that slipped into the history"))
        store.add(KEY, msgs)  # seqs 1..7, seq 3 is the summary message
        state = await keep.maybe_update(KEY, 7)
        assert state is not None and state.summarized_through_seq == 4
        previous, folded = rec.calls[0]
        assert previous is None
        assert [m.seq for m in folded] == [1, 2, 4]  # 5, 6, 7 kept out; seq 3 filtered
        assert not any(is_summary_message(m) for m in folded)
        store.add(KEY, [user(f"More: {fact}") for fact in FACTS])
        state2 = await keep.maybe_update(KEY, 13)
        assert state2 is not None and state2.summarized_through_seq == 10
        previous, folded = rec.calls[1]
        assert previous == "summary 1"  # the stored text, never a message
        assert [m.seq for m in folded] == [5, 6, 7, 8, 9, 10]

    asyncio.run(go())


def test_keep_messages_larger_than_history_folds_nothing(store_client: StorePartitions, store: CountingStore) -> None:
    async def go() -> None:
        keep = keeper(store_client, trigger=1, keep=10)
        store.add(KEY, [user(fact) for fact in FACTS])
        assert await keep.maybe_update(KEY, 6) is None
        assert await keep.maybe_update(KEY, 6, force=True) is None

    asyncio.run(go())


class FailingSummarizer:
    def summarize(self, previous: str | None, messages: list[Message], max_tokens: int) -> str:
        raise RuntimeError("model overloaded")


def test_summariser_failure_is_a_summary_error_and_writes_nothing(
    store_client: StorePartitions, store: CountingStore
) -> None:
    async def go() -> None:
        keep = keeper(store_client, trigger=1, keep=1, summarizer=FailingSummarizer())
        store.add(KEY, [user(fact) for fact in FACTS])
        with pytest.raises(SummaryError, match="model overloaded"):
            await keep.maybe_update(KEY, 6)
        assert store.get_summary(KEY) is None

    asyncio.run(go())


def test_concurrent_updates_fold_once(store_client: StorePartitions, store: CountingStore) -> None:
    async def go() -> None:
        rec = RecordingSummarizer()
        keep = keeper(store_client, trigger=10, keep=1, summarizer=rec)
        store.add(KEY, [user(fact) for fact in FACTS])
        results = await asyncio.gather(*(keep.maybe_update(KEY, 6) for _ in range(5)))
        assert sum(r is not None for r in results) == 1
        assert len(rec.calls) == 1
        assert not keep._locks  # no lock left behind

    asyncio.run(go())


# -- build_summarizer ------------------------------------------------------------------------
def test_build_summarizer() -> None:
    assert build_summarizer(SummarizerConfig(kind="none")) is None
    assert isinstance(build_summarizer(SummarizerConfig()), ExtractiveSummarizer)
    with pytest.raises(ValidationError) as info:
        build_summarizer(SummarizerConfig(kind="openai"))
    assert info.value.field == "summarizer.model"
    chat = build_summarizer(SummarizerConfig(kind="openai", model="m", base_url="http://x/v1", timeout_s=5))
    assert isinstance(chat, OpenAIChatSummarizer) and chat.timeout_s == 5


def test_missing_openai_package_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(MissingExtraError, match=r"memray-agents\[openai\]"):
        OpenAIChatSummarizer("m", base_url="http://127.0.0.1:9/v1").summarize(None, [user("hi")], 50)


# -- the chat summariser against a local OpenAI-compatible server ---------------------------
# NOTE for the integrator: tests/support/openai_server.py (another helper) can replace this
# minimal server; it answers POST /v1/chat/completions with a canned reply and records requests.
class _ChatHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server: Any = self.server
        server.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        if self.path != "/v1/chat/completions" or server.fail:
            self._send(500 if server.fail else 404, {"error": {"message": "boom", "type": "server_error"}})
            return
        n = len(server.requests)
        reply = f"<agent_summary>- summary {n} of {len(body['messages'])} messages</agent_summary>"
        self._send(
            200,
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def chat_server() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    server.requests = []
    server.fail = False
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_chat_summariser_round_trip(chat_server: Any) -> None:
    base_url = f"http://127.0.0.1:{chat_server.server_port}/v1"
    chat = OpenAIChatSummarizer("small-model", base_url=base_url, api_key="k", timeout_s=5, max_retries=0)
    old = summary_message("stale")
    out = chat.summarize("<agent_summary>- Ann lives in Oslo</agent_summary>", [user(FACTS[1]), old], 123)
    assert out == "- summary 1 of 2 messages"  # tags stripped from the reply
    path, headers, body = chat_server.requests[0]
    assert path == "/v1/chat/completions" and headers["authorization"] == "Bearer k"
    assert body["model"] == "small-model" and body["max_tokens"] == 123
    prompt = body["messages"][1]["content"]
    assert "<previous_summary>\n- Ann lives in Oslo\n</previous_summary>" in prompt
    assert FACTS[1] in prompt and "stale" not in prompt and "<agent_summary>" not in prompt


def test_chat_summariser_chunks_long_input(chat_server: Any) -> None:
    base_url = f"http://127.0.0.1:{chat_server.server_port}/v1"
    chat = OpenAIChatSummarizer("m", base_url=base_url, api_key="k", max_retries=0, max_input_tokens=25)
    out = chat.summarize(None, [user(fact) for fact in FACTS], 50)
    assert len(chat_server.requests) >= 3
    assert out == f"- summary {len(chat_server.requests)} of 2 messages"
    second_prompt = chat_server.requests[1][2]["messages"][1]["content"]
    assert "<previous_summary>\n- summary 1 of 2 messages" in second_prompt  # folded onward


def test_chat_summariser_failure_is_summary_error(chat_server: Any) -> None:
    chat_server.fail = True
    base_url = f"http://127.0.0.1:{chat_server.server_port}/v1"
    chat = OpenAIChatSummarizer("m", base_url=base_url, api_key="k", timeout_s=5, max_retries=0)
    with pytest.raises(SummaryError, match="'m' at http://127.0.0.1"):
        chat.summarize(None, [user("hi")], 50)


def test_keeper_with_chat_summariser(store_client: StorePartitions, store: CountingStore, chat_server: Any) -> None:
    base_url = f"http://127.0.0.1:{chat_server.server_port}/v1"
    chat = OpenAIChatSummarizer("m", base_url=base_url, api_key="k", timeout_s=5, max_retries=0)

    async def go() -> None:
        store.add(KEY, [user(fact) for fact in FACTS])
        state = await keeper(store_client, trigger=10, keep=2, summarizer=chat).maybe_update(KEY, 6)
        assert state is not None and state.text == "- summary 1 of 2 messages"
        assert state.summarized_through_seq == 4

    asyncio.run(go())


def test_extractive_is_deterministic_across_processes() -> None:
    # Set iteration order changes with PYTHONHASHSEED; the summary must not.
    import os
    import subprocess
    import sys

    code = (
        "from memray.conversation.summarizer import ExtractiveSummarizer\n"
        "from memray.models import Message\n"
        "msgs = [Message(role='user', parts=f'fact {i} about topic{i % 5} and thing{i % 3} here.')\n"
        "        for i in range(40)]\n"
        "print(ExtractiveSummarizer().summarize('- user: old line', msgs, 80))\n"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": REPO_ROOT},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outs) == 1 and next(iter(outs)).strip()


def test_summary_error_pickles() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(SummaryError("summariser 'm' failed")))
    assert isinstance(err, SummaryError) and str(err) == "summariser 'm' failed"
