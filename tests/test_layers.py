"""The layout, read from the source of the whole repository: ``memray/``, the job entry points in
``jobs/`` and ``benchmarks/``.

- Each top-level package imports only what it may (:data:`MAY_IMPORT`): memray imports neither
  ``jobs`` nor ``benchmarks``; they import memray, never ``tests``. ``jobs/`` holds entry points
  only: the jobs themselves are :mod:`memray.jobs`.
- Inside memray, dependencies point down the layers (:data:`LAYERS`), and no two packages import
  each other.
- No module imports its way back to itself, inside a package or across packages: a cycle of any
  length fails, naming each import that closes it (file, line, statement).
- Only the modules that make or drive Ray import it; every other module imports without it.

Every import statement counts, wherever it stands: at the top, inside a function (a lazy import
only moves the cycle from import time to call time, and a reader still has to read both modules
to understand either), and under ``if TYPE_CHECKING:`` (a cycle that exists only for the type
checker is still one for a reader: neither module can be read, moved or tested without the
other; the way out is to move the shared type below both, as ``memray.server.settings`` does).

Relative imports are resolved (so they cannot hide an edge) and then refused: the code is written
with absolute imports, which name the module they read, so that searching for
``memray.store.rows`` finds every user and a moved file keeps meaning what it meant.

Module size is not checked here: a module holds one idea, and one near 800 lines is a prompt to
look at whether it holds two (the house style), not a rule. Code is never compressed, nor split
where it only reads together, to meet a number.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import memray

ROOT = Path(memray.__file__).resolve().parent
REPO = ROOT.parent
MODULES = sorted(m.name for m in pkgutil.walk_packages(memray.__path__, "memray."))
RAY_MODULE = "memray.runtime.actors"
#: The Ray Serve application: it makes the replicas (actors) and drives Serve, so it imports ray too.
SERVE_MODULE = "memray.server.deployment"
#: The batch jobs drive Ray Data pipelines and read the cluster's free resources: they import ray.
JOBS_PART = "memray.jobs"

#: The code this file reads, and what each top-level package may import (besides the standard
#: library and third-party packages). ``tests`` and ``examples`` are first-party too: importing
#: them from here is refused.
MAY_IMPORT: dict[str, set[str]] = {
    "memray": {"memray"},
    "jobs": {"jobs", "memray"},
    "benchmarks": {"benchmarks", "memray"},
}
FIRST_PARTY = {*MAY_IMPORT, "tests", "examples"}

#: The architecture, bottom to top: a part may import its own layer and the layers below it.
LAYERS: list[set[str]] = [
    {
        "memray.errors",
        "memray.files",
        "memray.text",
        "memray.validation",
        "memray.metrics",
        "memray.progress",
        "memray.tracing",
    },
    {
        "memray.ids",
        "memray.models",
        "memray.config",
        "memray.arguments",
        "memray.sim_time",
        "memray.ranking",
        "memray.scoring",
    },
    {"memray.rpc"},  # call plumbing: refs, the event-loop thread, coalescing, the typed-client base
    {"memray.store"},
    {"memray.index"},
    {"memray.embedding"},
    {"memray.conversation"},
    {"memray.service"},
    {"memray.runtime"},  # deployments: the cores in-process or as Ray actors
    {"memray.facade"},
    {
        "memray",
        "memray.integrations",
        "memray.simulation",
        "memray.stats",
        "memray.cli",
        "memray.cli_args",
        "memray.jobs",
        "memray.server",
    },
]


@dataclass(frozen=True)
class Import:
    """One imported name: ``source`` imports ``target`` (the most specific module or package of
    this repository it names, else the name as written) at ``line`` of ``path``."""

    source: str
    target: str
    path: Path
    line: int
    statement: str  # the statement's text, on one line
    where: str  # "", "in f()" or "under TYPE_CHECKING"
    relative: bool

    def __str__(self) -> str:
        where = f" ({self.where})" if self.where else ""
        return f"{self.path.relative_to(REPO)}:{self.line}: {self.statement}{where}  [{self.source} -> {self.target}]"


def path_of(module: str) -> Path:
    parts = module.split(".")[1:]
    package = ROOT.joinpath(*parts)
    return package / "__init__.py" if package.is_dir() else package.with_suffix(".py")


@cache
def sources() -> dict[str, Path]:
    """Every module of ``memray/``, ``jobs/`` and ``benchmarks/``, by dotted name."""
    found: dict[str, Path] = {}
    for top in MAY_IMPORT:
        for path in sorted((REPO / top).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def part_of(module: str) -> str:
    """The node a module belongs to: its subpackage (memray.store) or itself (memray.models)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def top_of(module: str) -> str:
    return module.partition(".")[0]


