"""The garbage collector's first threshold in a process that opens memray (memray.runtime.collector)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

import memray
from memray.runtime import collector


@pytest.fixture(autouse=True)
def python_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from CPython's threshold with no memray counted open in this process
    (a test run earlier in the same worker may have left one open), and leaves the process as
    it found it."""
    kept = gc.get_threshold()
    monkeypatch.setattr(collector, "_open", 0)
    monkeypatch.setattr(collector, "_found", ())
    monkeypatch.setattr(collector, "_set", ())
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*kept)


def test_they_are_raised_never_lowered() -> None:
    assert collector.raise_thresholds(5_000) == (700, 10, 10)
    assert gc.get_threshold() == (5_000, *collector.OLDER_THRESHOLDS)
    higher = 5 * collector.OLDER_THRESHOLDS[0]  # a middle threshold set higher than memray's
    gc.set_threshold(5_000, higher, 10)
    assert collector.raise_thresholds(1_000) == (5_000, higher, 10)
    assert gc.get_threshold() == (5_000, higher, collector.OLDER_THRESHOLDS[1])


def test_the_threshold_comes_back_when_the_last_memray_open_here_closes(tmp_path: Path) -> None:
    raised = (collector.FIRST_THRESHOLD, *collector.OLDER_THRESHOLDS)
    first = memray.open(str(tmp_path / "a"), mode="inprocess")
    assert gc.get_threshold() == raised and first.config.gc_threshold == collector.FIRST_THRESHOLD
    second = memray.open(str(tmp_path / "b"), mode="inprocess")
    first.close()
    assert gc.get_threshold() == raised  # the second is still open
    second.close()
    assert gc.get_threshold() == (700, 10, 10)


def test_none_leaves_the_process_alone_and_a_threshold_set_meanwhile_stays(tmp_path: Path) -> None:
    mem = memray.open(str(tmp_path / "a"), mode="inprocess", gc_threshold=None)
    assert gc.get_threshold() == (700, 10, 10)
    mem.close()
    mem = memray.open(str(tmp_path / "b"), mode="inprocess")
    gc.set_threshold(50_000, 10, 10)  # the user's own choice, made while it is open
    mem.close()
    assert gc.get_threshold() == (50_000, 10, 10)


def test_a_bad_threshold_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(memray.ValidationError, match="gc_threshold"):
        memray.open(str(tmp_path), mode="inprocess", gc_threshold=0)
