"""The residuals a fit minimises: link 6 of the experiment against the replay,
sample by sample, in units of the motion capture's noise.

For one trial the residual vector is, at every motion-capture sample that is
in view, ``(x_e - x_m) / sigma`` and ``(y_e - y_m) / sigma`` (the model
interpolated linearly at the sample's time less the delay, held at its ends),
laid out as (k, 2) and flattened. Which samples count does not depend on the
delay (those from the gait's start plus the largest delay allowed), so every
evaluation of a fit has residuals of the same length, as a least-squares
method needs. A replay that failed counts as :data:`PENALTY_M` at every
sample.

**Windows.** With a window of ``W`` s the samples are cut into consecutive
windows of ``W`` s from the first (a last window of fewer than
:data:`MIN_WINDOW_SAMPLES` joins the one before), and in each the replay's
points are moved by the planar rigid motion (a rotation and a translation,
the least-squares one: Procrustes in 2D) that brings them closest to the
experiment's before their differences are taken. On a flat, even floor the
dynamics do not change when the whole snake is moved or turned in the
plane, so a position and heading the replay has drifted by before a window
change nothing of what happens in it; what remains is the shape of each
window's motion: its speed, its turning and its sway. A replay of a
stick-slip start that drifts by a few centimetres for a millionth of a
degree costs its whole drift sample by sample, but only once per window
aligned. Each window takes 3 degrees of freedom from the residuals
(:attr:`TrialSamples.aligned_dof`).

Pure: arrays in, arrays out.
"""

from __future__ import annotations

import math

import numpy as np

from aiko.experiments.analysis.compare import Paths
from aiko.experiments.analysis.replay import ReplayInput

__all__ = ["PENALTY_M", "MIN_WINDOW_SAMPLES", "TrialSamples", "trial_samples", "residuals",
           "window_index", "align_windows", "lag1_correlation", "effective_samples"]

PENALTY_M = 10.0
"""Residual (m) at every sample of a replay that failed: far worse than any fit."""


MIN_WINDOW_SAMPLES = 5
"""The fewest samples a window may have (a rigid motion fitted to two
points would leave them nothing to say)."""


class TrialSamples:
    """The motion-capture samples of one trial a fit compares: times ``t``
    (k,) s on the trial clock, positions ``xy`` (k, 2) m, and with a window
    (s, 0 for none) the window ``w`` (k,) of each sample."""

    def __init__(self, t: np.ndarray, xy: np.ndarray, window: float = 0.0) -> None:
        self.t = t
        self.xy = xy
        self.window = float(window)
        self.w = window_index(t, window) if window > 0 else None

    def __len__(self) -> int:
        return int(self.t.size)

    @property
    def aligned_dof(self) -> int:
        """Degrees of freedom the windows' rigid motions take: 3 a window."""
        return 0 if self.w is None or self.w.size == 0 else 3 * (int(self.w[-1]) + 1)


def trial_samples(inp: ReplayInput, max_delay: float = 0.0, window: float = 0.0) -> TrialSamples:
    """The samples of ``inp``'s experiment in view from the gait's start
    plus ``max_delay`` s (the largest delay a fit may try) on, cut into
    windows of ``window`` s if above 0."""
    t = np.asarray(inp.experiment.t_experiment, float).reshape(-1)
    p = np.asarray(inp.experiment.p_experiment, float).reshape(-1, 3)
    keep = (t - max(0.0, max_delay) >= inp.t0 - 1e-9) & np.all(np.isfinite(p[:, :2]), axis=1)
    keep &= np.isfinite(t)
    return TrialSamples(t[keep], p[keep, :2], window)


def window_index(t: np.ndarray, window: float) -> np.ndarray:
    """(k,) the window of each of the sorted times ``t`` (k,): consecutive
    windows of ``window`` s from the first time, numbered from 0, the last
    joined to the one before if it has fewer than MIN_WINDOW_SAMPLES (all
    in window 0 if they are fewer)."""
    t = np.asarray(t, float).reshape(-1)
    if t.size == 0:
        return np.zeros(0, dtype=np.int64)
    w = np.floor((t - t[0]) / window + 1e-9).astype(np.int64)
    # windows are consecutive even where samples are missing
    _, w = np.unique(w, return_inverse=True)
    w = w.reshape(-1)
    last = int(w[-1])
    if last > 0 and np.count_nonzero(w == last) < MIN_WINDOW_SAMPLES:
        w[w == last] = last - 1
    return w


def align_windows(e: np.ndarray, m: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(k, 2) ``e - (R m + c)`` with, in each window of ``w`` (k,), the
    rotation R and translation c that bring the points ``m`` (k, 2) closest
    to ``e`` (k, 2) in least squares: R's angle atan2(sum a x b, sum a . b)
    of the points about their centroids a (of m) and b (of e)."""
    out = np.empty_like(e)
    for j in range(int(w[-1]) + 1 if w.size else 0):
        s = w == j
        a = m[s] - m[s].mean(axis=0)
        b = e[s] - e[s].mean(axis=0)
        th = math.atan2(float(np.sum(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0])),
                        float(np.sum(a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1])))
        c, sn = math.cos(th), math.sin(th)
        out[s, 0] = b[:, 0] - (c * a[:, 0] - sn * a[:, 1])
        out[s, 1] = b[:, 1] - (sn * a[:, 0] + c * a[:, 1])
    return out


def residuals(samples: TrialSamples, paths: Paths | str, delay: float,
              sigma: float) -> np.ndarray:
    """(2k,) residuals of one trial (module docstring); ``paths`` a failed
    replay's message gives the penalty."""
    if isinstance(paths, str) or len(samples) == 0:
        return np.full(2 * len(samples), PENALTY_M / sigma)
    tm = np.asarray(paths.t_model, float).reshape(-1)
    pm = np.asarray(paths.p_model, float).reshape(-1, 3)
    ok = np.isfinite(tm) & np.all(np.isfinite(pm[:, :2]), axis=1)
    tm, pm = tm[ok], pm[ok]
    if tm.size < 2:
        return np.full(2 * len(samples), PENALTY_M / sigma)
    t = samples.t - delay
    model = np.column_stack([np.interp(t, tm, pm[:, 0]), np.interp(t, tm, pm[:, 1])])
    if samples.w is not None:
        return (align_windows(samples.xy, model, samples.w) / sigma).reshape(-1)
    return ((samples.xy - model) / sigma).reshape(-1)


def lag1_correlation(r: np.ndarray) -> float:
    """The lag-one autocorrelation of one series of residuals (k,), its mean
    removed; 0 for fewer than three samples or none that vary."""
    r = np.asarray(r, float)
    if r.size < 3:
        return 0.0
    d = r - r.mean()
    den = float(d @ d)
    return 0.0 if den <= 0.0 else float(d[1:] @ d[:-1]) / den


def effective_samples(series: list[np.ndarray], rho_max: float = 0.99) -> float:
    """How many independent samples correlated residuals are worth: each
    series of n with lag-one autocorrelation rho (clipped to [0, rho_max])
    counts n (1 - rho) / (1 + rho), as for a first-order autoregressive
    process. A path that drifts from the experiment's drifts for many
    samples; counting them as independent would make every range too narrow."""
    total = 0.0
    for r in series:
        rho = min(max(lag1_correlation(r), 0.0), rho_max)
        total += r.size * (1.0 - rho) / (1.0 + rho)
    return total
