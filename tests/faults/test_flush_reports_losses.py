"""``Memory.flush()`` raises every buffered loss not yet reported to a caller, every time.

A host SIGKILLed with acknowledged (``durable=False``) messages in its debounce window loses
them; its next incarnation records them as ``lost`` dead letters. Those losses must reach a
caller through ``Memory.flush()`` however the restarted host has been used since: not called
at all yet, its conversation loaded by a read (its buffer settled), or killed a second time before
anyone flushed. A run from outside once saw ``flush()`` return normally in 3 runs of 4. Each case waits on state
(the process gone, Ray's restart), never on time; the debounce is long, so the adds are
certainly still in the window when the host dies.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator

import pytest

import memray
from benchmarks.faults import _alive, _pid, _wait_for
from memray.errors import DeadLetterError

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def mem(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memray.Memory]:
    m = memray.open(
        config=memray.MemoryConfig(
            path=str(tmp_path_factory.mktemp("flush-losses")),
            mode="ray",
            hosts=1,
            shards=1,
            namespace="memray-flush-losses",
            debounce_ms=600_000,  # nothing buffered is written before the kill
            write_timeout_s=60,
        )
    )
    yield m
    m.close(terminate=True)


def buffered(mem: memray.Memory, n: int = 5) -> tuple[memray.ConversationHandle, set[str]]:
    """A fresh conversation with ``n`` acknowledged, not yet durable messages; their ids."""
    conv = mem.conversation(user_id="u", conversation_id=uuid.uuid4().hex, app="flush-losses")
    msgs = [memray.Message(role="user", parts=[memray.TextPart(text=f"buffered note {i}")]) for i in range(n)]
    conv.add(msgs)
    return conv, {m.id for m in msgs}


def kill_host(mem: memray.Memory, wait_restart: bool = False) -> None:
    """SIGKILL the one host and wait until its process is gone (Ray restarts it); with
    ``wait_restart``, until its new process has answered a call (it then has started)."""
    host = mem.internals.deployment.hosts[0]
    pid = _pid(mem, host)
    os.kill(pid, signal.SIGKILL)
    _wait_for(lambda: not _alive(pid), 60, f"host process {pid} to die")
    if wait_restart:
        _wait_for(lambda: _answers(mem, host, pid), 60, "the restarted host to answer")


def _answers(mem: memray.Memory, host: object, old: int) -> bool:
    try:
        return _pid(mem, host) != old
    except Exception:  # still restarting
        return False


def raised_by_flush(mem: memray.Memory) -> set[str]:
    """The message ids ``Memory.flush()`` names as dead letters (empty if it returns normally)."""
    try:
        mem.flush()
    except DeadLetterError as exc:
        return {letter[3] for letter in exc.letters}
    return set()


def test_flush_right_after_the_restart_names_the_losses(mem: memray.Memory) -> None:
    _, ids = buffered(mem)
    kill_host(mem)
    assert raised_by_flush(mem) == ids
    assert raised_by_flush(mem) == set()  # reported once: the next flush has nothing new to say
    assert ids <= {d.id for d in mem.dead_letters(app="flush-losses") if d.kind == "lost"}


def test_flush_names_the_losses_of_a_conversation_read_since_the_restart(mem: memray.Memory) -> None:
    conv, ids = buffered(mem)
    kill_host(mem)
    assert conv.messages() == []  # loads it into the restarted host: its buffer is settled
    assert raised_by_flush(mem) == ids


def test_flush_names_the_losses_of_a_host_killed_again_before_anyone_flushed(mem: memray.Memory) -> None:
    _, ids = buffered(mem)
    kill_host(mem, wait_restart=True)  # it starts: resolves its ledger, holds the losses to report
    kill_host(mem)
    assert raised_by_flush(mem) == ids


def test_flush_names_the_losses_of_a_conversation_written_again_since(mem: memray.Memory) -> None:
    conv, ids = buffered(mem)
    kill_host(mem)
    conv.add({"role": "user", "content": "after the restart"})  # buffered: its add reports nothing
    assert raised_by_flush(mem) == ids


def test_a_fork_after_a_loss_is_taken_and_leaves_the_report_to_flush(
    mem: memray.Memory, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A fork flushes to make what was acknowledged durable; a loss owed to a caller must not
    make it fail (the chaos soak's fork raised DeadLetterError and was not taken), nor be
    swallowed by it."""
    _, ids = buffered(mem)
    kill_host(mem, wait_restart=True)
    info = mem.fork_to(str(tmp_path_factory.mktemp("fork-after-loss") / "fork"))
    assert info["flush_s"] >= 0
    assert raised_by_flush(mem) == ids


def test_a_deleted_message_is_not_reported_lost_by_a_later_kill(mem: memray.Memory) -> None:
    """Deleting an acknowledged message takes it out of the host's ledger: the next incarnation
    must not record it as a lost dead letter (the soak saw deleted messages named as losses)."""
    conv, ids = buffered(mem, 3)
    gone = sorted(ids)[0]
    conv.delete_messages([gone])  # (it commits the other two first)
    after = [memray.Message(role="user", parts=[memray.TextPart(text=f"after the delete {i}")]) for i in range(2)]
    conv.add(after)
    kill_host(mem)
    assert raised_by_flush(mem) == {m.id for m in after}
    assert gone not in {d.id for d in mem.dead_letters(app="flush-losses", limit=1000)}
