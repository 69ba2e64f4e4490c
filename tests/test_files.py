"""memray.files: reading ``.npy`` files from several threads at once (shards of an in-process
memray open their snapshots together)."""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path

import numpy as np

from memray.files import load_npy


class _Finalised:
    def __del__(self) -> None:  # Python code run by the collector: a point where threads switch
        pass


def test_threads_read_npy_files_together(tmp_path: Path) -> None:
    # On CPython 3.11 four threads calling np.load here failed with "SystemError: AST
    # constructor recursion depth mismatch" within 3,000 reads each in six runs of six: the
    # collector runs often and threads switch inside numpy's header parse.
    path = tmp_path / "a.npy"
    np.save(path, np.arange(12, dtype=np.float32).reshape(3, 4))
    failures: list[BaseException] = []

    def read() -> None:
        for _ in range(3000):
            junk: list[object] = [_Finalised()]
            junk.append(junk)  # a cycle: only the collector frees it
            try:
                assert load_npy(path).shape == (3, 4)
            except BaseException as exc:  # noqa: BLE001 - any failure in a thread fails the test
                failures.append(exc)
                return

    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(5)
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gc.set_threshold(*threshold)
        sys.setswitchinterval(interval)
    assert failures == []
