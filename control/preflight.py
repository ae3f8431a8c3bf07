"""Preflight: the gait's references over a whole trial checked against what
Aiko's joint modules can do, before any frame is sent.

Pure. Two checks per motor (H and V of every joint), on the references the
streamer would send (one per period, :func:`aiko.control.gait.references`):

* the joint limit: how long, and from when, the raw reference (70)-(71) lies
  beyond +-45 degrees, where the modules would clamp it;
* the motor speed: the speed a motor needs to follow, per period the larger of
  the REF's rate and the mean rate to the next period's angle, against the
  motor's speed at full duty (:class:`aiko.firmware_interface.emulator.
  JointModelParams.omega_max`, 3 rad/s on Aiko). A module whose reference
  outruns its motor saturates, and after 200 ms trips the current limit.

:func:`preflight` returns the table; its ``refusal`` is the one-line reason a
trial is refused (None when the gait can be followed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aiko.firmware_interface.emulator import JointModelParams
from aiko.model.errors import AikoError

from .gait import JOINT_LIMIT, Gait, references
from .ramp import RAMP_DUTY, RAMP_SKIP, ramp_duration

__all__ = ["MotorCheck", "Preflight", "PreflightRefused", "preflight", "required_speed",
           "OMEGA_MAX", "UNBOUNDED_SPAN", "format_table"]

OMEGA_MAX = JointModelParams().omega_max
"""Aiko's motor speed at full duty, rad/s (the joint modules' parameters)."""

UNBOUNDED_SPAN = 60.0
"""Seconds checked for a trial without a duration (the gait is periodic)."""


class PreflightRefused(AikoError):
    """A gait the joint modules cannot follow; ``report`` is its preflight."""

    def __init__(self, report: Preflight) -> None:
        self.report = report
        super().__init__(report.refusal)


@dataclass(frozen=True)
class MotorCheck:
    """One motor's line of the preflight table (angles rad, rates rad/s, s)."""

    joint: int              # 1-based, as the node id
    motor: str              # "H" or "V"
    start: float            # reference at t = 0 (as sent, clamped)
    peak: float             # largest |reference| before clamping
    clamped_s: float        # time the reference spends clamped
    first_clamped: float | None
    value_clamped: float | None  # the raw reference at first_clamped
    peak_rate: float        # largest speed the motor must make
    t_peak_rate: float

    @property
    def name(self) -> str:
        return f"{self.joint} {self.motor}"


@dataclass(frozen=True)
class Preflight:
    """The preflight of one gait over ``span`` seconds (see the module docstring)."""

    gait: str
    span: float
    period: float
    limit: float
    omega_max: float
    motors: tuple[MotorCheck, ...]
    ramp_from_straight: float

    @property
    def clamped(self) -> list[MotorCheck]:
        return [m for m in self.motors if m.first_clamped is not None]

    @property
    def too_fast(self) -> list[MotorCheck]:
        return [m for m in self.motors if m.peak_rate > self.omega_max * (1 + 1e-9)]

    @property
    def problems(self) -> list[str]:
        out = []
        clamped = self.clamped
        if clamped:
            first = min(clamped, key=lambda m: (m.first_clamped, m.joint))
            worst = max(clamped, key=lambda m: m.clamped_s)
            names = ", ".join(m.name for m in clamped)
            out.append(
                f"references beyond the joint limit ({math.degrees(self.limit):.1f} deg) would "
                f"be clamped on joint{'s' if len(clamped) > 1 else ''} {names} (first joint "
                f"{first.name} at t = {first.first_clamped:.2f} s, "
                f"{math.degrees(first.value_clamped or 0.0):+.1f} deg; joint {worst.name} clamped "
                f"{100 * worst.clamped_s / self.span:.0f} % of the time)")
        fast = self.too_fast
        if fast:
            m = max(fast, key=lambda m: m.peak_rate)
            out.append(
                f"joint {m.name} at t = {m.t_peak_rate:.2f} s needs "
                f"{math.degrees(m.peak_rate):.0f} deg/s, more than its motor's "
                f"{math.degrees(self.omega_max):.0f} deg/s at full duty"
                + (f" ({len(fast)} motors too fast)" if len(fast) > 1 else ""))
        return out

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def refusal(self) -> str | None:
        """One line: why the gait is refused, or None."""
        p = self.problems
        if not p:
            return None
        return f"preflight refuses {self.gait}: " + "; ".join(p) + " (--force streams it anyway)"

    def to_dict(self) -> dict:
        """For the trial log (degrees, as the table)."""
        return {"gait": self.gait, "span_s": self.span, "ok": self.ok, "problems": self.problems,
                "ramp_from_straight_s": self.ramp_from_straight,
                "motors": [{"joint": m.joint, "motor": m.motor,
                            "start_deg": math.degrees(m.start), "peak_deg": math.degrees(m.peak),
                            "clamped_s": m.clamped_s,
                            "peak_rate_deg_s": math.degrees(m.peak_rate),
                            "t_peak_rate": m.t_peak_rate} for m in self.motors]}