def _known(name: str) -> str:
    """The most specific module or package of this repository that ``name`` names, else ``name``."""
    known, candidate = sources(), name
    while candidate and candidate not in known:
        candidate = candidate.rpartition(".")[0]
    return candidate or name


def _statements(nodes: Iterable[ast.AST], where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement in ``nodes``, at any depth, with where it stands."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, where
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from _statements(ast.iter_child_nodes(node), where or f"in {node.name}()")
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _statements(node.body, "under TYPE_CHECKING")
            yield from _statements(node.orelse, where)
        else:
            yield from _statements(ast.iter_child_nodes(node), where)


@cache
def imports_of(module: str) -> list[Import]:
    """What ``module`` imports, one :class:`Import` per imported name; relative ones resolved."""
    path = sources()[module]
    return read_imports(module, path, path.read_text())


def read_imports(module: str, path: Path, text: str) -> list[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node, where in _statements(ast.parse(text).body, ""):
        statement = " ".join((ast.get_source_segment(text, node) or "").split())
        if isinstance(node, ast.Import):
            targets = [_known(alias.name) for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                assert anchor, f"{path.relative_to(REPO)}:{node.lineno}: {statement} climbs above the repository"
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            named = (f"{base}.{alias.name}" for alias in node.names)  # a module, or a name in base
            targets = [name if name in sources() else _known(base) for name in named]
        found += [
            Import(module, target, path, node.lineno, statement, where, bool(getattr(node, "level", 0)))
            for target in dict.fromkeys(targets)
            if target != module
        ]
    return found


def all_imports() -> list[Import]:
    return [imp for module in sources() for imp in imports_of(module)]


def inner_imports() -> list[Import]:
    """The imports from one module of this repository to another."""
    return [imp for imp in all_imports() if imp.target in sources()]


def test_the_reading_sees_every_kind_of_import() -> None:
    """The reader itself, so that the checks below cannot pass by reading nothing: lazy,
    TYPE_CHECKING and relative imports are seen, and a name is resolved to its module."""
    probe = textwrap.dedent(
        """
        from typing import TYPE_CHECKING
        from . import flat
        from ..store.rows import MessageRow
        from .base import *
        if TYPE_CHECKING:
            from memray.index.space import Space
        def later():
            import memray.runtime.actors
        """
    )
    seen = read_imports("memray.index.probe", ROOT / "index" / "probe.py", probe)
    assert [(imp.target, imp.where, imp.relative) for imp in seen] == [
        ("typing", "", False),
        ("memray.index.flat", "", True),
        ("memray.store.rows", "", True),
        ("memray.index.base", "", True),
        ("memray.index.space", "under TYPE_CHECKING", False),
        ("memray.runtime.actors", "in later()", False),
    ]
    assert str(seen[2]) == (
        "memray/index/probe.py:4: from ..store.rows import MessageRow  [memray.index.probe -> memray.store.rows]"
    )
    assert len(sources()) > 150 and {"memray.cli", "jobs.backfill_embeddings", "benchmarks.reembed"} <= set(sources())
    assert {"memray.jobs.backfill_embeddings", "memray.cli_args"} <= {imp.target for imp in imports_of("memray.cli")}


def test_no_relative_imports() -> None:
    relative = [str(imp) for imp in all_imports() if imp.relative]
    assert relative == [], "write these imports absolute (memray.x.y, not .y):\n" + "\n".join(relative)


def test_each_top_level_package_imports_only_what_it_may() -> None:
    wrong = [
        f"{imp}: {top_of(imp.source)} may import {', '.join(sorted(MAY_IMPORT[top_of(imp.source)]))} only"
        for imp in all_imports()
        if top_of(imp.target) in FIRST_PARTY and top_of(imp.target) not in MAY_IMPORT[top_of(imp.source)]
    ]
    assert wrong == [], "imports across the repository's packages that point the wrong way:\n" + "\n".join(wrong)


def test_jobs_holds_entry_points_only() -> None:
    """The jobs' logic lives in memray.jobs (typed, tested, and what ``memray backfill`` runs);
    ``jobs/`` only names it for ``python -m`` and ``ray job submit``."""
    defined = [
        f"{path.relative_to(REPO)}:{node.lineno}: {node.name}"
        for module, path in sources().items()
        if top_of(module) == "jobs"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    assert defined == [], "move these into memray.jobs (jobs/ re-exports them):\n" + "\n".join(defined)


def part_graph() -> dict[str, dict[str, Import]]:
    """Between memray's parts: for each part, the parts it imports and one import that does."""
    graph: dict[str, dict[str, Import]] = {part_of(m): {} for m in sources() if top_of(m) == "memray"}
    for imp in inner_imports():
        if top_of(imp.source) == top_of(imp.target) == "memray" and part_of(imp.source) != part_of(imp.target):
            graph[part_of(imp.source)].setdefault(part_of(imp.target), imp)
    return graph


def graph_of(imports: Iterable[Import]) -> dict[str, dict[str, Import]]:
    """For each module, the modules it imports and the first import that does."""
    graph: dict[str, dict[str, Import]] = {}
    for imp in imports:
        graph.setdefault(imp.source, {}).setdefault(imp.target, imp)
        graph.setdefault(imp.target, {})
    return graph


def strongly_connected(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The groups of two or more nodes that reach one another (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group:
                groups.append(sorted([*group, node]))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def one_cycle(graph: dict[str, dict[str, Import]], group: list[str]) -> list[Import]:
    """A shortest cycle through ``group``'s first node, as the imports that make it."""
    start, members = group[0], set(group)
    came: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for target, imp in sorted(graph[node].items()):
                if target not in members or target in came:
                    continue
                came[target] = imp
                if target == start:
                    path = [imp]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                nxt.append(target)
        frontier = nxt
    raise AssertionError(f"no cycle through {start} in {group}")


def describe(graph: dict[str, dict[str, Import]], group: list[str]) -> str:
    lines = "\n".join(f"  {imp}" for imp in one_cycle(graph, group))
    return f"{len(group)} modules import one another ({', '.join(group)}); one circle:\n{lines}"


def test_no_package_cycle() -> None:
    graph = part_graph()
    cycles = [describe(graph, group) for group in strongly_connected(graph)]
    assert cycles == [], "packages that import each other:\n" + "\n".join(cycles)


def test_a_cycle_of_lazy_and_type_only_imports_is_found() -> None:
    """Three modules in a circle, closed by a function-level and a TYPE_CHECKING import."""
    texts = {
        "memray.errors": "def later():\n    from memray.files import atomic\n",
        "memray.files": "if TYPE_CHECKING:\n    import memray.text\n",
        "memray.text": "from memray import errors\n",
    }
    graph = graph_of(imp for m, text in texts.items() for imp in read_imports(m, path_of(m), text))
    assert strongly_connected(graph) == [sorted(texts)]
    assert describe(graph, sorted(texts)).splitlines() == [
        "3 modules import one another (memray.errors, memray.files, memray.text); one circle:",
        "  memray/errors.py:2: from memray.files import atomic (in later())  [memray.errors -> memray.files]",
        "  memray/files.py:2: import memray.text (under TYPE_CHECKING)  [memray.files -> memray.text]",
        "  memray/text.py:1: from memray import errors  [memray.text -> memray.errors]",
    ]


def test_no_import_cycle_between_modules() -> None:
    graph = graph_of(inner_imports())
    cycles = [describe(graph, group) for group in strongly_connected(graph)]
    assert cycles == [], "import cycles (move what both need below both, or merge them):\n" + "\n\n".join(cycles)


def test_every_import_points_down_the_layers() -> None:
    layer = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    graph = part_graph()
    assert set(graph) <= set(layer), f"parts missing from LAYERS: {set(graph) - set(layer)}"
    upward = [
        str(imp)
        for source, targets in graph.items()
        for target, imp in targets.items()
        if layer[target] > layer[source]
    ]
    assert upward == [], "imports that point up a layer:\n" + "\n".join(upward)


def test_only_the_modules_that_drive_ray_import_it() -> None:
    """The actors module, the Serve app and the batch jobs."""
    ray_imports = [
        imp for module in MODULES for imp in imports_of(module) if imp.target == "ray" or imp.target.startswith("ray.")
    ]
    importers = {imp.source for imp in ray_imports}
    assert {RAY_MODULE, SERVE_MODULE} <= importers
    wrong = [
        str(imp)
        for imp in ray_imports
        if imp.source not in (RAY_MODULE, SERVE_MODULE) and part_of(imp.source) != JOBS_PART
    ]
    assert wrong == [], "only memray.runtime.actors, the Serve app and memray.jobs import ray:\n" + "\n".join(wrong)


def test_every_module_but_the_actors_imports_without_ray() -> None:
    cores = [m for m in MODULES if m not in (RAY_MODULE, SERVE_MODULE)]
    code = textwrap.dedent(
        f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "ray" or name.startswith("ray."):
                    raise ImportError("ray is blocked for this test")
        sys.meta_path.insert(0, Block())
        import importlib
        for name in {cores!r}:
            importlib.import_module(name)
        assert not any(m == "ray" or m.startswith("ray.") for m in sys.modules)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
