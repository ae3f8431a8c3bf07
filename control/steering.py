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

from aiko.model.errors import AikoError

__all__ = ["wrap_angle", "heading_from_links", "heading_from_track", "HeadingHold",
           "LosGuidance", "LosState", "cross_track", "SteeringConfig", "SteeringLoop",
           "SteerRecord", "STEER_MODES", "offset_room", "steering_loop", "SteeringError"]


class SteeringError(AikoError, ValueError):
    """A steering request that cannot be carried out with this gait or rig."""


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
    """phi_0 = sat(sign (k_p e + k_i integral)), e = wrap(theta_ref - theta):
    the offset turns the snake toward its target heading; ``phi_max`` keeps
    the references inside the joint limits. ``sign``: a positive offset on the
    horizontal joints turns the snake clockwise (toward negative headings)
    with the head leading (measured on the model: the orthotropic lateral
    undulation with +10 deg turned about 9 deg/s clockwise), so -1. The
    integral (rad s) is the caller's state; it takes out a steady turn such as
    a joint whose zero is off (see :meth:`integrate`)."""

    k_p: float = 0.6
    phi_max: float = math.radians(15.0)
    sign: float = -1.0
    k_i: float = 0.0
    i_zone: float = math.radians(10.0)

    def offset(self, heading: float, target: float, integral: float = 0.0) -> float:
        e = float(wrap_angle(target - heading))
        return float(np.clip(self.sign * (self.k_p * e + self.k_i * integral),
                             -self.phi_max, self.phi_max))

    def integrate(self, heading: float, target: float, integral: float, dt: float) -> float:
        """The integral after dt s more of error. It only grows while the
        error is within ``i_zone`` (a large turn is the proportional part's
        job; integrating through it winds up and overshoots) and the offset is
        not saturated in the error's direction, and is bounded so that the
        integral part alone never exceeds phi_max."""
        if self.k_i == 0:
            return 0.0
        e = float(wrap_angle(target - heading))
        u = self.k_p * e + self.k_i * integral
        if abs(e) > self.i_zone or (abs(u) >= self.phi_max and np.sign(e) == np.sign(u)):
            return integral
        bound = self.phi_max / self.k_i
        return float(np.clip(integral + e * dt, -bound, bound))


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


# --------------------------------------------------------------------------
# The loop the streamer runs: estimate, law, saturation, stale-data handling.

STEER_MODES = ("wait", "closed", "hold", "open")
"""What a period's command is based on: ``wait`` (not enough motion capture
yet: open loop), ``closed`` (fresh motion capture), ``hold`` (motion capture
stale: the last closed-loop offset), ``open`` (stale for longer than
``SteeringConfig.hold``: the gait's own references)."""


@dataclass(frozen=True)
class SteeringConfig:
    """A closed loop through motion capture (angles rad, times s, lengths m).

    Exactly one of ``heading`` (heading hold) and ``waypoints`` (LOS path
    following, (k, 2), k >= 2) is set. ``window``: the heading estimate's
    averaging window (None: one period of the gait's horizontal wave, where
    the body wave cancels; the estimate lags by about half of it).
    ``stale_after``: a tracked position older than this is stale; the offset
    is then held for ``hold`` s and afterwards the loop falls back to open
    loop until fresh data come back. ``rate_max`` limits how fast the offset
    changes, so that no period's references jump. ``k_p`` (rad/rad) and
    ``k_i`` (rad per rad s) are heading hold's gains (:class:`HeadingHold`),
    also under LOS."""

    heading: float | None = None
    waypoints: tuple[tuple[float, float], ...] | None = None
    k_p: float = 0.25
    k_i: float = 0.015
    phi_max: float = math.radians(15.0)
    sign: float = -1.0
    lookahead: float = 0.8
    accept: float = 0.15
    window: float | None = None
    stale_after: float = 0.25
    hold: float = 1.0
    rate_max: float = math.radians(20.0)

    def __post_init__(self) -> None:
        if (self.heading is None) == (self.waypoints is None):
            raise ValueError("steering needs either a target heading or a path, not both")
        if self.waypoints is not None:
            LosGuidance(self.waypoints, self.lookahead, self.accept)  # validates
        for name in ("k_p", "phi_max", "rate_max", "stale_after"):
            if not getattr(self, name) > 0:
                raise ValueError(f"steering {name} must be > 0, got {getattr(self, name)!r}")
        if not self.k_i >= 0:
            raise ValueError(f"steering k_i must be >= 0, got {self.k_i!r}")
        if not self.hold >= 0:
            raise ValueError(f"steering hold must be >= 0, got {self.hold!r}")
        if self.window is not None and not self.window > 0:
            raise ValueError(f"steering window must be > 0, got {self.window!r}")
        if self.sign not in (1.0, -1.0):
            raise ValueError(f"steering sign must be +1 or -1, got {self.sign!r}")

    @property
    def mode(self) -> str:
        return "heading" if self.heading is not None else "path"


