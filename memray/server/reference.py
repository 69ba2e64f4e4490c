"""The REST and MCP reference of ``docs/server.md``, written from the operation table
(:mod:`memray.server.operations`): the page holds it between ``<!-- reference: rest -->`` (or
``mcp``) and ``<!-- /reference -->``, and ``tests/server/test_operations.py`` fails when the page
and the table disagree. ``python -m memray.server.reference`` rewrites the page from the table.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from memray.server.operation import Arg, Operation, Tool
from memray.server.operations import OPERATIONS, TOOLS

__all__ = ["rest_reference", "mcp_reference", "rewrite", "PAGE"]

#: The page that holds the reference.
PAGE = Path(__file__).resolve().parents[2] / "docs" / "server.md"
_BLOCK = re.compile(r"(<!-- reference: (rest|mcp) -->\n).*?(<!-- /reference -->)", re.S)


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else str(value)


def _shown(default: Any) -> str:
    return "null" if default is None else json.dumps(default)


def _choices(kind: Any) -> tuple[Any, ...]:
    """The values of a ``Literal`` type (or of an optional one); none for another type."""
    if get_origin(kind) is Literal:
        return get_args(kind)
    if get_origin(kind) in (Union, UnionType):
        return tuple(c for k in get_args(kind) for c in _choices(k))
    return ()


def describe(arg: Arg) -> str:
    """``name`` and what bounds it: ``limit`` (1–1,000; default ``5``)."""
    said = [" \\| ".join(f"`{c}`" for c in _choices(arg.type))] if _choices(arg.type) else []
    if arg.ge is not None and arg.le is not None:
        said.append(f"{_number(arg.ge)}–{_number(arg.le)}")
    elif arg.ge is not None:
        said.append(f"≥ {_number(arg.ge)}")
    if arg.max_length is not None:
        low = f"{arg.min_length}–" if arg.min_length else "≤ "
        said.append(f"length {low}{_number(arg.max_length)}")
    said.append("required" if arg.required else f"default `{_shown(arg.default)}`")
    return f"`{arg.name}` ({'; '.join(said)})"


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=\.)\s", text.replace("``", "`"), maxsplit=1)[0].rstrip(".")


def _where(op: Operation) -> str:
    if op.body is not None:
        return "body"
    return "query" if op.query_args else ""


def rest_reference() -> str:
    """One row per operation: its route, what it does, what its key must allow, its arguments."""
    rows = ["| route | what | key | arguments |", "| --- | --- | --- | --- |"]
    for op in OPERATIONS:
        args = ", ".join(describe(a) for a in op.args if a not in op.path_args)
        where = _where(op)
        rows.append(
            f"| `{op.method} {op.route}` | {_first_sentence(op.doc)} | {'write' if op.write else 'read'} "
            f"| {f'{where}: ' if args else ''}{args} |"
        )
    return "\n".join(rows) + "\n"


def _routes(tool: Tool) -> str:
    said: list[str] = []
    for branch in tool.branches:
        when = f"with `{branch.when}`" if branch.when else ("else" if said else "always")
        said.append(f"{when}: `{branch.operation.method} {branch.operation.route.removeprefix('/v1')}`")
        if branch.when is None:
            break
    return "; ".join(said)


_HINTS = {"read": "`readOnlyHint`", "write": "neither", "delete": "`destructiveHint`"}


def mcp_reference() -> str:
    """One row per tool: the operations it calls, its annotation, its arguments."""
    rows = ["| tool | calls (as REST) | annotation | arguments |", "| --- | --- | --- | --- |"]
    for tool in TOOLS:
        args = ", ".join(describe(a) for a in tool.args)
        rows.append(f"| `{tool.name}` | {_routes(tool)} | {_HINTS[tool.effect]} | {args} |")
    return "\n".join(rows) + "\n"


def rewrite(text: str) -> str:
    """``text`` (the page) with its reference blocks written from the table."""
    made = {"rest": rest_reference(), "mcp": mcp_reference()}
    return _BLOCK.sub(lambda m: m.group(1) + made[m.group(2)] + m.group(3), text)


def main() -> int:
    text = PAGE.read_text(encoding="utf-8")
    new = rewrite(text)
    if new != text:
        PAGE.write_text(new, encoding="utf-8")
        print(f"rewrote the reference in {PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
