"""What memray says it offers is there: every ``__all__`` in the package names only what its module
has, and the public API the specification promises users (its "Public API" section: the names
users code against) exists on a real ``Memory``, with the parameters it shows (each call's asyncio
twin is held by ``tests/test_public_api.py``).

A refactor that renames or drops a promised call or parameter fails here; one that is meant has
to keep the old spelling, deprecated (and then this list says so).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import memray

MODULES = ["memray", *sorted(m.name for m in pkgutil.walk_packages(memray.__path__, "memray."))]


def test_every_all_names_what_its_module_has() -> None:
    checked, wrong = 0, []
    for name in MODULES:
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        if exported is None:
            continue
        checked += 1
        if not all(isinstance(e, str) for e in exported) or len(set(exported)) != len(exported):
            wrong.append(f"{name}.__all__ holds a repeated or non-string entry: {exported!r}")
        wrong += [f"{name}.__all__ names {e!r}, which {name} does not have" for e in exported if not hasattr(module, e)]
    assert checked > 100  # nearly every module declares its exports
    assert wrong == [], "\n".join(wrong)


#: The specification's public API: (where, name, the parameters it shows). ``memray`` is the
#: package, the other owners are the objects a user holds (a Memory, a conversation handle, its
#: working memory, the long-term service).
PROMISED: list[tuple[str, str, set[str]]] = [
    ("memray", "open", {"path", "mode", "config"}),
    ("memray", "MemoryConfig", set()),
    ("memray", "Message", set()),
    ("memray", "MemoryEntry", {"content", "author"}),
    ("memray", "SearchRequest", {"query", "user_id", "app_name"}),
    ("memray", "validate_project_id", set()),
    ("mem", "conversation", {"user_id", "conversation_id", "app"}),
    ("mem", "add_many", set()),
    ("mem", "delete_user", {"app", "user_id"}),
    ("mem", "verify_deleted", {"app", "user_id"}),
    ("mem", "memory_service", set()),
    ("mem", "context_many", set()),
    ("mem", "search_many", set()),
    ("mem", "close", set()),
    ("mem", "__enter__", set()),
    ("conv", "add", {"messages", "durable"}),
    ("conv", "flush", set()),
    ("conv", "messages", {"limit", "before_seq", "after_seq", "roles"}),
    ("conv", "context", {"limit", "semantic_limit", "merge"}),
    ("conv", "search", {"limit", "min_score"}),
    ("conv", "working_memory", set()),
    ("conv", "summary", set()),
    ("conv", "delete", set()),
    ("working_memory", "get", set()),
    ("working_memory", "update", {"content", "mode"}),
    ("working_memory", "clear", set()),
    ("working_memory", "instructions", set()),
    ("working_memory", "tools", set()),
    ("service", "add_session", set()),
    ("service", "search", set()),
]


@pytest.fixture(scope="module")
def owners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    path = Path(tmp_path_factory.mktemp("exports"))
    with memray.open(str(path), mode="inprocess", hosts=1, shards=1) as mem:
        conv = mem.conversation(user_id="u1", conversation_id="c1", app="default")
        yield {
            "memray": memray,
            "mem": mem,
            "conv": conv,
            "working_memory": conv.working_memory,
            "service": mem.memory_service,
        }


@pytest.mark.parametrize("owner,name,params", PROMISED, ids=[f"{o}.{n}" for o, n, _ in PROMISED])
def test_the_promised_api_is_there(owners: dict[str, object], owner: str, name: str, params: set[str]) -> None:
    assert hasattr(owners[owner], name), f"{owner}.{name} is gone: users call it (keep it, deprecated at most)"
    if params:
        taken = set(inspect.signature(getattr(owners[owner], name)).parameters)
        assert params <= taken, f"{owner}.{name} no longer takes {sorted(params - taken)}"
