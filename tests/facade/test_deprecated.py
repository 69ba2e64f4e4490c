"""Every name the long-term service answered to before it had one way to do each thing still
works, and warns naming its replacement, at the caller's line, in its sync and its async form.
No code of memray's own (the package, jobs, examples, benchmarks) calls one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memray
from memray import MemoryEntry, SearchRequest

ROOT = Path(__file__).resolve().parents[2]


def entry(id_: str, text: str) -> MemoryEntry:
    return MemoryEntry(id=id_, content=text)


def ids(mem: memray.Memory, app: str, project: str | None = None) -> set[str]:
    """Ids of the user's entries in exactly one scope."""
    scope = mem.memory_service if project is None else mem.memory_service.for_project(project)
    return {r.entry.id for r in scope.list_entries(app, "u")}


def call(form: str, obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``obj.name(...)`` (sync) or ``await obj.aname(...)`` on a fresh event loop (async)."""
    if form == "sync":
        return getattr(obj, name)(*args, **kwargs)

    async def caller() -> Any:
        return await getattr(obj, "a" + name)(*args, **kwargs)

    return asyncio.run(caller())


def setup_scopes(mem: memray.Memory, app: str) -> None:
    svc = mem.memory_service
    svc.add_entries(app, "u", [entry("g1", "kiwi smoothie"), entry("g2", "banana bread")], session_id="s1")
    svc.for_project("P").add_entries(app, "u", [entry("p1", "kiwi tart"), entry("p2", "fig jam")], session_id="s2")


#: (deprecated name, the words its warning must contain, the call, what must hold after it)
Case = tuple[str, str, Callable[[memray.Memory, str, str], Any], Callable[[memray.Memory, str, Any], None]]

CASES: list[Case] = [
    (
        "add_session",
        "add_entries(app, user_id, entries, session_id=session_id, replace_session=True)",
        lambda mem, app, form: call(form, mem.memory_service, "add_session", app, "u", "s1", [entry("n", "new")]),
        lambda mem, app, got: (got == ["n"] and ids(mem, app) == {"n"}) or pytest.fail(f"{got} {ids(mem, app)}"),
    ),
    (
        "add_session_to_project",
        "for_project(project_id).add_entries(",
        lambda mem, app, form: call(
            form, mem.memory_service, "add_session_to_project", app, "u", "s2", "P", [entry("n", "new")]
        ),
        lambda mem, app, got: (ids(mem, app, "P") == {"n"} and ids(mem, app) == {"g1", "g2"}) or pytest.fail(),
    ),
    (
        "add_entry_to_project",
        "for_project(project_id).add_entry(app, user_id, entry)",
        lambda mem, app, form: call(form, mem.memory_service, "add_entry_to_project", app, "u", "P", entry("n", "x")),
        lambda mem, app, got: (got == "n" and ids(mem, app, "P") == {"p1", "p2", "n"}) or pytest.fail(),
    ),
    (
        "delete_entries_by_id",
        "delete_entries(app, user_id, ids=ids)",
        lambda mem, app, form: call(form, mem.memory_service, "delete_entries_by_id", app, "u", ["g1", "p1"]),
        lambda mem, app, got: (
            (got["entries"] == 2 and ids(mem, app) | ids(mem, app, "P") == {"g2", "p2"}) or pytest.fail()
        ),
    ),
    (
        "delete_entries_in_project",
        "for_project(project_id).delete_entries(app, user_id, query)",
        lambda mem, app, form: call(form, mem.memory_service, "delete_entries_in_project", app, "u", "P", "kiwi"),
        lambda mem, app, got: (ids(mem, app, "P") == {"p2"} and ids(mem, app) == {"g1", "g2"}) or pytest.fail(),
    ),
    (
        "delete_project",
        "for_project(project_id).delete_entries(app, user_id, everything=True)",
        lambda mem, app, form: call(form, mem.memory_service, "delete_project", app, "u", "P"),
        lambda mem, app, got: (got["entries"] == 2 and ids(mem, app, "P") == set()) or pytest.fail(),
    ),
    (
        "delete_session",
        "delete_entries(app, user_id, session_id=session_id)",
        lambda mem, app, form: call(form, mem.memory_service, "delete_session", app, "u", "s2"),
        lambda mem, app, got: (ids(mem, app, "P") == set() and ids(mem, app) == {"g1", "g2"}) or pytest.fail(),
    ),
    (
        "delete_user",
        "mem.delete_user(",
        lambda mem, app, form: call(form, mem.memory_service, "delete_user", app=app, user_id="u"),
        lambda mem, app, got: (
            (got.counts["entries"] == 4 and mem.verify_deleted(app=app, user_id="u").clean) or pytest.fail()
        ),
    ),
    (
        "verify_deleted",
        "mem.verify_deleted(",
        lambda mem, app, form: call(form, mem.memory_service, "verify_deleted", app=app, user_id="u"),
        lambda mem, app, got: (got.clean is False and got.remaining["entries"] == 4) or pytest.fail(),
    ),
    (
        "ProjectView.add_session",
        "add_entries(app, user_id, entries, session_id=session_id, replace_session=True)",
        lambda mem, app, form: call(form, mem.memory_service.for_project("P"), "add_session", app, "u", "s2", ["x"]),
        lambda mem, app, got: (len(got) == 1 and ids(mem, app, "P") == set(got)) or pytest.fail(),
    ),
    (
        "add_entries(project_id=...)",
        "for_project(project_id).add_entries(...)",
        lambda mem, app, form: call(form, mem.memory_service, "add_entries", app, "u", [entry("n", "x")], "P"),
        lambda mem, app, got: (ids(mem, app, "P") == {"p1", "p2", "n"}) or pytest.fail(),
    ),
    (
        "list_entries(project_id=...)",
        "for_project(project_id).list_entries(...)",
        lambda mem, app, form: call(form, mem.memory_service, "list_entries", app, "u", "P"),
        lambda mem, app, got: ({r.entry.id for r in got} == {"p1", "p2"}) or pytest.fail(),
    ),
    (
        "list_recent(project_id=...)",
        "for_project(project_id).list_recent(...)",
        lambda mem, app, form: call(form, mem.memory_service, "list_recent", app, "u", 10, "P"),
        lambda mem, app, got: ({r.entry.id for r in got} == {"g1", "g2", "p1", "p2"}) or pytest.fail(),
    ),
]


@pytest.mark.parametrize("form", ["sync", "async"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_deprecated_name_warns_naming_its_replacement_and_still_works(
    mem: memray.Memory, app: str, case: Case, form: str
) -> None:
    _, replacement, run, holds = case
    setup_scopes(mem, app)
    with pytest.warns(DeprecationWarning, match=re.escape(replacement)) as caught:
        got = run(mem, app, form)
    holds(mem, app, got)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in deprecations]  # one warning, not one per layer
    assert deprecations[0].filename == __file__  # at the caller's line, so Python's default filter shows it


def test_the_new_names_do_not_warn(mem: memray.Memory, app: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        setup_scopes(mem, app)
        svc, view = mem.memory_service, mem.memory_service.for_project("P")
        view.add_entries(app, "u", ["again"], session_id="s2", replace_session=True)
        view.add_entry(app, "u", entry("n", "new"))
        assert view.search(SearchRequest(query="kiwi", user_id="u", app_name=app)).memories
        assert view.list_recent(app, "u") and view.list_entries(app, "u", limit=5)
        svc.delete_entries(app, "u", ids=["g1"])
        svc.delete_entries(app, "u", session_id="s1")
        view.delete_entries(app, "u", everything=True)
        assert ids(mem, app) == set() and ids(mem, app, "P") == set()


#: Deprecated names no code of memray's own may call (core calls of the same names are
#: ``_core.``/``service.`` calls of :class:`memray.service.MemoryService`, which is not deprecated).
DEPRECATED = re.compile(
    r"\.a?(add_session|add_session_to_project|add_entry_to_project|delete_entries_by_id|"
    r"delete_entries_in_project|delete_project|delete_session)\("
)


def test_no_code_of_memray_calls_a_deprecated_name() -> None:
    found = []
    for folder in ("memray", "jobs", "examples", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_relative_to(ROOT / "memray" / "facade") or path.name == "longterm.py":
                continue  # (where the names are defined)
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if DEPRECATED.search(line) and "_core." not in line:
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)
