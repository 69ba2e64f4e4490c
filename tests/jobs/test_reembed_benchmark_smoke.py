"""The re-embedding benchmark runs at a tiny size and prints its figures (so it cannot rot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import reembed

pytestmark = pytest.mark.ray


@pytest.mark.long
def test_reembed_benchmark_smoke(ray_session: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "reembed.png"
    assert (
        reembed.main(
            [
                *("--model", "hash:64", "--rows", "600", "--workers", "1", "--cpus-per-worker", "0.5"),
                *("--batch-size", "200", "--floor-rows", "200", "--plot", str(png)),
            ]
        )
        == 0
    )
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["job_rows"] == 600 and record["floor_rows_per_s"] > 0 and record["job_rows_per_s"] > 0
    assert record["parallel_rows_per_s"] > 0 and record["store_write_rows_per_s"] > 0
    assert png.stat().st_size > 0
