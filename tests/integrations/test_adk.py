"""Google ADK: `MemrayMemoryService` under ADK's own Runner, LlmAgent, sessions and memory
tools, with a scripted model (a real ``BaseLlm`` subclass; no network). The behaviour that ADK's
base class documents is checked against ADK's own ``InMemoryMemoryService`` too, so the
contract tests encode ADK's behaviour and not only ours."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.memory import InMemoryMemoryService  # noqa: E402
from google.adk.memory.base_memory_service import BaseMemoryService  # noqa: E402
from google.adk.memory.memory_entry import MemoryEntry as AdkMemoryEntry  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService, Session  # noqa: E402
from google.adk.tools import load_memory, preload_memory  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import Field  # noqa: E402

import memray  # noqa: E402
from memray.integrations.adk import MemrayMemoryService  # noqa: E402

Step = Callable[[LlmRequest], LlmResponse]


class ScriptedLlm(BaseLlm):
    """A model that answers from a script: each call pops the next step (a function of the request)."""

    script: list[Step] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        yield self.script.pop(0)(llm_request)


def say(text: str) -> Step:
    return lambda _: LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def call_tool(name: str, **args: Any) -> Step:
    return lambda _: LlmResponse(
        content=types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name=name, args=args))])
    )


def user_says(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def event(author: str, *parts: types.Part, partial: bool = False, role: str | None = None) -> Event:
    return Event(
        author=author,
        invocation_id="inv",
        partial=partial,
        content=types.Content(role=role or ("user" if author == "user" else "model"), parts=list(parts)),
    )


def session(app: str, user: str, sid: str, events: list[Event]) -> Session:
    return Session(id=sid, app_name=app, user_id=user, events=events)


async def run_turn(runner: Runner, user: str, sid: str, text: str) -> list[Event]:
    return [e async for e in runner.run_async(user_id=user, session_id=sid, new_message=user_says(text))]


def texts(response: Any) -> list[str]:
    return [" ".join(p.text for p in m.content.parts if p.text) for m in response.memories]


# -- an agent run through ADK's Runner --------------------------------------------------------------
def test_an_agent_calls_load_memory_and_gets_memrays_memories(mem, app):
    async def scenario() -> None:
        sessions = InMemorySessionService()
        memory_service = MemrayMemoryService(mem)
        model = ScriptedLlm(model="scripted")
        agent = LlmAgent(name="assistant", model=model, instruction="Be helpful.", tools=[load_memory])
        runner = Runner(agent=agent, app_name=app, session_service=sessions, memory_service=memory_service)

        # Session 1: the user states facts; the app stores the finished session in memory.
        first = await sessions.create_session(app_name=app, user_id="ada")
        model.script += [say("Noted: vegetarian meals."), say("Lisbon on 12 May, noted.")]
        await run_turn(runner, "ada", first.id, "I am vegetarian, no meat please")
        await run_turn(runner, "ada", first.id, "I fly to Lisbon on 12 May")
        stored = await sessions.get_session(app_name=app, user_id="ada", session_id=first.id)
        await memory_service.add_session_to_memory(stored)

        # Session 2: the model calls ADK's load_memory tool and answers from what it returned.
        second = await sessions.create_session(app_name=app, user_id="ada")
        model.script += [
            call_tool("load_memory", query="vegetarian meals"),
            lambda req: say(f"From memory: {req.contents[-1].parts[0].function_response.response}")(req),
        ]
        events = await run_turn(runner, "ada", second.id, "What should the airline serve me?")

        responses = [p.function_response for e in events for p in e.content.parts or () if p.function_response]
        assert [r.name for r in responses] == ["load_memory"]
        memories = responses[0].response["result"].memories
        assert "I am vegetarian, no meat please" in texts(responses[0].response["result"])
        scores = [m.custom_metadata["score"] for m in memories]
        assert scores == sorted(scores, reverse=True)
        assert {m.custom_metadata["session_id"] for m in memories} == {first.id}
        assert "vegetarian" in events[-1].content.parts[0].text  # the model's next request carried the memories

        # Storing session 2 keeps its texts, not the tool call or the tool result.
        await memory_service.add_session_to_memory(
            await sessions.get_session(app_name=app, user_id="ada", session_id=second.id)
        )
        kept = mem.memory_service.list_entries(app, "ada")
        assert sorted(r.entry.text for r in kept if r.session_id == second.id) == sorted(
            ["What should the airline serve me?", events[-1].content.parts[0].text]
        )

    asyncio.run(scenario())


def test_preload_memory_puts_memrays_memories_into_the_prompt(mem, app):
    async def scenario() -> None:
        sessions = InMemorySessionService()
        memory_service = MemrayMemoryService(mem)
        await memory_service.add_session_to_memory(
            session(app, "bo", "old", [event("user", types.Part(text="My locker code is 4471"))])
        )
        model = ScriptedLlm(model="scripted", script=[say("It is 4471.")])
        runner = Runner(
            agent=LlmAgent(name="assistant", model=model, tools=[preload_memory]),
            app_name=app,
            session_service=sessions,
            memory_service=memory_service,
        )
        new = await sessions.create_session(app_name=app, user_id="bo")
        await run_turn(runner, "bo", new.id, "what is my locker code?")
        prompt = "\n".join(p.text or "" for c in model.requests[0].contents for p in c.parts or ())
        assert "My locker code is 4471" in prompt

    asyncio.run(scenario())


# -- ADK's documented behaviour, on memray and on ADK's in-memory reference --------------------------
SERVICES = ["memray", "adk-in-memory"]


@pytest.fixture(params=SERVICES)
def service(request: pytest.FixtureRequest, mem: memray.Memory) -> BaseMemoryService:
    return MemrayMemoryService(mem) if request.param == "memray" else InMemoryMemoryService()


def test_contract_a_stored_session_is_searchable_by_its_user_only(service, app):
    async def scenario() -> None:
        await service.add_session_to_memory(
            session(
                app,
                "u",
                "s1",
                [
                    event("user", types.Part(text="I like kayaking on quiet rivers")),
                    event("assistant", types.Part(text="Kayaking sounds lovely")),
                ],
            )
        )
        found = await service.search_memory(app_name=app, user_id="u", query="kayaking")
        assert "I like kayaking on quiet rivers" in texts(found)
        assert {m.author for m in found.memories} == {"user", "assistant"}
        assert all(m.id and m.timestamp for m in found.memories)
        assert (await service.search_memory(app_name=app, user_id="other", query="kayaking")).memories == []
        assert (await service.search_memory(app_name=app + "-x", user_id="u", query="kayaking")).memories == []

    asyncio.run(scenario())


def test_contract_events_added_as_a_delta_keep_the_rest_of_the_session(service, app):
    async def scenario() -> None:
        await service.add_session_to_memory(session(app, "u", "s1", [event("user", types.Part(text="walrus one"))]))
        await service.add_events_to_memory(
            app_name=app, user_id="u", session_id="s1", events=[event("user", types.Part(text="walrus two"))]
        )
        found = await service.search_memory(app_name=app, user_id="u", query="walrus")
        assert sorted(texts(found)) == ["walrus one", "walrus two"]

    asyncio.run(scenario())


def test_contract_delete_memory_removes_the_memory_search_returned(service, app):
    async def scenario() -> None:
        await service.add_session_to_memory(
            session(
                app,
                "u",
                "s1",
                [event("user", types.Part(text="pelican first")), event("user", types.Part(text="pelican second"))],
            )
        )
        found = await service.search_memory(app_name=app, user_id="u", query="pelican")
        gone = next(m for m in found.memories if texts_of(m) == "pelican first")
        await service.delete_memory(app_name=app, user_id="u", memory_id=gone.id)
        assert texts(await service.search_memory(app_name=app, user_id="u", query="pelican")) == ["pelican second"]

    asyncio.run(scenario())


def texts_of(memory: AdkMemoryEntry) -> str:
    return " ".join(p.text for p in memory.content.parts or () if p.text)


def test_contract_events_without_text_are_not_memories(service, app):
    async def scenario() -> None:
        call = types.Part(function_call=types.FunctionCall(name="lookup", args={"q": "otter"}))
        result = types.Part(function_response=types.FunctionResponse(name="lookup", response={"otter": "fact"}))
        await service.add_session_to_memory(
            session(
                app,
                "u",
                "s1",
                [
                    event("assistant", call),
                    event("user", result, role="user"),
                    event("assistant", types.Part(text="otter facts, told")),
                ],
            )
        )
        found = await service.search_memory(app_name=app, user_id="u", query="otter lookup fact")
        assert texts(found) == ["otter facts, told"]

    asyncio.run(scenario())


# -- what memray adds: skipping like the agent helpers, replacing sessions, projects ------------------
def test_thoughts_and_partial_events_are_skipped_and_a_session_is_replaced(mem, app):
    async def scenario() -> None:
        svc = MemrayMemoryService(mem)
        await svc.add_session_to_memory(
            session(
                app,
                "u",
                "s1",
                [
                    event(
                        "assistant",
                        types.Part(text="secret reasoning", thought=True),
                        types.Part(text="visible answer"),
                    ),
                    event("assistant", types.Part(text="visi"), partial=True),
                    event("user", types.Part(text="   ")),
                ],
            )
        )
        assert [r.entry.text for r in mem.memory_service.list_entries(app, "u")] == ["visible answer"]
        await svc.add_session_to_memory(session(app, "u", "s1", [event("user", types.Part(text="only this now"))]))
        assert [r.entry.text for r in mem.memory_service.list_entries(app, "u")] == ["only this now"]

    asyncio.run(scenario())


def test_projects_scope_adds_searches_and_deletes(mem, app):
    async def scenario() -> None:
        global_svc = MemrayMemoryService(mem)
        web = global_svc.with_project_id("web")
        await global_svc.add_session_to_memory(
            session(app, "u", "g", [event("user", types.Part(text="I prefer dark mode"))])
        )
        await web.add_session_to_memory(
            session(app, "u", "w", [event("user", types.Part(text="web uses dark theme tokens"))])
        )
        await global_svc.add_to_project(
            app_name=app,
            user_id="u",
            project_id="cli",
            memories=[
                AdkMemoryEntry(
                    content=types.Content(role="user", parts=[types.Part(text="cli has a dark palette")]),
                    author="user",
                    timestamp="2026-01-02T03:04:05+00:00",
                    custom_metadata={"source": "import"},
                )
            ],
        )

        assert texts(await global_svc.search_memory(app_name=app, user_id="u", query="dark")) == ["I prefer dark mode"]
        web_found = await web.search_memory(app_name=app, user_id="u", query="dark")
        assert sorted(texts(web_found)) == ["I prefer dark mode", "web uses dark theme tokens"]
        assert {m.custom_metadata["project_id"] for m in web_found.memories} == {None, "web"}
        cli_found = await global_svc.search_in_project(app_name=app, user_id="u", query="palette", project_id="cli")
        assert texts(cli_found)[0] == "cli has a dark palette"
        assert "web uses dark theme tokens" not in texts(cli_found)
        assert cli_found.memories[0].custom_metadata["source"] == "import"
        assert cli_found.memories[0].timestamp == "2026-01-02T03:04:05+00:00"

        web_id = next(m.id for m in web_found.memories if m.custom_metadata["project_id"] == "web")
        await global_svc.delete_memory(app_name=app, user_id="u", memory_id=web_id)  # not its scope: kept
        assert len((await web.search_memory(app_name=app, user_id="u", query="dark theme tokens")).memories) >= 1
        await web.delete_memory(app_name=app, user_id="u", memory_id=web_id)
        assert texts(await web.search_memory(app_name=app, user_id="u", query="dark")) == ["I prefer dark mode"]

    asyncio.run(scenario())


def test_add_memory_writes_adk_entries_directly(mem, app):
    async def scenario() -> None:
        svc = MemrayMemoryService(mem)
        await svc.add_memory(
            app_name=app,
            user_id="u",
            custom_metadata={"ttl": "30d"},
            memories=[
                AdkMemoryEntry(
                    id="fact-1", content=types.Content(role="user", parts=[types.Part(text="allergic to peanuts")])
                )
            ],
        )
        found = await svc.search_memory(app_name=app, user_id="u", query="peanuts")
        assert [(m.id, texts_of(m), m.author, m.custom_metadata["ttl"]) for m in found.memories] == [
            ("fact-1", "allergic to peanuts", "user", "30d")
        ]

    asyncio.run(scenario())
