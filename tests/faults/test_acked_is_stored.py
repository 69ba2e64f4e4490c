"""An acknowledged seq is the stored seq under real SIGKILL/SIGSTOP of memray's actors (the
in-process state machine, ``tests/conversation/test_seq_machine.py``, covers every order of
events; this checks the real processes): a durable add whose first attempt reached a paused
store, whose host was then killed; and ``add_many`` batches through a host kill."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.faults import host_killed_while_store_paused, ingest_under_fault, open_memory

pytestmark = [pytest.mark.ray, pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")]


@pytest.fixture(scope="module")
def mem(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    m = open_memory(str(tmp_path_factory.mktemp("acked")), hosts=1, shards=1, namespace="memray-acked")
    yield m
    m.close(terminate=True)


def test_a_retry_after_the_store_committed_an_orphaned_batch_returns_the_stored_seqs(mem: Any) -> None:
    figures = host_killed_while_store_paused(mem, batch=100)
    assert figures["caller_error"] is None, figures
    assert figures["acked"] == figures["stored"] == 100, figures
    assert figures["seq_mismatch"] == 0 and figures["duplicated"] == 0 and figures["lost"] == 0, figures


def test_add_many_batches_through_a_host_kill_keep_their_seqs(mem: Any) -> None:
    figures = ingest_under_fault(mem, "host_add_many", conversations=8, messages=100, batch=50, threads=4, kill_at=0.3)
    assert (figures["recovery_s"] or 0) > 0, "the kill did not happen mid-ingest"
    assert figures["acked"] == figures["stored"] == 800, figures
    assert figures["seq_mismatch"] == 0 and figures["duplicated"] == 0 and figures["gaps"] == 0, figures
