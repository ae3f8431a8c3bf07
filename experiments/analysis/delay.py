"""The delay between motion capture and commands, estimated from the data.

The paper reports 50-150 ms of logging delay between Aiko's commands and the
motion-capture log. Pure: both link-6 paths are resampled on one grid, their
planar velocities (central differences, light smoothing) are cross-correlated
over a range of lags, and the lag with the largest normalised correlation is
refined by a parabola through its neighbours. A positive delay means motion
capture lags the model: its samples are stamped ``delay`` s late.

The uncertainty is the standard error of the estimates over ``segments``
equal parts of the trial (each estimated alone): it says how consistently
the data point to one delay, not how wrong a biased model could make it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aiko.experiments.analysis.compare import ComparisonError, Paths, _clean

__all__ = ["DelayEstimate", "estimate_delay"]


@dataclass(frozen=True)
class DelayEstimate:
    delay: float          # s, motion capture behind the model
    uncertainty: float    # s, standard error over segments (nan with one segment)
    correlation: float    # the normalised correlation at the peak
    segments: tuple[float, ...]

    def to_dict(self) -> dict:
        return {"delay_s": self.delay, "uncertainty_s": self.uncertainty,
                "correlation": self.correlation, "segments_s": list(self.segments)}


def _velocity(t: np.ndarray, p: np.ndarray, grid: np.ndarray) -> np.ndarray:
    xy = np.column_stack([np.interp(grid, t, p[:, 0]), np.interp(grid, t, p[:, 1])])
    v = np.gradient(xy, grid, axis=0)
    kernel = np.ones(3) / 3.0
    return np.column_stack([np.convolve(v[:, k], kernel, mode="same") for k in (0, 1)])


def _peak(ve: np.ndarray, vm: np.ndarray, max_shift: int) -> tuple[float, float]:
    """(lag in samples, correlation) of the best match of ve against vm shifted."""
    n = len(ve)
    scores = np.full(2 * max_shift + 1, -np.inf)
    for i, s in enumerate(range(-max_shift, max_shift + 1)):
        # experiment at j matches the model at j - s (experiment s samples late)
        a = ve[max(s, 0):n + min(s, 0)]
        b = vm[max(-s, 0):n - max(s, 0)]
        if len(a) < 8:
            continue
        a = a - a.mean(axis=0)
        b = b - b.mean(axis=0)
        den = math.sqrt(float(np.sum(a * a)) * float(np.sum(b * b)))
        if den > 0:
            scores[i] = float(np.sum(a * b)) / den
    i = int(np.argmax(scores))
    best = scores[i]
    frac = 0.0
    if 0 < i < len(scores) - 1 and np.isfinite(scores[i - 1]) and np.isfinite(scores[i + 1]):
        y0, y1, y2 = scores[i - 1], scores[i], scores[i + 1]
        den = y0 - 2 * y1 + y2
        if den < 0:
            frac = 0.5 * (y0 - y2) / den
    return i - max_shift + frac, best


def estimate_delay(paths: Paths, max_delay: float = 0.5, rate: float = 100.0,
                   segments: int = 4) -> DelayEstimate:
    """Estimate the delay of the experiment's link 6 behind the model's (see
    the module docstring); ComparisonError if the two share too little time."""
    te, pe = _clean(paths.t_experiment, paths.p_experiment)
    tm, pm = _clean(paths.t_model, paths.p_model)
    if te.size < 4 or tm.size < 4:
        raise ComparisonError("too few samples to estimate a delay")
    lo, hi = max(te[0], tm[0]), min(te[-1], tm[-1])
    if hi - lo < 4 * max_delay:
        raise ComparisonError(f"the experiment and the model share {max(hi - lo, 0):.2f} s, "
                              f"too little to estimate a delay of up to {max_delay:g} s")
    grid = np.arange(lo, hi, 1.0 / rate)
    ve, vm = _velocity(te, pe, grid), _velocity(tm, pm, grid)
    shift = int(round(max_delay * rate))
    lag, corr = _peak(ve, vm, shift)
    parts = []
    if segments > 1:
        bounds = np.linspace(0, len(grid), segments + 1).astype(int)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            if b - a > 2 * shift + 8:
                parts.append(_peak(ve[a:b], vm[a:b], shift)[0] / rate)
    unc = float(np.std(parts, ddof=1) / math.sqrt(len(parts))) if len(parts) > 1 else math.nan
    return DelayEstimate(float(lag / rate), unc, float(corr), tuple(float(p) for p in parts))
