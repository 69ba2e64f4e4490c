"""Checks that a value is something the store can hold, run before anything is acknowledged.

The store writes text as UTF-8 (DuckDB, Arrow, Parquet), JSON as strict JSON, and times as
finite doubles. A value that passes the model's types but breaks one of these rules — a lone
surrogate (``"a\\ud800b"``: a str that no UTF-8 encoder accepts), ``float("nan")`` or
``float("inf")``, an object that ``json`` cannot serialise — is rejected here with a
:class:`~memray.errors.ValidationError` naming the field, the value and what to do.

Policy on lone surrogates: **rejected, never replaced**. Replacing would store something other
than what was acknowledged; the caller decides how to repair its text (the error says how).
"""

from __future__ import annotations

import json
import math
from typing import Any

from memray.errors import ValidationError

__all__ = ["check_text", "check_finite", "json_text", "SURROGATE_HINT"]

SURROGATE_HINT = (
    "decode the text properly, or replace what cannot be encoded: s.encode('utf-8', 'replace').decode('utf-8')"
)


def _surrogate_problem(value: str) -> str:
    pos = next(i for i, ch in enumerate(value) if 0xD800 <= ord(ch) <= 0xDFFF)
    return f"holds a lone surrogate {value[pos]!r} at position {pos}, which UTF-8 cannot encode"


def check_text(field: str, value: str | None) -> str | None:
    """``value`` if it encodes as UTF-8 (or is None); else a ValidationError naming ``field``."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(field, value, _surrogate_problem(value), SURROGATE_HINT) from None
    return value


def check_finite(field: str, value: float) -> float:
    """``value`` if it is a finite number; else a ValidationError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(field, value, f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValidationError(field, value, "must be a finite number", "pass Unix seconds, e.g. time.time()")
    return float(value)


def json_text(field: str, value: Any) -> str:
    """``value`` as strict JSON text that encodes as UTF-8 (what the store writes), or a
    ValidationError naming ``field`` — and, for a dict or list, the key or index at fault."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        return text
    except (TypeError, ValueError, RecursionError) as exc:
        raise _json_error(field, value, exc) from None


def _json_error(field: str, value: Any, exc: BaseException, depth: int = 0) -> ValidationError:
    """The most precise error: descend into the first member that fails on its own."""
    if depth > 32 or isinstance(exc, RecursionError):
        return ValidationError(
            field, "<nested>", "is nested too deeply or refers to itself", "pass a tree of plain JSON values"
        )
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                if isinstance(k, (int, float, bool)) or k is None:
                    continue  # json writes these keys as strings: not an error
                return ValidationError(f"{field}[{k!r}]", k, f"has a key of type {type(k).__name__}", "use string keys")
            if _fails(k):
                return ValidationError(f"{field} key", k, _surrogate_problem(k), SURROGATE_HINT)
            if _fails(v):
                return _json_error(f"{field}[{k!r}]", v, exc, depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if _fails(v):
                return _json_error(f"{field}[{i}]", v, exc, depth + 1)
    if isinstance(value, str):
        return ValidationError(field, value, _surrogate_problem(value), SURROGATE_HINT)
    if isinstance(value, float):
        return ValidationError(field, value, "is NaN or infinite, which JSON cannot hold", "use null or a string")
    if "Circular" in str(exc):
        return ValidationError(field, "<circular>", "refers to itself", "pass a tree of plain JSON values")
    return ValidationError(
        field,
        value,
        f"is not JSON-serialisable ({type(value).__name__})",
        "pass plain JSON values: str, int, float, bool, None, list, dict",
    )


def _fails(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return True
    return False
