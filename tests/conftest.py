"""Fixtures shared by every test package: one local Ray for the session, the fake OpenAI server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.openai_server import FakeOpenAIServer
from tests.support.serve import served  # noqa: F401  (the Serve app the server tests share)

os.environ.setdefault("RAY_DEDUP_LOGS", "0")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        help="also run the tests marked long (each 15 s or more); CI=true runs them too",
    )


def runs_long(config: pytest.Config) -> bool:
    """Whether this run includes the tests marked ``long``: with ``--long``, or in CI (``.ci/run``
    sets ``CI=true``), where the whole suite runs."""
    return bool(config.getoption("--long")) or os.environ.get("CI", "").lower() in ("1", "true")


def pytest_report_header(config: pytest.Config) -> str:
    if runs_long(config):
        return "tests marked long: included (--long or CI=true)"
    return "tests marked long (scenarios of 15 s or more): left out; --long or CI=true runs them"


def _named(config: pytest.Config) -> list[str]:
    """The tests the command line names (``path::test``), as node ids (relative to the root)."""
    out = []
    for arg in config.args:
        path, sep, rest = arg.partition("::")
        if sep:
            out.append(f"{Path(os.path.relpath(os.path.abspath(path), config.rootpath)).as_posix()}::{rest}")
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``long`` are whole scenarios of 15 s or more each (a Ray cluster or process
    of their own, a fault or soak run, the type checker): 24 tests, a third of the suite's
    test-seconds. The default run leaves them out (deselected; the header says so, as xdist's
    summary does not count what its workers deselect) so that it gives its answer in about ten
    minutes; ``--long`` or ``CI=true`` runs them, first, and so does naming one
    (``pytest tests/runtime/test_multinode.py::test_...``).

    With ``-n 2 --dist loadfile --no-loadscope-reorder`` the workers take whole files, in the
    order of their first test, so the files holding long tests go first. xdist's own order (most
    tests first) ran the one-test mypy file last, a minute on one worker while the other had
    nothing left to do; longest-first is the classic fix. Within a file the long test runs first
    and the file's other tests right after it, so a module-scoped fixture is still set up once."""
    if not runs_long(config):
        named = tuple(_named(config))  # a test asked for by name runs
        kept: list[pytest.Item] = []
        left_out: list[pytest.Item] = []
        for item in items:
            long = item.get_closest_marker("long") is not None and not item.nodeid.startswith(named)
            (left_out if long else kept).append(item)
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = kept
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One local Ray for the whole test session (with ``-n 2``, one per worker process: each
    starts its own): 2 CPUs, as on the CI machine, with the settings memray starts its own local
    Ray with."""
    import ray

    from memray.runtime.actors import RAY_SYSTEM_CONFIG

    ray.init(
        address="local",  # a Ray of its own, not one another process started on this machine
        num_cpus=2,
        namespace="memray-tests",
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=True,
        _system_config=RAY_SYSTEM_CONFIG,
    )
    yield
    ray.shutdown()


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    """A fresh fake OpenAI-compatible server (64-dim embeddings, echo chat replies) per test.

    Point the client or an embedder at ``openai_server.url``; script failures with
    ``fail_next`` / ``fail_always`` / ``hang_next``; inspect ``requests``. Set ``reply`` to a
    function of the request body to control chat answers.
    """
    with FakeOpenAIServer() as server:
        yield server
