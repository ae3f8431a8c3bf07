"""Gait references (70)-(71) with the soft start of VIII-E and the joint limits.

Pure functions of time: the streamer sends them to the joints, the model is fed
the same numbers. Angles in rad and rates in rad/s inside; gait TOML files are
written by hand in degrees and degrees per second.

Gait files are read by :mod:`aiko.experiments.files.gait_file`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from aiko.model.errors import AikoError

__all__ = ["Gait", "GaitError", "PRESETS", "JOINT_LIMIT", "SOFT_START_THRESHOLD",
           "ANGLE_KEYS", "references", "soft_start_times"]

JOINT_LIMIT = 0.7854
"""|alpha| limit of both joint motors, rad (joint protocol: 45 degrees)."""

SOFT_START_THRESHOLD = math.radians(3.0)
"""A joint's reference is held at 0 until (70)/(71) first comes within this, VIII-E."""


class GaitError(AikoError, ValueError):
    """A gait that cannot be used: unknown name, malformed file, bad key."""

    def __init__(self, source: str, reason: str, key: str | None = None) -> None:
        self.source = source
        self.key = key
        self.reason = reason
        where = f"{source}: {key}: " if key else f"{source}: "
        super().__init__(where + reason)


ANGLE_KEYS = ("A_h", "omega_h", "delta_h", "psi_h", "A_v", "omega_v", "delta_v",
               "delta_0", "psi_v")


