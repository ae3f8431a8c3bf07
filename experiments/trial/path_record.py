"""A path kept for a whole trial: times and positions in fixed-size blocks.

The comparison at a trial's end needs every fresh motion-capture frame and
every parallel-model sample of the compared link (20 a second each). Kept in
one growing array, each doubling copies the whole path and leaves the old
block behind in the allocator's heap, so the runner's memory grew by more than
the path; in blocks of :data:`BLOCK_ROWS` rows it grows by the path itself
(32 bytes a sample, about 2.3 MB for both paths of a 30-minute trial).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PathRecord", "BLOCK_ROWS"]

BLOCK_ROWS = 2048
"""Samples per block: (t, x, y, z) as float64, 64 kB a block."""


class PathRecord:
    """``append(t, p)`` one sample (time s, position (3,) m); ``arrays()``
    the times (m,) and positions (m, 3) in the order appended."""

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []
        self._n = 0          # rows used in the last block

    def __len__(self) -> int:
        if not self._blocks:
            return 0
        return (len(self._blocks) - 1) * BLOCK_ROWS + self._n

    def append(self, t: float, p) -> None:
        if not self._blocks or self._n == BLOCK_ROWS:
            self._blocks.append(np.empty((BLOCK_ROWS, 4)))
            self._n = 0
        row = self._blocks[-1][self._n]
        row[0] = t
        row[1:] = p[:3]
        self._n += 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._blocks:
            return np.zeros(0), np.zeros((0, 3))
        rows = np.concatenate(self._blocks[:-1] + [self._blocks[-1][:self._n]])
        return rows[:, 0].copy(), rows[:, 1:].copy()
