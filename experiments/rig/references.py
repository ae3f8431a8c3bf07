"""The references a lagging plant's PD drives get from the motors' record.

The simulated Aiko's physics runs behind the emulated modules and steps with
the motor angle of each step's own time, interpolated in the record the
modules keep of their motors (:meth:`~aiko.experiments.rig.plant.SimulatedAiko.note_motors`);
the drive pulls the link to the edge of the free play around the motor, or
leaves it alone inside the play or behind a limp motor.

:func:`recorded_motors` gives each step's motor angle and speed (a numba
kernel: the physics computes one chunk of a few steps 250-500 times a
second, where two dozen small numpy calls cost as much as the steps
themselves); the model takes the play up at every step from them
(:meth:`aiko.model.SnakeModel.run_steps_through_play`). :func:`pd_references`
is the play's readable numpy form, the references of one step from the
links' angles at its start; :func:`recorded_references` (the two together,
the links' angles held over the chunk) and its numpy twin
:func:`recorded_references_reference` are what the tests compare. Pure:
arrays in, arrays out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from aiko.model.errors import ParameterError

__all__ = ["recorded_motors", "recorded_references", "recorded_references_reference",
           "pd_references"]

_EPS_T = 1e-9
"""Times (s) closer than this are the same tick."""


def pd_references(theta: np.ndarray, speed: np.ndarray, link: np.ndarray, half: np.ndarray,
                  driven: np.ndarray) -> np.ndarray:
    """References (m, j, 4) [alpha_h, alpha_v, omega_h, omega_v] for the PD law
    from the motors' angles and speeds (m, j, 2) at each step, the links'
    angles and rates ``link`` (j, 4) (65)-(67), half the free play ``half``
    (j, 2) rad and whether each motor is driven (j, 2): the link pulled to
    the edge of the play (at the motor's speed), left where it is inside it
    or by a limp motor."""
    angle, rate = link[None, :, :2], link[None, :, 2:]
    ref = np.clip(angle, theta - half[None], theta + half[None])
    engaged = ref != angle
    out = np.empty(theta.shape[:2] + (4,))
    out[..., :2] = np.where(driven[None], ref, angle)
    out[..., 2:] = np.where(driven[None], np.where(engaged, speed, rate), rate)
    return out


def recorded_references_reference(t0: float, dt: float, m: int, rec_t: np.ndarray,
                                  rec_x: np.ndarray, theta0: np.ndarray, link: np.ndarray,
                                  half: np.ndarray, driven: np.ndarray
                                  ) -> tuple[np.ndarray, np.ndarray] | None:
    """The numpy twin of :func:`recorded_references` (same arguments and
    result)."""
    t_steps = t0 + dt * np.arange(1, m + 1)
    if len(rec_t) == 0 or rec_t[-1] < t_steps[-1] - 0.5 * dt:
        return None
    later = np.flatnonzero(rec_t > t0 + _EPS_T)
    if len(later) == 0:
        return None
    past = np.flatnonzero(rec_t[later] >= t_steps[-1] + _EPS_T)
    later = later[:past[0] + 1] if len(past) else later       # up to the first past the end
    ts = np.concatenate([[t0], rec_t[later]])
    th = np.concatenate([rec_x[later[:1]], rec_x[later]])          # (k, j, 2, 2)
    th[0, ..., 0] = theta0
    i = np.clip(np.searchsorted(ts - _EPS_T, t_steps), 1, len(ts) - 1)
    w = np.clip((t_steps - ts[i - 1]) / np.maximum(ts[i] - ts[i - 1], 1e-12), 0.0, 1.0)
    theta = th[i - 1, ..., 0] + (th[i, ..., 0] - th[i - 1, ..., 0]) * w[:, None, None]
    return pd_references(theta, th[i, ..., 1], link, half, driven), theta[-1]


def recorded_motors(t0: float, dt: float, m: int, rec_t: np.ndarray, rec_x: np.ndarray,
                    theta0: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The motors (m, j, 4) ``[theta_h, theta_v, speed_h, speed_v]`` at the m
    steps of ``dt`` s after the plant's time ``t0`` (s) and their angles
    (j, 2) at the last step, or None where the record does not reach the
    last step (within half a step).

    rec_t (k,): the record's times, ascending, s; rec_x (k, j, 2, 2): the
    motors' [angle, speed] at each; theta0 (j, 2): the motor angle the plant
    used at t0. Each step's motor angle is interpolated between the entries
    around its time (from theta0 at t0), its speed the one recorded at the
    end of that interval."""
    if m < 1 or not dt > 0:
        raise ParameterError("steps", (m, dt), "need m >= 1 steps of a positive dt")
    j = len(theta0)
    if rec_x.shape != (len(rec_t), j, 2, 2) or theta0.shape != (j, 2):
        raise ParameterError("record", rec_x.shape, f"does not fit {j} joints")
    out = np.empty((m, j, 4))
    theta_end = np.empty((j, 2))
    found = _recorded_motors(float(t0), float(dt), rec_t, rec_x, theta0, out, theta_end)
    return (out, theta_end) if found else None


def recorded_references(t0: float, dt: float, m: int, rec_t: np.ndarray, rec_x: np.ndarray,
                        theta0: np.ndarray, link: np.ndarray, half: np.ndarray,
                        driven: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """References (m, j, 4) for the PD law at the m steps (see
    :func:`recorded_motors`) with the links' angles and rates ``link`` (j, 4)
    held over them, and the motors' angles (j, 2) at the last step, or None
    where the record does not reach it; half (j, 2): half the free play,
    rad; driven (j, 2): whether each motor is driven. See
    :func:`pd_references` for the drive."""
    j = len(link)
    if (link.shape != (j, 4) or theta0.shape != half.shape or theta0.shape != (j, 2)
            or driven.shape != (j, 2)):
        raise ParameterError("record", rec_x.shape, f"does not fit {j} joints")
    found = recorded_motors(t0, dt, m, rec_t, rec_x, theta0)
    if found is None:
        return None
    motors, theta_end = found
    return pd_references(motors[..., :2], motors[..., 2:], link, half, driven), theta_end


@njit(cache=True, error_model="numpy")
def _recorded_motors(t0, dt, rec_t, rec_x, theta0, out, theta_end):  # pragma: no cover - compiled
    """Kernel of :func:`recorded_motors`; fills out (m, j, 4) and theta_end
    (j, 2), returns whether the record reaches the last step."""
    m, j = out.shape[0], out.shape[1]
    k = rec_t.shape[0]
    t_last = t0 + dt * m
    if k == 0 or rec_t[k - 1] < t_last - 0.5 * dt:
        return False
    first = 0                          # the first entry after t0
    while first < k and not rec_t[first] > t0 + _EPS_T:
        first += 1
    if first == k:
        return False
    end = first                        # the last entry used: the first past the last step
    while end < k - 1 and not rec_t[end] >= t_last + _EPS_T:
        end += 1
    n_ts = end - first + 2             # t0, then the entries first..end
    i = 1
    for s in range(m):
        t = t0 + dt * (s + 1)
        while i < n_ts - 1 and rec_t[first + i - 1] - _EPS_T < t:
            i += 1                     # the first time (less _EPS_T) at or after t
        a = first + i - 2              # the entry before (-1 + first: t0 itself)
        b = first + i - 1
        ta = t0 if i == 1 else rec_t[a]
        gap = rec_t[b] - ta
        if gap < 1e-12:
            gap = 1e-12
        w = min(max((t - ta) / gap, 0.0), 1.0)
        for q in range(j):
            for r in range(2):
                lo = theta0[q, r] if i == 1 else rec_x[a, q, r, 0]
                theta = lo + (rec_x[b, q, r, 0] - lo) * w
                theta_end[q, r] = theta
                out[s, q, r] = theta
                out[s, q, 2 + r] = rec_x[b, q, r, 1]
    return True
