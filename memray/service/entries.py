"""Long-term entries on their way in and out: parsing what callers give (:func:`coerce_entries`),
the delete predicate (:func:`entry_matches`), and what a shard keeps with an entry.

"Entries matching a query" (the ``delete_entries*`` calls): an entry matches when **every**
token of the query (:func:`memray.text.tokenize`: case-folded words, punctuation splits words,
CJK characters and bigrams) is among the entry's tokens. It is a predicate, not a ranking: no
score threshold, no embedding, so what it deletes is predictable and never more than the entries
that literally contain the query's words. A query with no tokens (``""``, ``"?!"``) is rejected
with :class:`~memray.errors.ValidationError`: ``for_project(P).delete_entries(...,
everything=True)`` deletes a whole project, ``mem.delete_user`` everything of a user.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from memray.errors import ValidationError
from memray.models import MemoryEntry, MemoryResult, check_entry
from memray.store.rows import EntryRow, row_to_entry
from memray.text import tokenize

__all__ = ["EntryInput", "coerce_entries", "entry_matches", "entry_payload", "unscored"]

EntryInput = MemoryEntry | dict[str, Any] | str


def coerce_entries(entries: Iterable[EntryInput] | EntryInput) -> list[MemoryEntry]:
    """Parse entries given as :class:`MemoryEntry`, dicts or plain strings (a string is the
    content of an entry authored by ``"user"``). Raises ValidationError naming the entry."""
    if isinstance(entries, (MemoryEntry, dict, str)):
        entries = [entries]
    out = []
    for i, value in enumerate(entries):
        if isinstance(value, MemoryEntry):
            out.append(value)
        elif isinstance(value, (dict, str)):
            data = {"content": value} if isinstance(value, str) else value
            try:
                out.append(MemoryEntry.model_validate(data))
            except ValidationError:
                raise
            except Exception as exc:  # pydantic's error: name the entry and the field
                raise _entry_error(i, exc, value) from exc
        else:
            raise ValidationError(
                f"entries[{i}]", value, f"must be a MemoryEntry, a dict or a str, got {type(value).__name__}"
            )
        check_entry(out[-1], f"entries[{i}]")  # what the store can hold: UTF-8, strict JSON, finite
    return out


def _entry_error(i: int, exc: Exception, value: Any) -> ValidationError:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        original = first.get("ctx", {}).get("error")
        if isinstance(original, ValidationError):
            return original
        loc = ".".join(str(p) for p in first.get("loc", ()))
        return ValidationError(
            f"entries[{i}].{loc}" if loc else f"entries[{i}]", first.get("input", value), first.get("msg", str(exc))
        )
    return ValidationError(f"entries[{i}]", value, str(exc))


def entry_matches(query_tokens: set[str], text: str) -> bool:
    """The delete predicate: every query token is among the text's tokens (module docstring)."""
    return bool(query_tokens) and query_tokens <= set(tokenize(text))


def entry_payload(entry: MemoryEntry, session_id: str | None, project_id: str | None) -> str:
    """What the shard keeps with an entry so a hit needs no store read."""
    return json.dumps(
        {"entry": entry.model_dump(mode="json"), "session_id": session_id, "project_id": project_id}, ensure_ascii=False
    )


def unscored(row: EntryRow) -> MemoryResult:
    """A stored entry as a result that is not a search hit (``score`` 0.0)."""
    return MemoryResult(entry=row_to_entry(row), score=0.0, session_id=row.session_id, project_id=row.project_id)
