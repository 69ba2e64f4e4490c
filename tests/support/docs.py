"""The examples a Markdown page shows, and running them as a reader would.

What counts as an example (each fenced block, in page order):

- a ```python block: run with this checkout's Python; the block that follows it (```text or a
  bare fence, optionally after a line ``Output:``) is what it prints on stdout;
- a ```console block: a transcript. Each line starting with ``$ `` is a command, run by bash
  (``memray`` and ``python`` are this checkout's); the lines after it, up to the next ``$``, are
  what it prints (stdout and stderr together, as a terminal shows them).

How output is compared: exactly, except that ``...`` stands for any text (within a line or over
several lines: :data:`doctest.ELLIPSIS`), which is how a page writes a value that varies (a
time, a path, a size: ``"seconds": ...``), and that wall-clock times as memray prints them
(``2026-11-30 03:44 UTC``) are compared as times.

Where examples run: each in a new temporary folder (``examples/`` of this checkout reachable
there), run twice in it — a reader runs an example again, and it must print the same. A block
after the comment ``<!-- docs-test: same folder -->`` runs in the folder of the example before it,
after it (a transcript of the data a snippet made); the chain of them is run twice. A block that
cannot run here follows ``<!-- docs-test: skip: <why> -->``.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Example", "Chain", "chains", "compare", "ROOT"]

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```\n", re.S | re.M)
_MARK = re.compile(r"<!-- docs-test: (?P<what>.*?) -->\s*$")
_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})? UTC")
_CHECKER = doctest.OutputChecker()


@dataclass
class Example:
    where: str  # "README.md:32": the page and the line of the code
    kind: str  # "python" | "console"
    code: str
    expected: str | None  # python: what it prints (None: not shown); console: the whole transcript
    skip: str | None = None
    same_folder: bool = False

    def steps(self) -> list[tuple[str, str]]:
        """``(command, expected output)`` of a transcript, in order."""
        out: list[tuple[str, str]] = []
        for line in self.code.splitlines(keepends=True):
            if line.startswith("$ "):
                out.append((line[2:].rstrip("\n"), ""))
            elif out:
                out[-1] = (out[-1][0], out[-1][1] + line)
        return out


@dataclass
class Chain:
    """Examples that run in one folder, in order (the first, and those marked ``same folder``)."""

    examples: list[Example] = field(default_factory=list)

    @property
    def where(self) -> str:
        return self.examples[0].where

    @property
    def skip(self) -> str | None:
        return next((e.skip for e in self.examples if e.skip), None)

    def run(self, folder: Path) -> list[str]:
        """Run every example in ``folder``; the mismatches, described (empty: all as shown)."""
        problems: list[str] = []
        for example in self.examples:
            problems += _run(example, folder)
        return problems


def examples(page: Path) -> list[Example]:
    text = page.read_text(encoding="utf-8")
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name
    found: list[Example] = []
    fences = list(_FENCE.finditer(text))
    used: set[int] = set()
    for i, fence in enumerate(fences):
        lang = fence.group("lang")
        if i in used or lang not in ("python", "console"):
            continue
        marks = _marks(text, fence.start())
        example = Example(
            f"{name}:{text.count(chr(10), 0, fence.start('body')) + 1}",
            lang,
            fence.group("body"),
            fence.group("body") if lang == "console" else None,
            next((m[len("skip: ") :] for m in marks if m.startswith("skip: ")), None),
            "same folder" in marks,
        )
        if lang == "python" and i + 1 < len(fences):
            after = fences[i + 1]
            between = text[fence.end() : after.start()]
            if after.group("lang") in ("", "text") and re.fullmatch(r"\s*(Output:\s*)?", between):
                example.expected = after.group("body")
                used.add(i + 1)
        found.append(example)
    return found


def chains(page: Path) -> list[Chain]:
    out: list[Chain] = []
    for example in examples(page):
        if example.same_folder and out:
            out[-1].examples.append(example)
        else:
            out.append(Chain([example]))
    return out


def compare(expected: str, got: str) -> bool:
    """``got`` is what ``expected`` shows (``...`` for any text; times as times)."""
    want, have = _TIME.sub("<time>", expected), _TIME.sub("<time>", got)
    return _CHECKER.check_output(want, have, doctest.ELLIPSIS)


def _marks(text: str, fence_start: int) -> list[str]:
    """The ``docs-test`` comments on the lines right above a fence."""
    lines = text[:fence_start].splitlines()
    marks: list[str] = []
    while lines and (match := _MARK.match(lines[-1])):
        marks.append(match.group("what").strip())
        lines.pop()
    return marks


def _env() -> dict[str, str]:
    bin_dir = os.path.dirname(sys.executable)  # memray, python: this checkout's
    return {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run(example: Example, folder: Path) -> list[str]:
    link = folder / "examples"
    if not link.exists():
        link.symlink_to(ROOT / "examples")
    if example.kind == "python":
        out = subprocess.run(
            [sys.executable, "-c", example.code], cwd=folder, env=_env(), capture_output=True, text=True, timeout=600
        )
        if out.returncode != 0:
            return [f"{example.where} failed (exit {out.returncode}):\n{out.stderr[-3000:]}"]
        if out.stderr:
            return [f"{example.where} printed on stderr:\n{out.stderr[-3000:]}"]
        if example.expected is not None and not compare(example.expected, out.stdout):
            return [f"{example.where} printed something else:\n{_diff(example.expected, out.stdout)}"]
        return []
    problems = []
    for command, expected in example.steps():
        out = subprocess.run(
            ["bash", "-c", command],
            cwd=folder,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )
        if not compare(expected, out.stdout):
            problems.append(f"{example.where}: `$ {command}` printed something else:\n{_diff(expected, out.stdout)}")
    return problems


def _diff(expected: str, got: str) -> str:
    example = doctest.Example("", _TIME.sub("<time>", expected))
    return _CHECKER.output_difference(example, _TIME.sub("<time>", got), doctest.ELLIPSIS)
