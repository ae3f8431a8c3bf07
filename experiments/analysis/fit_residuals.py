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

Pure: arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np

from aiko.experiments.analysis.compare import Paths
from aiko.experiments.analysis.replay import ReplayInput

__all__ = ["PENALTY_M", "TrialSamples", "trial_samples", "residuals", "lag1_correlation",
           "effective_samples"]

PENALTY_M = 10.0
"""Residual (m) at every sample of a replay that failed: far worse than any fit."""


class TrialSamples:
    """The motion-capture samples of one trial a fit compares: times ``t``
    (k,) s on the trial clock and positions ``xy`` (k, 2) m."""

    def __init__(self, t: np.ndarray, xy: np.ndarray) -> None:
        self.t = t
        self.xy = xy

    def __len__(self) -> int:
        return int(self.t.size)


def trial_samples(inp: ReplayInput, max_delay: float = 0.0) -> TrialSamples:
    """The samples of ``inp``'s experiment in view from the gait's start
    plus ``max_delay`` s (the largest delay a fit may try) on."""
    t = np.asarray(inp.experiment.t_experiment, float).reshape(-1)
    p = np.asarray(inp.experiment.p_experiment, float).reshape(-1, 3)
    keep = (t - max(0.0, max_delay) >= inp.t0 - 1e-9) & np.all(np.isfinite(p[:, :2]), axis=1)
    keep &= np.isfinite(t)
    return TrialSamples(t[keep], p[keep, :2])


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
