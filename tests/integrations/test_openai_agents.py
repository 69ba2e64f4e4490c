"""OpenAI Agents SDK: `MemraySession` under the SDK's own Runner with its ScriptedModel (no
network, tracing off), the Session behaviour checked against the SDK's ``SQLiteSession`` too,
and one run on Ray actors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool  # noqa: E402
from agents.memory import SessionSettings  # noqa: E402
from agents.memory.session import Session  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

import memray  # noqa: E402
from memray.integrations.openai_agents import MemraySession  # noqa: E402

NO_TRACING = RunConfig(tracing_disabled=True)


@function_tool
def lookup_flight(city: str) -> str:
    """Find the user's booked flight to a city."""
    return f"TP1234 to {city} on 12 May"


def flight_script() -> ScriptedModel:
    """Run 1: call the tool, then answer from its output. Run 2: answer."""
    return ScriptedModel(
        [
            [function_call("lookup_flight", {"city": "Lisbon"}, call_id="call-1")],
            [assistant_message("Your flight is TP1234 on 12 May.", item_id="msg-1")],
            [assistant_message("Yes: TP1234, as I said.", item_id="msg-2")],
        ]
    )


async def two_runs(session: Session, model: ScriptedModel) -> None:
    agent = Agent(name="assistant", instructions="Help with travel.", model=model, tools=[lookup_flight])
    await Runner.run(agent, "When is my flight to Lisbon?", session=session, run_config=NO_TRACING)
    await Runner.run(agent, "Is it TP1234?", session=session, run_config=NO_TRACING)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# -- a Runner keeps its history in memray -------------------------------------------------------------
def test_the_second_run_sees_the_first_runs_items_and_they_round_trip_exactly(mem, app):
    async def scenario() -> None:
        session = MemraySession("trip", mem, user_id="ada", app=app)
        model = flight_script()
        await two_runs(session, model)

        second_input = model.calls[-1].input
        kinds = [i.get("type", "message") for i in second_input]
        assert kinds == ["message", "function_call", "function_call_output", "message", "message"]
        assert second_input[2]["output"] == "TP1234 to Lisbon on 12 May"
        assert second_input[-1] == user("Is it TP1234?")

        reference = SQLiteSession("trip")  # the SDK's own session, fed the same script
        await two_runs(reference, flight_script())
        assert await session.get_items() == await reference.get_items()

        roles = [m.role for m in session.conversation.messages()]
        assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
        mem.wait_indexed()
        hits = session.conversation.search("TP1234 Lisbon 12 May", mode="lexical")
        assert hits and hits[0].message.role in ("tool", "assistant")

    asyncio.run(scenario())


# -- the Session behaviour, on memray and on the SDK's SQLiteSession ----------------------------------
@pytest.fixture(params=["memray", "sdk-sqlite"])
def make_session(request: pytest.FixtureRequest, mem: memray.Memory, app: str) -> Iterator[Any]:
    made: list[SQLiteSession] = []

    def make(session_id: str, settings: SessionSettings | None = None) -> Session:
        if request.param == "memray":
            return MemraySession(session_id, mem, user_id="u", app=app, session_settings=settings)
        made.append(SQLiteSession(session_id, session_settings=settings))
        return made[-1]

    yield make
    for s in made:
        s.close()


TOOL_ITEMS: list[Any] = [
    {"role": "developer", "content": "Be brief."},
    user("Convert 3 km, s'il vous plaît 🙂"),
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "needs the converter"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "convert", "arguments": '{"km": 3, "to": "mi"}'},
    {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "1.864 mi"}]},
    {
        "type": "message",
        "role": "assistant",
        "id": "m_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "3 km ≈ 1.864 mi", "annotations": [], "logprobs": []}],
    },
    {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "noop", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c2", "output": "", "extra": {"nested": [1, 2.5, None, True]}},
]


