"""Ramps between postures: the references that move every joint together from
one set of angles to another without saturating a motor.

Pure functions. The profile is the minimum-jerk quintic
s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5 (zero speed and acceleration at both
ends, peak speed 15/8 of the mean). It is streamed as one REF per period whose
rate is the secant to the next period's angle, so the modules' targets (applied
on each SYNC and moved on at the REF's rate, joint protocol) trace the profile
as a continuous piecewise-linear curve with no step at any SYNC.

The automatic duration keeps the fastest joint at ``RAMP_DUTY`` of the motor's
speed at full duty: the modules' servo then needs about that share of its duty
to follow, far from saturation (at 100 %) and the current-limit fault.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["RAMP_DUTY", "RAMP_TOLERANCE", "RAMP_SKIP", "PEAK_SPEED_FACTOR", "profile", "ramp_duration",
           "ramp_references", "ramp_peak_speed"]

RAMP_DUTY = 0.25
"""Share of the motors' full-duty speed the fastest joint uses on a ramp."""

RAMP_TOLERANCE = math.radians(1.0)
"""A joint has reached a ramp's goal when its STATE angle is within this, rad."""

RAMP_SKIP = math.radians(3.0)
"""No ramp to a gait's start when every joint is within this of it, rad: the
first gait period takes them there, a step no larger than the soft start's
(VIII-E) lets a joint make. Sidewinding, which starts straight but for joints
already within 3 degrees, starts at once."""

PEAK_SPEED_FACTOR = 15.0 / 8.0
"""Peak over mean speed of the minimum-jerk profile."""


def profile(tau: np.ndarray | float) -> np.ndarray:
    """Minimum-jerk progress s(tau) for tau in [0, 1] (clipped outside)."""
    s = np.clip(np.asarray(tau, dtype=float), 0.0, 1.0)
    return s ** 3 * (10.0 - 15.0 * s + 6.0 * s ** 2)


def ramp_duration(start: np.ndarray, goal: np.ndarray, speed: float, period: float,
                  tolerance: float = RAMP_TOLERANCE) -> float:
    """Shortest whole number of periods (s) in which the profile moves every
    joint from ``start`` to ``goal`` (same shapes, rad) with no joint faster
    than ``speed`` (rad/s); 0 when every joint is already within ``tolerance``."""
    if speed <= 0 or period <= 0:
        raise ValueError("speed and period must be positive")
    d = float(np.max(np.abs(np.asarray(goal, float) - np.asarray(start, float)), initial=0.0))
    if d <= tolerance:
        return 0.0
    periods = math.ceil(PEAK_SPEED_FACTOR * d / speed / period - 1e-9)
    return max(periods, 1) * period


def ramp_references(start: np.ndarray, goal: np.ndarray, duration: float,
                    period: float) -> np.ndarray:
    """References of a ramp, one row per period: array (K + 1, n, 4) of
    [alpha_h, alpha_v, omega_h, omega_v] with K = duration / period.

    ``start`` and ``goal`` are (n, 2) angles (H, V), rad. Row k holds the
    profile's angles at t = k period and the secant rate to row k + 1; the
    last row is ``goal`` with rate 0. A zero duration gives no rows."""
    start = np.asarray(start, dtype=float)
    goal = np.asarray(goal, dtype=float)
    if start.shape != goal.shape or start.ndim != 2 or start.shape[1] != 2:
        raise ValueError(f"start and goal must both be (n, 2), got {start.shape} and "
                         f"{goal.shape}")
    K = int(round(duration / period))
    if K <= 0:
        return np.zeros((0,) + start.shape[:1] + (4,))
    s = profile(np.arange(K + 1) / K)
    angles = start[None] + s[:, None, None] * (goal - start)[None]
    angles[-1] = goal
    rates = np.zeros_like(angles)
    rates[:-1] = np.diff(angles, axis=0) / period
    return np.concatenate([angles, rates], axis=2)


def ramp_peak_speed(refs: np.ndarray) -> float:
    """Largest rate of a ramp's references (rad/s); 0 for an empty ramp."""
    return float(np.max(np.abs(refs[..., 2:]), initial=0.0))
