"""What a model is told about its working memory: the system-prompt block
(:func:`render_instructions`) and the three tools (:func:`tool_definitions`, OpenAI
function-calling JSON, partial updates allowed).
"""

from __future__ import annotations

import json
from typing import Any

from memray.conversation.working_memory_spec import MODES, WorkingMemorySpec

__all__ = ["TOOL_NAMES", "render_instructions", "tool_definitions"]

TOOL_NAMES = ("get_working_memory", "update_working_memory", "clear_working_memory")

_SCOPE_TEXT = {
    "conversation": "conversation (this note belongs to this conversation only)",
    "user": "user (this note is shared by all of this user's conversations)",
}


def render_instructions(spec: WorkingMemorySpec, current: str | None) -> str:
    """The system-prompt block for ``spec`` with the note ``current`` (None: empty)."""
    lines = [
        "WORKING MEMORY",
        f"You keep a persistent working-memory note. Scope: {_SCOPE_TEXT[spec.scope]}.",
        "Record what must not be forgotten (names, preferences, goals, decisions, progress) with the",
        "tool update_working_memory as soon as you learn it; read it with get_working_memory.",
        "",
        "Update rules:",
        '- mode "append" (the default, safe): adds to the note without losing anything. JSON objects',
        "  merge field by field, lists gain the new items, other values are replaced; text is added",
        "  after a blank line. Send only what changes: partial updates are fine.",
        '- mode "replace" (destructive): overwrites the whole note; anything you leave out is lost.',
        "  Use it only to delete or restructure information.",
        "",
        *_format_lines(spec),
        "",
        "<current_context>",
        current if current else "(empty: start capturing important information now)",
        "</current_context>",
    ]
    return "\n".join(lines)


def _format_lines(spec: WorkingMemorySpec) -> list[str]:
    if spec.format == "json":
        schema = spec.json_schema
        if schema is None:
            return ["Format: a JSON object."]
        return ["Format: a JSON object matching this JSON Schema:", json.dumps(schema, ensure_ascii=False, indent=2)]
    if spec.format == "markdown":
        if spec.template is None:
            return ["Format: Markdown."]
        return ["Format: Markdown following this template:", spec.template.strip()]
    return ["Format: free text."]


def _partial(schema: Any) -> Any:
    """A copy of a JSON Schema with every ``required`` list removed (partial updates)."""
    if isinstance(schema, list):
        return [_partial(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "required":
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties"):
            out[key] = {name: _partial(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "allOf", "oneOf", "not", "prefixItems"):
            out[key] = _partial(value)
        else:
            out[key] = value
    return out


def _content_parameter(spec: WorkingMemorySpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``content`` parameter schema and any ``$defs`` to hoist to the parameters root."""
    if spec.format != "json":
        hint = f" following the template:\n{spec.template.strip()}" if spec.template else ""
        return {"type": "string", "description": f"The {spec.format} to write{hint}"}, {}
    schema = _partial(spec.json_schema or {"type": "object"})
    defs = schema.pop("$defs", {})  # refs are "#/$defs/...": they resolve at the parameters root
    schema.pop("$schema", None)
    schema.pop("title", None)
    schema["description"] = (
        "The JSON object to write. In append mode send only the fields that change; they are merged into the note."
    )
    return schema, defs


def tool_definitions(spec: WorkingMemorySpec) -> list[dict[str, Any]]:
    """The three working-memory tools in OpenAI function-calling JSON."""
    content, defs = _content_parameter(spec)
    update_params: dict[str, Any] = {
        "type": "object",
        "properties": {
            "content": content,
            "mode": {
                "type": "string",
                "enum": list(MODES),
                "default": "append",
                "description": "append (default, safe): merge into the note. replace (destructive): overwrite it all.",
            },
        },
        "required": ["content"],
    }
    if defs:
        update_params["$defs"] = defs
    empty: dict[str, Any] = {"type": "object", "properties": {}}
    return [
        _tool("get_working_memory", f"Read the {spec.scope} working-memory note.", empty),
        _tool(
            "update_working_memory",
            f"Write to the {spec.scope} working-memory note. Appends by default; partial updates are merged.",
            update_params,
        ),
        _tool("clear_working_memory", f"Erase the whole {spec.scope} working-memory note (destructive).", empty),
    ]


def _tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