def test_contract_items_round_trip_exactly_in_order(make_session):
    async def scenario() -> None:
        session = make_session("s1")
        await session.add_items(TOOL_ITEMS[:3])
        await session.add_items(TOOL_ITEMS[3:])
        assert await session.get_items() == TOOL_ITEMS
        assert await session.get_items(limit=2) == TOOL_ITEMS[-2:]
        assert await make_session("s1-other").get_items() == []

    asyncio.run(scenario())


def test_contract_pop_returns_the_newest_item_and_removes_it(make_session):
    async def scenario() -> None:
        session = make_session("s2")
        assert await session.pop_item() is None
        await session.add_items([user("one"), user("two"), user("three")])
        assert await session.pop_item() == user("three")
        assert await session.get_items() == [user("one"), user("two")]
        await session.add_items([user("four")])
        assert await session.get_items() == [user("one"), user("two"), user("four")]

    asyncio.run(scenario())


def test_contract_clear_session_empties_it_and_it_can_be_reused(make_session):
    async def scenario() -> None:
        session = make_session("s3")
        await session.add_items([user("a"), user("b")])
        await session.clear_session()
        assert await session.get_items() == []
        await session.add_items([user("c")])
        assert await session.get_items() == [user("c")]

    asyncio.run(scenario())


def test_contract_session_settings_limit_is_the_default_limit(make_session):
    async def scenario() -> None:
        session = make_session("s4", SessionSettings(limit=2))
        await session.add_items([user(str(i)) for i in range(5)])
        assert await session.get_items() == [user("3"), user("4")]
        assert len(await session.get_items(limit=4)) == 4

    asyncio.run(scenario())


# -- what memray adds ------------------------------------------------------------------------------
def test_durable_sessions_are_committed_and_pop_deletes_from_the_store(mem, app):
    async def scenario() -> None:
        session = MemraySession("s5", mem, user_id="u", app=app, durable=True)
        await session.add_items([user("keep me"), user("my locker code is 4471")])
        stored = mem.internals.run(mem.internals.deployment.stores.get_messages(session.conversation.key))
        assert len(stored) == 2  # committed when add_items returned
        mem.wait_indexed()
        await session.pop_item()
        assert session.conversation.search("locker code 4471", mode="lexical") == []
        again = MemraySession("s5", mem, user_id="u", app=app)
        assert await again.get_items() == [user("keep me")]

    asyncio.run(scenario())


def test_messages_written_without_the_session_come_back_as_plain_items(mem, app):
    async def scenario() -> None:
        conv = mem.conversation(user_id="u", conversation_id="mixed", app=app)
        conv.add([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}])
        session = MemraySession("mixed", mem, user_id="u", app=app)
        await session.add_items([{"type": "function_call_output", "call_id": "c", "output": "x"}])
        assert await session.get_items() == [
            {"role": "system", "content": "You are terse."},
            user("hi"),
            {"type": "function_call_output", "call_id": "c", "output": "x"},
        ]

    asyncio.run(scenario())


def test_an_item_that_is_not_json_is_rejected_before_anything_is_written(mem, app):
    async def scenario() -> None:
        session = MemraySession("bad", mem, user_id="u", app=app)
        with pytest.raises(memray.ValidationError, match="JSON"):
            await session.add_items([user("fine"), {"role": "user", "content": object()}])  # type: ignore[list-item]
        assert await session.get_items() == []

    asyncio.run(scenario())


# -- on Ray actors -------------------------------------------------------------------------------------
@pytest.mark.ray
def test_a_runner_keeps_its_history_in_memray_on_ray(ray_session, tmp_path):
    mem = memray.open(
        str(tmp_path / "ray-data"),
        mode="ray",
        hosts=1,
        shards=1,
        debounce_ms=10,
        namespace="memray-agents-session-test",
    )
    try:

        async def scenario() -> None:
            session = MemraySession("trip", mem, user_id="ada")
            model = flight_script()
            await two_runs(session, model)
            assert [i.get("type", "message") for i in model.calls[-1].input][:3] == [
                "message",
                "function_call",
                "function_call_output",
            ]
            assert (await session.pop_item())["id"] == "msg-2"
            assert len(await session.get_items()) == 5

        asyncio.run(scenario())
    finally:
        mem.close(terminate=True)
