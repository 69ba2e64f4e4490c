from __future__ import annotations

import json
import os
import subprocess
import sys


def test_ingest_micro_benchmark_runs_at_tiny_size() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.store_ingest_micro",
            "--existing",
            "200",
            "--batch",
            "50",
            "--batches",
            "2",
            "--conversations",
            "10",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    line = json.loads(out.stdout.strip().splitlines()[-1])
    assert line["benchmark"] == "store_ingest_micro"
    assert line["append_new_rows_per_s"] > 0 and line["floor_raw_arrow_insert_rows_per_s"] > 0 and line["git_sha"]
