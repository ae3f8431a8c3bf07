"""A histogram of delays (s) in fixed bins, for percentiles of long runs
without keeping every sample: the emulated modules' answer times, the
simulated Aiko's physics lag, the trial's SYNC->STATE round trips and period
jitter. Its memory is fixed however long the run."""

from __future__ import annotations

import numpy as np

__all__ = ["DelayHistogram"]


class DelayHistogram:
    """Delays in ``bins`` bins of ``bin_s`` seconds from 0 (the last bin holds
    everything longer; a negative delay counts as 0); ``max`` the longest."""

    def __init__(self, bin_s: float, bins: int) -> None:
        self.bin_s = bin_s
        self.counts = np.zeros(bins, dtype=np.int64)
        self.max = 0.0

    def add(self, delay: float) -> None:
        self.counts[min(int(delay / self.bin_s), len(self.counts) - 1) if delay > 0 else 0] += 1
        if delay > self.max:
            self.max = delay

    @property
    def count(self) -> int:
        """How many delays were added."""
        return int(self.counts.sum())

    def percentile(self, q: float) -> float | None:
        """The q-th percentile, s: the upper edge of its bin, but never above
        the longest delay; None before the first delay."""
        total = self.count
        if total == 0:
            return None
        k = int(np.searchsorted(np.cumsum(self.counts), q / 100.0 * total))
        return min(self.bin_s * (min(k, len(self.counts) - 1) + 1), self.max)