def required_speed(refs: np.ndarray, period: float) -> np.ndarray:
    """The speed (rad/s) each motor must make in each period to follow
    references (k, joints, 4) sent once per period: the REF's rate, or the
    mean rate to the next period's angle where that is larger. (k, joints, 2)."""
    need = np.abs(refs[..., 2:]).copy()
    if len(refs) > 1:
        need[:-1] = np.maximum(need[:-1], np.abs(np.diff(refs[..., :2], axis=0)) / period)
    return need


def preflight(gait: Gait, n_joints: int, duration: float | None, period: float = 0.1,
              limit: float = JOINT_LIMIT, omega_max: float = OMEGA_MAX) -> Preflight:
    """Check ``gait`` on joints 1..n_joints over ``duration`` s of streaming
    (``UNBOUNDED_SPAN`` when None), one reference per ``period``."""
    if n_joints < 1:
        raise ValueError("n_joints must be >= 1")
    span = UNBOUNDED_SPAN if duration is None else float(duration)
    n = int(math.floor(span / period + 1e-9)) + 1
    t = np.arange(n) * period
    raw = references(gait, t, n_joints, limit=math.inf)    # (n, joints, 4)
    sent = references(gait, t, n_joints, limit=limit)
    need = required_speed(sent, period)
    motors = []
    for j in range(n_joints):
        for k, name in enumerate("HV"):
            beyond = np.abs(raw[:, j, k]) > limit
            first = int(np.argmax(beyond)) if beyond.any() else None
            i_rate = int(np.argmax(need[:, j, k]))
            motors.append(MotorCheck(
                joint=j + 1, motor=name, start=float(sent[0, j, k]),
                peak=float(np.max(np.abs(raw[:, j, k]))),
                clamped_s=float(beyond.sum() * period),
                first_clamped=None if first is None else float(t[first]),
                value_clamped=None if first is None else float(raw[first, j, k]),
                peak_rate=float(need[i_rate, j, k]), t_peak_rate=float(t[i_rate])))
    straight = np.zeros((n_joints, 2))
    ramp = ramp_duration(straight, sent[0, :, :2], RAMP_DUTY * omega_max, period, RAMP_SKIP)
    return Preflight(gait.name, span, period, limit, omega_max, tuple(motors), ramp)


def format_table(p: Preflight, bounded: bool = True) -> list[str]:
    """The preflight as lines of text, one row per joint (degrees)."""
    span = f"{p.span:g} s" if bounded else f"{p.span:g} s (no duration: the gait repeats)"
    lines = [f"preflight of {p.gait}: {span} at {1 / p.period:g} Hz; joint limit "
             f"{math.degrees(p.limit):.1f} deg; motor speed at full duty "
             f"{math.degrees(p.omega_max):.0f} deg/s",
             "         " + "  ".join(f"{'-- ' + m + ' motor --':^44s}" for m in "HV"),
             "  joint  " + "  ".join(f"{'start':>8s} {'peak':>6s} {'clamped':>7s} "
                                      f"{'rate':>6s} {'at t':>6s} {'duty':>5s} " for _ in "HV"),
             "         " + "  ".join(f"{'deg':>8s} {'deg':>6s} {'s':>7s} {'deg/s':>6s} "
                                      f"{'s':>6s} {'%':>5s} " for _ in "HV")]
    by_joint: dict[int, dict[str, MotorCheck]] = {}
    for m in p.motors:
        by_joint.setdefault(m.joint, {})[m.motor] = m
    for joint, ms in by_joint.items():
        cells = []
        for name in "HV":
            m = ms[name]
            flag = ("!" if m.first_clamped is not None
                    or m.peak_rate > p.omega_max * (1 + 1e-9) else " ")
            cells.append(f"{math.degrees(m.start):8.1f} {math.degrees(m.peak):6.1f} "
                         f"{m.clamped_s:7.1f} {math.degrees(m.peak_rate):6.1f} "
                         f"{m.t_peak_rate:6.2f} {100 * m.peak_rate / p.omega_max:5.0f}{flag}")
        lines.append(f"  {joint:5d}  " + "  ".join(cells))
    lines.append(f"  ramp to the start posture from straight: {p.ramp_from_straight:.1f} s "
                 f"(fastest joint at {100 * RAMP_DUTY:.0f} % of full duty)")
    lines.append(f"  verdict: {'can be followed' if p.ok else p.refusal}")
    return [line.rstrip() for line in lines]
