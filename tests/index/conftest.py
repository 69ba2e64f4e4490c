from __future__ import annotations

import numpy as np
import numpy.typing as npt


def unit(rng: np.random.Generator, n: int, dim: int) -> npt.NDArray[np.float32]:
    v = rng.standard_normal((n, dim)).astype(np.float32)
    out: npt.NDArray[np.float32] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def clustered(rng: np.random.Generator, n: int, dim: int, clusters: int, spread: float = 0.3) -> npt.NDArray[np.float32]:
    """``n`` unit vectors drawn around ``clusters`` gaussian centres."""
    centres = unit(rng, clusters, dim)
    v = centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, dim)).astype(np.float32) / np.sqrt(dim)
    out: npt.NDArray[np.float32] = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out
