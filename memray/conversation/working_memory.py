"""Working memory: a note the agent keeps about a conversation (or a user), always in its prompt.

Formats: ``json`` (an object, optionally validated by a pydantic model or a JSON Schema),
``markdown`` (optionally following a template) and free ``text``. Updates ``append`` by default
everywhere (this API and the model's tool agree):

* JSON: objects merge recursively, arrays concatenate without structural duplicates (two
  elements are the same when their canonical JSON is), scalars and ``null`` replace;
* Markdown and text: the new text follows the old after a blank line.

``replace`` overwrites the whole note. Validation runs on the merged result; if it fails nothing
is written and the old value stays. Every write is a compare-and-set on the stored version: a
caller that passes ``expected_version`` gets :class:`~memray.errors.ConflictError` when it is
stale; a caller that does not is re-read, re-merged and retried, so concurrent appends never
overwrite each other.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from memray.errors import ConflictError, MemrayError, StoreError, ValidationError
from memray.ids import validate_id
from memray.store.base import WMScope
from memray.store.client import StoreClient

__all__ = [
    "WMFormat",
    "WMMode",
    "WorkingMemorySpec",
    "WorkingMemoryValue",
    "WorkingMemory",
    "deep_merge",
    "render_instructions",
    "tool_definitions",
    "TOOL_NAMES",
]

WMFormat = Literal["json", "markdown", "text"]
WMMode = Literal["append", "replace"]
TOOL_NAMES = ("get_working_memory", "update_working_memory", "clear_working_memory")
_MODES = ("append", "replace")


class WorkingMemorySpec(BaseModel):
    """How a working memory is scoped, shaped and checked.

    ``format`` defaults from what is given: a ``schema`` means ``json``, a ``template`` means
    ``markdown``, neither means ``text``. ``schema`` is a pydantic model class or a JSON Schema
    dict (json only); ``template`` is a Markdown skeleton (markdown only). ``max_chars`` caps the
    stored note.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    scope: WMScope = "conversation"
    format: WMFormat = "text"
    schema_: type[BaseModel] | dict[str, Any] | None = Field(default=None, alias="schema")
    template: str | None = None
    max_chars: int = Field(100_000, gt=0)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise _translate(exc, "working_memory") from exc

    @model_validator(mode="before")
    @classmethod
    def _default_format(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("format") is None:
            data = {k: v for k, v in data.items() if k != "format"}
            if data.get("schema") is not None or data.get("schema_") is not None:
                data["format"] = "json"
            elif data.get("template") is not None:
                data["format"] = "markdown"
        return data

    @model_validator(mode="after")
    def _consistent(self) -> WorkingMemorySpec:
        if self.schema_ is not None:
            if self.format != "json":
                raise ValidationError("schema", self.schema_, f"applies to format 'json', not {self.format!r}")
            if isinstance(self.schema_, dict):
                try:
                    jsonschema.validators.validator_for(self.schema_).check_schema(self.schema_)
                except jsonschema.SchemaError as exc:
                    raise ValidationError("schema", self.schema_, f"is not a valid JSON Schema: {exc.message}") from exc
            elif not (isinstance(self.schema_, type) and issubclass(self.schema_, BaseModel)):
                raise ValidationError("schema", self.schema_, "must be a pydantic model class or a JSON Schema dict")
        if self.template is not None and self.format != "markdown":
            raise ValidationError("template", self.template, f"applies to format 'markdown', not {self.format!r}")
        return self

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema as a JSON Schema dict (a pydantic model's own schema), or None."""
        if self.schema_ is None:
            return None
        if isinstance(self.schema_, dict):
            return self.schema_
        return self.schema_.model_json_schema()


class WorkingMemoryValue(BaseModel):
    """The note and its version. ``content`` is a dict (json) or a string; None if never written."""

    model_config = ConfigDict(frozen=True)

    content: dict[str, Any] | str | None
    version: int

    @property
    def text(self) -> str | None:
        """The note as it is shown to a model (JSON is pretty-printed)."""
        if self.content is None or isinstance(self.content, str):
            return self.content
        return json.dumps(self.content, ensure_ascii=False, indent=2)


def _translate(exc: pydantic.ValidationError, prefix: str) -> ValidationError:
    """pydantic's error as ours: the ValidationError a validator raised, or one naming the field."""
    first = exc.errors()[0]
    original = first.get("ctx", {}).get("error")
    if isinstance(original, ValidationError):
        return original
    loc = ".".join(str(p) for p in first["loc"])
    return ValidationError(f"{prefix}.{loc}" if loc else prefix, first.get("input"), first["msg"])


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def deep_merge(old: Any, new: Any) -> Any:
    """Merge ``new`` into ``old``: objects recursively, arrays concatenated with structural
    dedupe (new elements whose canonical JSON already occurs are skipped), anything else
    (scalars, null, mismatched types) replaced by ``new``. Neither argument is modified."""
    if isinstance(old, dict) and isinstance(new, dict):
        merged = dict(old)
        for key, value in new.items():
            merged[key] = deep_merge(old[key], value) if key in old else value
        return merged
    if isinstance(old, list) and isinstance(new, list):
        seen = {_canonical(item) for item in old}
        out = list(old)
        for item in new:
            canon = _canonical(item)
            if canon not in seen:
                seen.add(canon)
                out.append(item)
        return out
    return new


def _append_text(old: str | None, new: str) -> str:
    if not old or not old.strip():
        return new
    return f"{old.rstrip()}\n\n{new.strip()}"


class WorkingMemory:
    """The working memory of one conversation (scope ``conversation``) or of its user (scope
    ``user``, shared by all the user's conversations). Talks to the history store through
    ``get_working_memory`` / ``put_working_memory`` (compare-and-set on version)."""

    def __init__(
        self, store: StoreClient, app: str, user_id: str, conversation_id: str,
        spec: WorkingMemorySpec | None = None, max_retries: int = 16,
    ) -> None:
        self.store = store
        self.app = validate_id("app", app)
        self.user_id = validate_id("user_id", user_id)
        self.conversation_id = validate_id("conversation_id", conversation_id)
        self.spec = spec if spec is not None else WorkingMemorySpec()
        self.max_retries = max_retries

    @property
    def _scope_conversation(self) -> str | None:
        return self.conversation_id if self.spec.scope == "conversation" else None

    # -- reads ---------------------------------------------------------------------------------
    async def get(self) -> WorkingMemoryValue:
        """The current note and its version (``content=None, version=0`` if never written)."""
        raw, version = await self.store.get_working_memory(
            self.app, self.user_id, self.spec.scope, self._scope_conversation
        )
        return WorkingMemoryValue(content=self._decode(raw), version=version)

    def value_of(self, raw: str | None, version: int) -> WorkingMemoryValue:
        """The value a stored ``raw`` string stands for (as :meth:`get` would return it)."""
        return WorkingMemoryValue(content=self._decode(raw), version=version)

    def _decode(self, raw: str | None) -> dict[str, Any] | str | None:
        if raw is None or self.spec.format != "json":
            return raw
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise StoreError(f"stored working memory of {self.user_id!r} is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise StoreError(f"stored working memory of {self.user_id!r} is not a JSON object")
        return value

    # -- writes --------------------------------------------------------------------------------
    async def update(
        self, content: Any, mode: WMMode = "append", expected_version: int | None = None
    ) -> WorkingMemoryValue:
        """Append (default) or replace, validate the result, then compare-and-set it.

        Raises ValidationError (field ``content`` or ``mode``; nothing written) or, when
        ``expected_version`` is given and stale, ConflictError."""
        if mode not in _MODES:
            raise ValidationError("mode", mode, "must be 'append' or 'replace'", "append is the safe default")
        incoming = self._parse(content)

        def apply(old: dict[str, Any] | str | None) -> dict[str, Any] | str:
            merged = self._merge(old, incoming) if mode == "append" else incoming
            self._validate(merged)
            return merged

        return await self._write(apply, expected_version)

    async def clear(self, expected_version: int | None = None) -> WorkingMemoryValue:
        """Erase the note (the version still advances)."""
        return await self._write(lambda old: None, expected_version)

    async def _write(self, apply: Any, expected_version: int | None) -> WorkingMemoryValue:
        for _attempt in range(self.max_retries):
            current = await self.get()
            if expected_version is not None and current.version != expected_version:
                raise ConflictError(
                    f"working memory of {self.user_id!r} is at version {current.version}, not "
                    f"{expected_version}; re-read it and retry", expected_version, current.version,
                )
            new_content = apply(current.content)
            try:
                version = await self.store.put_working_memory(
                    self.app, self.user_id, self.spec.scope,
                    self._scope_conversation, self._encode(new_content), current.version,
                )
            except ConflictError:
                if expected_version is not None:
                    raise
                continue  # another writer got in first: re-read, re-merge, retry
            return WorkingMemoryValue(content=new_content, version=version)
        raise ConflictError(
            f"working memory of {self.user_id!r} kept changing during {self.max_retries} attempts; retry later"
        )

    def _encode(self, content: dict[str, Any] | str | None) -> str | None:
        if content is None or isinstance(content, str):
            return content
        return json.dumps(content, ensure_ascii=False)

    def _parse(self, content: Any) -> dict[str, Any] | str:
        if self.spec.format != "json":
            if not isinstance(content, str):
                raise ValidationError("content", content, f"must be a string for format {self.spec.format!r}")
            return content
        if isinstance(content, BaseModel):
            content = content.model_dump(mode="json", exclude_unset=True)
        elif isinstance(content, str):
            try:
                content = json.loads(content)
            except json.JSONDecodeError as exc:
                raise ValidationError("content", content, f"is not valid JSON ({exc.msg})", "pass a JSON object") from exc
        if not isinstance(content, dict):
            raise ValidationError("content", content, "must be a JSON object for format 'json'")
        try:
            json.dumps(content, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError("content", content, f"is not JSON-serialisable ({exc})") from exc
        return content

    def _merge(self, old: dict[str, Any] | str | None, new: dict[str, Any] | str) -> dict[str, Any] | str:
        if isinstance(new, dict):
            return deep_merge(old if isinstance(old, dict) else {}, new)  # type: ignore[no-any-return]
        return _append_text(old if isinstance(old, str) else None, new)

    def _validate(self, value: dict[str, Any] | str) -> None:
        size = len(self._encode(value) or "")
        if size > self.spec.max_chars:
            raise ValidationError(
                "content", f"<{size} characters>", f"the note would exceed {self.spec.max_chars} characters",
                "condense it with mode='replace' or raise WorkingMemorySpec.max_chars",
            )
        schema = self.spec.schema_
        if schema is None:
            return
        if isinstance(schema, dict):
            errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(value), key=str)
            if errors:
                where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
                raise ValidationError(
                    "content", value, f"after the merge, {where}: {errors[0].message}",
                    "the old value was kept; fix the update to match the schema",
                )
            return
        try:
            schema.model_validate(value)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise ValidationError(
                "content", value, f"after the merge, {where}: {first['msg']}",
                "the old value was kept; fix the update to match the schema",
            ) from exc

    # -- prompt and tools --------------------------------------------------------------------
    async def instructions(self) -> str:
        """The system-prompt block: scope, update rules, the format, and the current note."""
        current = await self.get()
        return render_instructions(self.spec, current.text)

    def tools(self) -> list[dict[str, Any]]:
        """``get_working_memory``, ``update_working_memory``, ``clear_working_memory`` in OpenAI
        function-calling JSON."""
        return tool_definitions(self.spec)

    async def call_tool(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        """Run one tool call from a model. Bad arguments and failures come back as a string
        starting with ``Error:`` that the model can read and act on; this never raises for them."""
        try:
            args = _tool_args(arguments)
            if name == "get_working_memory":
                value = await self.get()
                return value.text if value.text is not None else "(working memory is empty)"
            if name == "update_working_memory":
                if "content" not in args:
                    return "Error: update_working_memory needs the argument 'content'."
                mode = args.get("mode", "append")
                value = await self.update(args["content"], mode=mode)
                return f"Working memory updated ({mode}); version {value.version}. Current content:\n{value.text}"
            if name == "clear_working_memory":
                value = await self.clear()
                return f"Working memory cleared; version {value.version}."
            return f"Error: unknown tool {name!r}; the working-memory tools are {', '.join(TOOL_NAMES)}."
        except MemrayError as exc:
            return f"Error: {exc}"


def _tool_args(arguments: str | dict[str, Any] | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ValidationError("arguments", arguments, f"are not valid JSON ({exc.msg})", "send a JSON object") from exc
    if not isinstance(arguments, dict):
        raise ValidationError("arguments", arguments, "must be a JSON object")
    return arguments


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
        "The JSON object to write. In append mode send only the fields that change; "
        "they are merged into the note."
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
                "enum": list(_MODES),
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