@dataclass(frozen=True)
class SteerRecord:
    """One period's steering: the command ``offset`` (rad) and what it came
    from. ``heading``/``position``: the estimate (None in ``wait``/``open``),
    ``target``: the target heading, ``cross_track``: LOS only, ``age``: how
    old the newest tracked position is (s, None before the first)."""

    t: float
    mode: str
    offset: float
    heading: float | None
    target: float | None
    position: tuple[float, float] | None
    cross_track: float | None
    segment: int | None
    age: float | None

    def to_dict(self) -> dict:
        return {"t": self.t, "mode": self.mode, "offset": self.offset,
                "heading": self.heading, "target": self.target,
                "x": None if self.position is None else self.position[0],
                "y": None if self.position is None else self.position[1],
                "cross_track": self.cross_track, "segment": self.segment, "age": self.age}


def offset_room(A_h: float, psi_h: float, limit: float) -> float:
    """The largest steering offset (rad) that keeps every horizontal
    reference A_h sin(.) + psi_h + phi_0 inside +-limit."""
    return max(0.0, limit - abs(A_h) - abs(psi_h))


class SteeringLoop:
    """Heading hold or LOS path following from tracked positions.

    ``observe(t, p)`` takes each fresh motion-capture position of the tracked
    point (the mean of the tracked links, or link 6 alone) with its receive
    time; ``command(t)`` gives the period's :class:`SteerRecord`. No clock and
    no I/O: times are passed in (trial clock, s). The estimate is
    :func:`heading_from_track` over ``window``; the position for LOS is the
    tracked point's mean over the same window (the body wave averaged out)."""

    def __init__(self, config: SteeringConfig, window: float, phi_max: float) -> None:
        self.config = config
        self.window = window
        self.phi_max = min(config.phi_max, phi_max)
        self.law = HeadingHold(config.k_p, self.phi_max, config.sign, config.k_i)
        self.integral = 0.0
        self.los = (None if config.waypoints is None else
                    LosGuidance(config.waypoints, config.lookahead, config.accept))
        self.los_state = LosState()
        self.offset = 0.0
        self.mode = "wait"
        self._t: list[float] = []
        self._p: list[tuple[float, float]] = []
        self._t_cmd: float | None = None
        self._t_lost: float | None = None

    def observe(self, t: float, p) -> None:
        """A fresh tracked position (x, y[, z]) m received at t s."""
        if self._t and t <= self._t[-1]:
            return
        self._t.append(float(t))
        self._p.append((float(p[0]), float(p[1])))
        keep = 2.0 * self.window                  # history beyond two windows is not used
        while len(self._t) > 3 and self._t[0] < t - keep:
            del self._t[0], self._p[0]

    def command(self, t: float) -> SteerRecord:
        """The offset for the period sent at t, and why (see STEER_MODES)."""
        cfg = self.config
        dt = 0.0 if self._t_cmd is None else max(0.0, t - self._t_cmd)
        self._t_cmd = t
        age = None if not self._t else t - self._t[-1]
        fresh = age is not None and age <= cfg.stale_after
        heading = position = target = e = None
        segment = None
        if fresh:
            tt = np.asarray(self._t)
            pp = np.asarray(self._p)
            heading = heading_from_track(tt, pp, self.window)
            recent = tt >= tt[-1] - self.window
            position = (float(pp[recent, 0].mean()), float(pp[recent, 1].mean()))
        if heading is not None:
            self._t_lost = None
            if self.los is None:
                target = cfg.heading
            else:
                target, e, self.los_state = self.los.target(position, self.los_state)
                segment = self.los_state.segment
            mode = "closed"
            assert heading is not None and target is not None
            if self.mode == "closed":
                self.integral = self.law.integrate(heading, target, self.integral, dt)
            goal = self.law.offset(heading, target, self.integral)
        elif self.mode in ("closed", "hold"):
            if self._t_lost is None:
                self._t_lost = t
            if t - self._t_lost < cfg.hold:
                mode, goal = "hold", self.offset
            else:
                mode, goal = "open", 0.0
        else:
            mode, goal = ("open" if self.mode == "open" else "wait"), 0.0
        step = cfg.rate_max * dt
        self.offset = float(np.clip(goal, self.offset - step, self.offset + step))
        self.mode = mode
        return SteerRecord(t, mode, self.offset, heading,
                           None if target is None else float(target), position,
                           e, segment, age)


def steering_loop(config: SteeringConfig, gait, limit: float | None = None) -> SteeringLoop:
    """The loop for ``gait`` (a :class:`aiko.control.gait.Gait`): the window
    defaults to one period of its horizontal wave, the offset is saturated so
    that the horizontal references stay inside the joint limits (``limit``,
    rad: the rig's configured limit; default the modules' mechanical
    :data:`~aiko.control.gait.JOINT_LIMIT`). SteeringError when the gait
    leaves no room to steer or has no wave to average over."""
    from .gait import JOINT_LIMIT

    window = config.window
    if window is None:
        if gait.omega_h == 0:
            raise SteeringError(f"gait {gait.name!r} has omega_h = 0: give the steering "
                             "estimate's window")
        window = 2 * math.pi / abs(gait.omega_h)
    room = offset_room(gait.A_h, gait.psi_h + gait.offset,
                       JOINT_LIMIT if limit is None else limit)
    if room < math.radians(1.0):
        raise SteeringError(f"gait {gait.name!r} leaves {math.degrees(room):.1f} deg between its "
                         "horizontal references and the joint limits: no room to steer")
    return SteeringLoop(config, window, room)
