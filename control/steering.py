"""Steering laws for closing the loop through motion capture (pure functions).

Lateral undulation is steered by a joint offset phi_0 added to every
horizontal joint's reference (Liljebaeck et al., Snake Robots, Springer 2013,
ch. 8; IEEE T-RO 2012): a constant offset bends the body's mean shape and the
snake turns. These are the laws, with no I/O and no clock: heading estimates
from motion capture, heading hold, and line-of-sight (LOS) guidance along a
straight line or a polyline of waypoints. Angles are radians, headings are
measured from the ground's x axis toward y, positions are metres.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["wrap_angle", "heading_from_links", "heading_from_track", "HeadingHold",
           "LosGuidance", "LosState", "cross_track"]


def wrap_angle(a):
    """a wrapped into [-pi, pi)."""
    return (np.asarray(a, dtype=float) + math.pi) % (2 * math.pi) - math.pi


def heading_from_links(p: np.ndarray) -> float:
    """Heading of the body from several links' positions p (k, 2 or 3),
    ordered head (link 1) first: the direction of the least-squares line
    through them, pointing from the tail's end toward the head's."""
    p = np.asarray(p, dtype=float)[:, :2]
    if p.shape[0] < 2:
        raise ValueError("need at least two links")
    c = p - p.mean(axis=0)
    _, _, vt = np.linalg.svd(c, full_matrices=False)
    d = vt[0]
    if np.dot(p[0] - p[-1], d) < 0:
        d = -d
    return float(math.atan2(d[1], d[0]))


def heading_from_track(t: np.ndarray, p: np.ndarray, window: float) -> float | None:
    """Heading of travel of one tracked link: the direction of its
    displacement over the last ``window`` s (the position then interpolated).
    Over one gait period the body wave's periodic part cancels; the estimate
    lags by about half the window. None with fewer than three samples, less
    than half a window of history, or no motion."""
    t = np.asarray(t, dtype=float)
    p = np.asarray(p, dtype=float)[:, :2]
    if t.size < 3 or t[-1] - t[0] < 0.5 * window:
        return None
    t0 = max(t[0], t[-1] - window)
    p0 = np.array([np.interp(t0, t, p[:, 0]), np.interp(t0, t, p[:, 1])])
    d = p[-1] - p0
    if not np.any(d):
        return None
    return float(math.atan2(d[1], d[0]))


@dataclass(frozen=True)
class HeadingHold:
    """phi_0 = sat(sign k_p wrap(theta_ref - theta)): the offset turns the
    snake toward its target heading; ``phi_max`` keeps the references inside
    the joint limits. ``sign``: a positive offset on the horizontal joints
    turns the snake clockwise (toward negative headings) with the head leading
    (measured on the model: the orthotropic lateral undulation with +10 deg
    turned about 9 deg/s clockwise), so -1."""

    k_p: float = 0.6
    phi_max: float = math.radians(15.0)
    sign: float = -1.0

    def offset(self, heading: float, target: float) -> float:
        e = float(wrap_angle(target - heading))
        return float(np.clip(self.sign * self.k_p * e, -self.phi_max, self.phi_max))


def cross_track(p, a, b) -> tuple[float, float, float]:
    """(cross-track error, along-track distance, path angle) of the point p
    relative to the line from a to b: the error is positive left of the
    direction of travel."""
    p, a, b = (np.asarray(x, dtype=float)[:2] for x in (p, a, b))
    d = b - a
    length = float(np.hypot(*d))
    if length == 0:
        raise ValueError("a path segment needs two distinct points")
    u = d / length
    r = p - a
    along = float(r @ u)
    error = float(u[0] * r[1] - u[1] * r[0])
    return error, along, float(math.atan2(u[1], u[0]))


@dataclass(frozen=True)
class LosState:
    segment: int = 0            # the waypoint segment being followed
    done: bool = False          # past the last waypoint


@dataclass(frozen=True)
class LosGuidance:
    """Line-of-sight guidance along waypoints (m, (k, 2), k >= 2): the target
    heading points at the path ``lookahead`` metres ahead of the point's
    projection, theta_ref = path angle - atan(e / lookahead); a segment is left
    for the next once the point is within ``accept`` of its end or past it."""

    waypoints: tuple[tuple[float, float], ...]
    lookahead: float = 0.5
    accept: float = 0.15

    def __post_init__(self) -> None:
        if len(self.waypoints) < 2:
            raise ValueError("a path needs at least two waypoints")
        if not (self.lookahead > 0 and self.accept >= 0):
            raise ValueError("lookahead must be > 0 and accept >= 0")

    def target(self, p, state: LosState = LosState()) -> tuple[float, float, LosState]:
        """(target heading, cross-track error, new state) for position p."""
        w = np.asarray(self.waypoints, dtype=float)
        k = state.segment
        while k < len(w) - 2:
            _, along, _ = cross_track(p, w[k], w[k + 1])
            seg = float(np.hypot(*(w[k + 1] - w[k])))
            near_end = np.hypot(*(np.asarray(p, dtype=float)[:2] - w[k + 1])) <= self.accept
            if along < seg - self.accept and not near_end:
                break
            k += 1
        e, along, angle = cross_track(p, w[k], w[k + 1])
        seg = float(np.hypot(*(w[k + 1] - w[k])))
        done = k == len(w) - 2 and along >= seg
        return float(wrap_angle(angle - math.atan2(e, self.lookahead))), e, LosState(k, done)
