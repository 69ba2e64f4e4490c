"""A small agent loop with long-term memory, on any OpenAI-compatible chat endpoint.

Before each turn it preloads the memories relevant to the user's message into the system prompt,
it offers the model a ``load_memory`` tool for anything else, answers the tool calls, and after
the session it stores the conversation (opt-in) so later sessions can recall it::

    python examples/agent_loop.py --base-url http://localhost:8000/v1 --model my-model \
        "I prefer dark mode" "What do I prefer?"

``--base-url`` defaults to ``$OPENAI_BASE_URL`` (or OpenAI itself); the key comes from
``$OPENAI_API_KEY`` (local servers accept any).
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from typing import Any

from openai import OpenAI

import memray
from memray.service import call_load_memory, load_memory_tool, relevant_memories_block, store_session

SYSTEM = (
    "You are a helpful assistant with long-term memory of this user. Use the relevant memories "
    "below when they help; call load_memory to look up anything else from earlier sessions."
)


def run_turn(
    client: OpenAI,
    model: str,
    svc: memray.MemoryServiceHandle,
    app: str,
    user_id: str,
    history: list[dict[str, Any]],
    user_text: str,
    project_id: str | None = None,
    max_tool_rounds: int = 3,
) -> str:
    """One user turn: preload memories, call the model, answer its tool calls, return the reply.
    ``history`` (without the system prompt) grows by the turn's messages."""
    history.append({"role": "user", "content": user_text})
    block = relevant_memories_block(svc, app, user_id, user_text, project_id)
    system = {"role": "system", "content": SYSTEM + ("\n\n" + block if block else "")}
    for _ in range(max_tool_rounds + 1):
        response = client.chat.completions.create(model=model, messages=[system, *history], tools=[load_memory_tool()])
        message = response.choices[0].message
        if not message.tool_calls:
            history.append({"role": "assistant", "content": message.content or ""})
            return message.content or ""
        history.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            if call.function.name == "load_memory":
                result = call_load_memory(svc, app, user_id, call.function.arguments, project_id)
            else:
                result = json.dumps({"error": f"unknown tool {call.function.name!r}"})
            history.append({"role": "tool", "tool_call_id": call.id, "content": result})
    history.append({"role": "assistant", "content": "(stopped: too many tool calls)"})
    return history[-1]["content"]


def run_session(
    client: OpenAI,
    model: str,
    svc: memray.MemoryServiceHandle,
    app: str,
    user_id: str,
    session_id: str,
    turns: list[str],
    project_id: str | None = None,
) -> list[dict[str, Any]]:
    """Run the turns, then store the session as memories; returns the transcript."""
    history: list[dict[str, Any]] = []
    for text in turns:
        run_turn(client, model, svc, app, user_id, history, text, project_id)
    store_session(svc, app, user_id, session_id, history, project_id)
    return history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("turns", nargs="*", default=["I prefer dark mode.", "What do I prefer?"])
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--data", default="./memray-data")
    parser.add_argument("--mode", default="inprocess", choices=["inprocess", "ray"])
    parser.add_argument("--app", default="agent-demo")
    parser.add_argument("--user", default="demo-user")
    parser.add_argument("--project", default=None)
    parser.add_argument("--session", default=None)
    args = parser.parse_args(argv)
    client = OpenAI(base_url=args.base_url, api_key=os.environ.get("OPENAI_API_KEY", "not-needed"))
    with memray.open(args.data, mode=args.mode) as mem:
        history = run_session(
            client,
            args.model,
            mem.memory_service,
            args.app,
            args.user,
            args.session or uuid.uuid4().hex,
            args.turns,
            args.project,
        )
    for message in history:
        content = message.get("content") or json.dumps(message.get("tool_calls"))
        print(f"{message['role']:>9}: {content}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
