"""The layout: dependencies point one way, only the actors module (and the Serve app) imports Ray.

Read from the source (every import statement, at any depth, ``TYPE_CHECKING`` ones included),
so a new import that points up a layer, closes a loop between packages or brings ``ray`` into a
core fails here.

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
from collections.abc import Iterator
from pathlib import Path

import memray

ROOT = Path(memray.__file__).resolve().parent
MODULES = sorted(m.name for m in pkgutil.walk_packages(memray.__path__, "memray."))
RAY_MODULE = "memray.runtime.actors"
#: The Ray Serve application: it makes the replicas (actors) and drives Serve, so it imports ray too.
SERVE_MODULE = "memray.server.deployment"

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
    {"memray", "memray.integrations", "memray.simulation", "memray.stats", "memray.cli", "memray.server"},
]


def path_of(module: str) -> Path:
    parts = module.split(".")[1:]
    package = ROOT.joinpath(*parts)
    return package / "__init__.py" if package.is_dir() else package.with_suffix(".py")


def part_of(module: str) -> str:
    """The node a module belongs to: its subpackage (memray.store) or itself (memray.models)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def imports(module: str) -> Iterator[str]:
    """The memray modules and packages ``module`` imports, wherever the statement stands."""
    for node in ast.walk(ast.parse(path_of(module).read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def part_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        targets = {part_of(t) for t in imports(module) if t.startswith("memray.")}
        graph.setdefault(part_of(module), set()).update(targets - {part_of(module)})
    graph.setdefault("memray", set()).update(part_of(t) for t in imports("memray") if t.startswith("memray."))
    return graph


def test_no_package_cycle() -> None:
    graph = part_graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            assert state.get(nxt) != 1, "package cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_every_import_points_down_the_layers() -> None:
    layer = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    assert set(part_graph()) <= set(layer), f"parts missing from LAYERS: {set(part_graph()) - set(layer)}"
    upward = [
        (source, target)
        for source, targets in part_graph().items()
        for target in targets
        if layer[target] > layer[source]
    ]
    assert upward == [], f"imports that point up a layer: {upward}"


def test_only_the_actors_module_imports_ray() -> None:
    importers = [m for m in MODULES if any(t == "ray" or t.startswith("ray.") for t in imports(m))]
    assert importers == [RAY_MODULE, SERVE_MODULE]


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
