from __future__ import annotations

import subprocess
import sys


def test_index_cores_import_without_ray() -> None:
    code = "import sys, memray.index, memray.index.router; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
