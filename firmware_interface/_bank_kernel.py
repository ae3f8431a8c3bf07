"""The compiled tick of a bank of joint modules (numba, ``cache=True``).

Private: :class:`aiko.firmware_interface.bank.ModuleBank` checks its input
and calls :func:`bank_tick`. The readable twin is
:meth:`aiko.firmware_interface.emulator.JointModule.tick` (with
``MotorAxis.advance``, ``_substep``, ``_timed_faults`` and ``_conditions``);
the tests compare the two frame for frame and bit for bit.

Layouts, for N modules, axis k = 0 (H), 1 (V):

* per module (N,): ``t_mod`` (the module's time, s), ``live`` (powered),
  ``driving`` (pre-operational or operational), ``operational``, ``clamped``
  (a reference is clamped), ``holding``, ``seen_sync``, ``last_sync`` (s),
  ``enc_reported``, ``next_hb`` (s); ``par`` (N, 4): omega_max (rad/s), k_p
  (1/rad), backlash (rad), limit (rad); ``ideal``; ``fault`` (N, 4):
  saturate_from (s, inf: never), saturate_motor, encoder_fault_at (s, inf:
  never), encoder_motor;
* per axis (N, 2): ``theta``, ``link``, ``duty`` (%), ``speed`` (rad/s),
  ``strength``, ``enc_ok``, ``reported``, ``target``, ``omega`` (rad/s),
  ``sat_since`` (s, NaN: not saturated), ``cur_lim``;
* ``codes`` (9,): the EMCY codes SYNC_TIMEOUT, CURRENT_LIMIT, ERROR_RESET,
  ENCODER_FAULT, the motor NONE, then the error-register bits of a clamped
  reference, an encoder fault, a current limit and a SYNC timeout;
* ``events`` (cap, 5) int64, written: [module, substep, code, motor, error
  register]; ``n_sub``, ``t_start`` (N,) written: each module's substeps this
  tick and its time before it; ``attention`` (N,) written: a module emitted
  an event or a heartbeat falls due.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .emulator import _MAX_SUBSTEP as MAX_SUBSTEP
from .emulator import _SATURATED as SATURATED
from .protocol import CURRENT_LIMIT_TIME as CURRENT_LIMIT_TIME_S
from .protocol import SYNC_TIMEOUT as SYNC_TIMEOUT_S


@njit(cache=True, error_model="numpy", inline="always")
def _couple(theta, link, j, k, half, move_motor):
    d = link[j, k] - theta[j, k]
    if move_motor:
        if d > half:
            theta[j, k] = link[j, k] - half
        elif d < -half:
            theta[j, k] = link[j, k] + half
    else:
        if d > half:
            link[j, k] = theta[j, k] + half
        elif d < -half:
            link[j, k] = theta[j, k] - half


@njit(cache=True, error_model="numpy", inline="always")
def _advance_axis(j, k, dt, driven, target, omega_ref, par, ideal, theta, link, duty, speed,
                  strength, enc_ok, reported):
    """One motor over dt: MotorAxis.advance (target None: ``driven`` False)."""
    half = 0.5 * par[j, 2]
    if not driven or not enc_ok[j, k]:
        duty[j, k] = 0.0
        speed[j, k] = 0.0
        _couple(theta, link, j, k, half, True)
    elif ideal[j]:
        duty[j, k] = 0.0
        speed[j, k] = omega_ref
        theta[j, k] = target
        _couple(theta, link, j, k, half, False)
    else:
        omega_max = par[j, 0]
        err = target - theta[j, k]
        d = 100.0 * (par[j, 1] * err + omega_ref / omega_max)
        if d > 100.0:
            d = 100.0
        elif d < -100.0:
            d = -100.0
        duty[j, k] = d
        step = d / 100.0 * omega_max * strength[j, k] * dt
        if (err > 0 and step > err and omega_ref <= 0) or (err < 0 and step < err
                                                          and omega_ref >= 0):
            step = err
        speed[j, k] = step / dt if dt > 0 else 0.0
        th = theta[j, k] + step
        theta[j, k] = th
        dl = link[j, k] - th
        if dl > half:
            link[j, k] = th + half
        elif dl < -half:
            link[j, k] = th - half
    if enc_ok[j, k]:
        reported[j, k] = theta[j, k]


@njit(cache=True, error_model="numpy", inline="always")
def _register(j, clamped, enc_ok, cur_lim, holding, codes):
    reg = 0
    if clamped[j]:
        reg |= codes[5]
    if not enc_ok[j, 0] or not enc_ok[j, 1]:
        reg |= codes[6]
    if cur_lim[j, 0] or cur_lim[j, 1]:
        reg |= codes[7]
    if holding[j]:
        reg |= codes[8]
    return reg


@njit(cache=True, error_model="numpy", inline="always")
def _event(events, e, j, i, code, motor, reg):
    events[e, 0] = j
    events[e, 1] = i
    events[e, 2] = code
    events[e, 3] = motor
    events[e, 4] = reg
    return e + 1


@njit(cache=True, error_model="numpy")
def _conditions(j, i, now, e, operational, clamped, holding, seen_sync, last_sync, theta, duty,
                target, omega, enc_ok, sat_since, cur_lim, enc_reported, fault, codes, events):
    """JointModule._conditions at substep i: the events it emits, from row e;
    returns the next free row."""
    if (seen_sync[j] and not holding[j] and operational[j]
            and now - last_sync[j] >= SYNC_TIMEOUT_S - 1e-12):
        holding[j] = True
        target[j, 0] = theta[j, 0]
        target[j, 1] = theta[j, 1]
        omega[j, 0] = 0.0
        omega[j, 1] = 0.0
        e = _event(events, e, j, i, codes[0], codes[4],
                   _register(j, clamped, enc_ok, cur_lim, holding, codes))
    for k in range(2):
        if abs(duty[j, k]) >= SATURATED:
            if math.isnan(sat_since[j, k]):
                sat_since[j, k] = now
            if not cur_lim[j, k] and now - sat_since[j, k] > CURRENT_LIMIT_TIME_S:
                cur_lim[j, k] = True
                e = _event(events, e, j, i, codes[1], k,
                           _register(j, clamped, enc_ok, cur_lim, holding, codes))
        elif not math.isnan(sat_since[j, k]) or cur_lim[j, k]:
            sat_since[j, k] = np.nan
            if cur_lim[j, k]:
                cur_lim[j, k] = False
                e = _event(events, e, j, i, codes[2], k,
                           _register(j, clamped, enc_ok, cur_lim, holding, codes))
    em = int(fault[j, 3])
    if not enc_reported[j] and not enc_ok[j, em]:
        enc_reported[j] = True
        e = _event(events, e, j, i, codes[3], em,
                   _register(j, clamped, enc_ok, cur_lim, holding, codes))
    return e


@njit(cache=True, error_model="numpy")
def bank_tick(lo, hi, t, t_mod, live, driving, operational, clamped, holding, seen_sync,
              last_sync, enc_reported, next_hb, par, ideal, fault, theta, link, duty, speed,
              strength, enc_ok, reported, target, omega, sat_since, cur_lim, codes, events,
              n_sub, t_start, attention):
    """Modules lo..hi-1 advanced to t (JointModule.tick for each, without the
    frames: those are the events, turned into frames by the caller). Returns
    the number of event rows written, or, changing nothing, minus the rows
    ``events`` needs if it has fewer."""
    need = 0     # at most a SYNC timeout, two current-limit changes and an
    for j in range(lo, hi):     # encoder fault per module and substep
        if live[j] and t > t_mod[j]:
            need += 4 * max(1, math.ceil((t - t_mod[j]) / MAX_SUBSTEP - 1e-9))
    if need > events.shape[0]:
        return -need
    e = 0
    for j in range(lo, hi):
        n_sub[j] = 0
        attention[j] = False
        if not live[j] or t <= t_mod[j]:
            continue
        t0 = t_mod[j]
        n = max(1, math.ceil((t - t0) / MAX_SUBSTEP - 1e-9))
        h = (t - t0) / n
        timed = fault[j, 0] < np.inf or fault[j, 2] < np.inf
        e0 = e
        limit = par[j, 3]
        for i in range(1, n + 1):
            now = t if i == n else t0 + i * h
            if timed:
                if now >= fault[j, 0]:
                    strength[j, int(fault[j, 1])] = 0.1
                if now >= fault[j, 2]:
                    enc_ok[j, int(fault[j, 3])] = False
            for k in range(2):
                w = 0.0 if holding[j] else omega[j, k]
                _advance_axis(j, k, h, driving[j], target[j, k], w, par, ideal, theta, link,
                              duty, speed, strength, enc_ok, reported)
                if driving[j] and w != 0.0:
                    target[j, k] = max(-limit, min(limit, target[j, k] + w * h))
            t_mod[j] = now
            e = _conditions(j, i, now, e, operational, clamped, holding, seen_sync, last_sync,
                            theta, duty, target, omega, enc_ok, sat_since, cur_lim, enc_reported,
                            fault, codes, events)
        n_sub[j] = n
        t_start[j] = t0
        attention[j] = e > e0 or next_hb[j] <= t + 1e-12
    return e
