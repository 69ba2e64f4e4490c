"""The crossover benchmark runs at a tiny size, so it cannot rot."""

from __future__ import annotations

import json

import pytest

from benchmarks.index_crossover import main


def test_crossover_benchmark_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    result = main(["--dim", "16", "--sizes", "40,80", "--queries", "5"])
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and json.loads(line) == result
    assert [row["n"] for row in result["sizes"]] == [40, 80]
    assert all(0.0 <= row["hnsw_recall_at_10"] <= 1.0 and row["exact_p50_us"] > 0 for row in result["sizes"])
    assert result["crossover_n"] in (None, 40, 80)
    assert all(row["raw_numpy_p50_us"] > 0 and row["raw_hnsw_p50_us"] > 0 for row in result["sizes"])
