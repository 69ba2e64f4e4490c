from __future__ import annotations

import subprocess
import sys

import memray.index


def test_index_cores_import_without_ray() -> None:
    code = "import sys, memray.index, memray.index.router; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names_exist() -> None:
    for name in memray.index.__all__:
        assert getattr(memray.index, name) is not None, name