@dataclass(frozen=True)
class Gait:
    """Parameters of (70)-(71) in SI units (rad, rad/s), plus how to start.

    ``start`` is ``"straight"`` or ``"curved"`` (the joint angles of t = 0);
    ``mu_x``/``mu_y`` are the friction coefficients the gait was designed for
    (None: the model's default).
    """

    A_h: float = 0.0
    omega_h: float = 0.0
    delta_h: float = 0.0
    psi_h: float = 0.0
    A_v: float = 0.0
    omega_v: float = 0.0
    delta_v: float = 0.0
    delta_0: float = 0.0
    psi_v: float = 0.0
    offset: float = 0.0
    soft_start: bool = False
    start: str = "straight"
    mu_x: float | None = None
    mu_y: float | None = None
    name: str = "custom"

    def __post_init__(self) -> None:
        for key in (*ANGLE_KEYS, "offset"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise GaitError(self.name, f"must be a finite number, got {v!r}", key)
        if self.start not in ("straight", "curved"):
            raise GaitError(self.name, f"must be 'straight' or 'curved', got {self.start!r}",
                            "start")
        if not isinstance(self.soft_start, bool):
            raise GaitError(self.name, f"must be true or false, got {self.soft_start!r}",
                            "soft_start")
        for key in ("mu_x", "mu_y"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0):
                raise GaitError(self.name, f"must be a number >= 0, got {v!r}", key)

    def with_(self, **changes) -> Gait:
        return replace(self, **changes)

    def to_toml_dict(self) -> dict:
        """The gait as the TOML file's tables (degrees), e.g. for a trial log."""
        gait: dict[str, Any] = {k: math.degrees(getattr(self, k)) for k in ANGLE_KEYS}
        if self.offset:
            gait["offset"] = math.degrees(self.offset)
        gait["soft_start"] = self.soft_start
        gait["start"] = self.start
        out = {"gait": gait}
        fr = {k: getattr(self, k) for k in ("mu_x", "mu_y") if getattr(self, k) is not None}
        if fr:
            out["friction"] = fr
        return out


def _deg(**kw) -> dict:
    return {k: math.radians(v) for k, v in kw.items()}


PRESETS: dict[str, Gait] = {
    # VIII-D: isotropic friction, starts curved
    "lateral-undulation": Gait(
        **_deg(A_h=40.0, omega_h=80.0, delta_h=-50.0), start="curved",
        mu_x=0.2, mu_y=0.2, name="lateral-undulation"),
    # VIII-B: orthotropic friction, starts curved
    "lateral-undulation-orthotropic": Gait(
        **_deg(A_h=30.0, omega_h=80.0, delta_h=-50.0), start="curved",
        mu_x=0.1, mu_y=0.5, name="lateral-undulation-orthotropic"),
    # VIII-E: starts straight with the soft start
    "sidewinding": Gait(
        **_deg(A_h=30.0, omega_h=80.0, delta_h=-50.0, A_v=10.0, omega_v=80.0,
               delta_v=-50.0, delta_0=90.0),
        soft_start=True, start="straight", mu_x=0.2, mu_y=0.2, name="sidewinding"),
    "still": Gait(start="straight", mu_x=0.2, mu_y=0.2, name="still"),
}


def _first_time_within(A: float, omega: float, phase: float, psi: float, thr: float) -> float:
    """Earliest t >= 0 with |A sin(omega t + phase) + psi| <= thr (inf if never)."""
    f0 = A * math.sin(phase) + psi
    if abs(f0) <= thr:
        return 0.0
    if A == 0.0 or omega == 0.0:
        return math.inf
    period = 2 * math.pi / abs(omega)
    ts = np.linspace(0.0, period, 4097)
    vals = np.abs(A * np.sin(omega * ts + phase) + psi) - thr
    hit = np.flatnonzero(vals <= 0.0)
    if hit.size == 0:
        return math.inf
    lo, hi = ts[hit[0] - 1], ts[hit[0]]
    for _ in range(60):  # bisection on the sign change
        mid = 0.5 * (lo + hi)
        if abs(A * math.sin(omega * mid + phase) + psi) <= thr:
            hi = mid
        else:
            lo = mid
    return hi


def soft_start_times(gait: Gait, n_joints: int) -> np.ndarray:
    """Per joint (n_joints, 2): the time from which (70) and (71) drive it.

    Zero without the soft start; with it, the first time the raw reference is
    within 3 degrees (VIII-E); inf if it never is.
    """
    out = np.zeros((n_joints, 2))
    if not gait.soft_start:
        return out
    for i in range(n_joints):
        out[i, 0] = _first_time_within(gait.A_h, gait.omega_h, i * gait.delta_h,
                                       gait.psi_h + gait.offset, SOFT_START_THRESHOLD)
        out[i, 1] = _first_time_within(gait.A_v, gait.omega_v, i * gait.delta_v + gait.delta_0,
                                       gait.psi_v, SOFT_START_THRESHOLD)
    return out


def references(gait: Gait, t, n_joints: int, limit: float = JOINT_LIMIT,
               t_start: np.ndarray | None = None) -> np.ndarray:
    """Joint references at time(s) t: array (..., n_joints, 4) of
    [alpha_h_r, alpha_v_r, alphadot_h_r, alphadot_v_r] (rad, rad/s), (70)-(71),
    the steering offset ``gait.offset`` (phi_0) added to every horizontal joint.

    Joint i (0-based here; i + 1 in the paper) has phase i delta. Before its soft
    start time a reference and its rate are zero; references are clamped to
    +-limit, with zero rate while clamped. ``t_start`` may pass precomputed
    :func:`soft_start_times`.
    """
    t = np.asarray(t, dtype=float)
    i = np.arange(n_joints)
    tt = t[..., None]
    ph_h = gait.omega_h * tt + i * gait.delta_h
    ph_v = gait.omega_v * tt + i * gait.delta_v + gait.delta_0
    out = np.empty(t.shape + (n_joints, 4))
    out[..., 0] = gait.A_h * np.sin(ph_h) + gait.psi_h + gait.offset
    out[..., 1] = gait.A_v * np.sin(ph_v) + gait.psi_v
    out[..., 2] = gait.A_h * gait.omega_h * np.cos(ph_h)
    out[..., 3] = gait.A_v * gait.omega_v * np.cos(ph_v)
    if gait.soft_start:
        ts = soft_start_times(gait, n_joints) if t_start is None else t_start
        for k in (0, 1):
            waiting = tt < ts[:, k]
            out[..., k] = np.where(waiting, 0.0, out[..., k])
            out[..., k + 2] = np.where(waiting, 0.0, out[..., k + 2])
    for k in (0, 1):
        clamped = np.abs(out[..., k]) > limit
        out[..., k] = np.clip(out[..., k], -limit, limit)
        out[..., k + 2] = np.where(clamped, 0.0, out[..., k + 2])
    return out

