"""The store actor's gate: one call at a time, and the most urgent waiting call goes first."""

from __future__ import annotations

import threading
import time

from memray.rpc.client import Priority
from memray.rpc.gate import PriorityGate


def test_an_urgent_call_passes_the_background_call_queued_before_it() -> None:
    gate, order, release, inside = PriorityGate(), [], threading.Event(), threading.Event()

    def call(level: Priority, name: str, hold: bool = False) -> None:
        with gate.hold(level):
            order.append(name)
            if hold:
                inside.set()
                release.wait(10)

    running = threading.Thread(target=call, args=(Priority.NORMAL, "running", True))
    running.start()
    assert inside.wait(10)
    queued = [threading.Thread(target=call, args=(Priority.BACKGROUND, "background"))]
    queued[0].start()
    deadline = time.monotonic() + 10
    while gate._waiting[Priority.BACKGROUND] != 1 and time.monotonic() < deadline:  # wait on state: it is queued
        time.sleep(0.001)
    queued.append(threading.Thread(target=call, args=(Priority.URGENT, "urgent")))
    queued[1].start()
    while gate._waiting[Priority.URGENT] != 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    release.set()
    for t in [running, *queued]:
        t.join(10)
    assert order == ["running", "urgent", "background"]
