"""Working memory: a note the agent keeps about a conversation (or a user), always in its prompt.

Its shape and append rules are :mod:`memray.conversation.working_memory_spec`; what the model
is told about it is :mod:`memray.conversation.instructions`. Updates ``append`` by default
everywhere (this API and the model's tool agree); ``replace`` overwrites the whole note.
Validation runs on the merged result; if it fails nothing is written and the old value stays.
Every write is a compare-and-set on the stored version: a caller that passes
``expected_version`` gets :class:`~memray.errors.ConflictError` when it is stale; a caller that
does not is re-read, re-merged and retried, so concurrent appends never overwrite each other.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pydantic
from pydantic import BaseModel

from memray.conversation.instructions import TOOL_NAMES, render_instructions, tool_definitions
from memray.conversation.working_memory_spec import (
    MODES,
    WMMode,
    WorkingMemorySpec,
    WorkingMemoryValue,
    append_text,
    deep_merge,
)
from memray.errors import ConflictError, MemrayError, StoreError, ValidationError
from memray.ids import validate_id
from memray.store.partitions import StorePartitions

__all__ = ["WorkingMemory"]


class WorkingMemory:
    """The working memory of one conversation (scope ``conversation``) or of its user (scope
    ``user``, shared by all the user's conversations). Talks to the history store through
    ``get_working_memory`` / ``put_working_memory`` (compare-and-set on version)."""

    def __init__(
        self,
        store: StorePartitions,
        app: str,
        user_id: str,
        conversation_id: str,
        spec: WorkingMemorySpec | None = None,
        max_retries: int = 16,
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
        if mode not in MODES:
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
                    f"{expected_version}; re-read it and retry",
                    expected_version,
                    current.version,
                )
            new_content = apply(current.content)
            try:
                version = await self.store.put_working_memory(
                    self.app,
                    self.user_id,
                    self.spec.scope,
                    self._scope_conversation,
                    self._encode(new_content),
                    current.version,
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
                raise ValidationError(
                    "content", content, f"is not valid JSON ({exc.msg})", "pass a JSON object"
                ) from exc
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
        return append_text(old if isinstance(old, str) else None, new)

    def _validate(self, value: dict[str, Any] | str) -> None:
        size = len(self._encode(value) or "")
        if size > self.spec.max_chars:
            raise ValidationError(
                "content",
                f"<{size} characters>",
                f"the note would exceed {self.spec.max_chars} characters",
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
                    "content",
                    value,
                    f"after the merge, {where}: {errors[0].message}",
                    "the old value was kept; fix the update to match the schema",
                )
            return
        try:
            schema.model_validate(value)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise ValidationError(
                "content",
                value,
                f"after the merge, {where}: {first['msg']}",
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
            raise ValidationError(
                "arguments", arguments, f"are not valid JSON ({exc.msg})", "send a JSON object"
            ) from exc
    if not isinstance(arguments, dict):
        raise ValidationError("arguments", arguments, "must be a JSON object")
    return arguments
