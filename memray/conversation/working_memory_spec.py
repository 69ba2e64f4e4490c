"""A working-memory note's shape: :class:`WorkingMemorySpec` (scope, format, schema or template),
:class:`WorkingMemoryValue`, and the append rules (:func:`deep_merge`, :func:`append_text`).

Formats: ``json`` (an object, optionally validated by a pydantic model or a JSON Schema),
``markdown`` (optionally following a template) and free ``text``. Appending:

* JSON: objects merge recursively, arrays concatenate without structural duplicates (two
  elements are the same when their canonical JSON is), scalars and ``null`` replace;
* Markdown and text: the new text follows the old after a blank line.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from memray.errors import ValidationError
from memray.store.base import WMScope

__all__ = [
    "WMFormat",
    "WMMode",
    "MODES",
    "WorkingMemorySpec",
    "WorkingMemoryValue",
    "translate",
    "deep_merge",
    "append_text",
]

WMFormat = Literal["json", "markdown", "text"]
WMMode = Literal["append", "replace"]
MODES: tuple[WMMode, ...] = ("append", "replace")


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
            raise translate(exc, "working_memory") from exc

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


def translate(exc: pydantic.ValidationError, prefix: str) -> ValidationError:
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


def append_text(old: str | None, new: str) -> str:
    if not old or not old.strip():
        return new
    return f"{old.rstrip()}\n\n{new.strip()}"
