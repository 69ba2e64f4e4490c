"""``python -m benchmarks.tracing_cost`` at tiny size, so it does not rot."""

from __future__ import annotations

import argparse
import asyncio


def test_tracing_cost_times_the_client_call_beside_its_floor() -> None:
    from benchmarks.tracing_cost import measure
    from memray.tracing import state

    result = asyncio.run(measure(argparse.Namespace(calls=200, rounds=2, on=True)))
    assert result["floor"]["min_ns"] > 0 and result["off"]["min_ns"] > 0 and result["on_no_span"]["min_ns"] > 0
    assert "off_minus_floor_median_ns" in result and not state.on
