"""The simulated Aiko offline, compiled: the modules' ticks and the physics
between two protocol frames in one call (numba, ``cache=True``).

Private: :func:`aiko.experiments.rig.plant.drive_plant` checks its input,
sends the REF and SYNC frames through the bank in Python and calls
:func:`plant_ticks` for the ticks between them. Its readable twin is
:func:`aiko.experiments.rig.plant.drive_plant_reference` (the bank ticked and
:class:`~aiko.experiments.rig.plant.SimulatedAiko` advanced from Python,
tick by tick); the tests compare the two to the last bit. Each tick does
what the twin does: the bank's tick (:func:`~aiko.firmware_interface._bank_kernel.bank_tick`;
its frames are not sent offline), the motors' angles interpolated linearly
over the tick's physics steps from where the physics last saw them, the
steps through the free play (:func:`aiko.model._kernels._advance`), the
links' angles handed back to the modules, the samples due.

Arguments: ``clock`` (4,) [t, model t, work, next sample] s, s, J, s,
updated; ``bank``: the bank's arrays in :func:`bank_tick`'s order; ``body``:
(q, u, P, active, dP) of the model's state, updated; ``kin``: (par, sol,
pegs, steps, no_refs) of :meth:`aiko.model.SnakeModel.kernel_inputs`;
``motion``: (theta_prev (j, 2), play (j, 4), Rs (n, 3, 3), ang (j, 4));
``counts`` (3,) int64 [steps, iterations, unconverged], updated;
``samples``: (t (k,), positions (k, n, 3), work (k,)) and ``ns`` (1,) int64
the samples written, updated; ``attend`` (2,) int64: [1 to stop after a tick
in which a module has frames to send (the simulated rig in virtual time
sends them; offline 0: they are dropped), and on such a stop the tick's
event rows].
"""

from __future__ import annotations

import numpy as np
from numba import njit

from aiko.firmware_interface._bank_kernel import bank_tick
from aiko.model._kernels import _advance, _all_rotations, joint_angles

OK = 0
"""plant_ticks's code: it stopped before a tick with a frame due, or at the end."""
ATTENTION = 1
"""plant_ticks's code: it stopped after a tick in which a module has frames to
send (heartbeats, EMCY; only when asked to)."""
EVENTS_FULL = -10
"""plant_ticks's code: the bank's event rows were too few for a tick."""


@njit(cache=True, error_model="numpy")
def _sum(a, n):
    """The sum of a[:n] in the order numpy's sum takes up to 128 entries
    (eight running sums, then pairs), so that the work agrees with the
    twin's to the last bit; beyond 128 steps a tick (a step under 16 us)
    numpy splits further and the last bits may differ."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return res
    r = np.empty(8)
    for j in range(8):
        r[j] = a[j]
    i = 8
    while i < n - (n % 8):
        for j in range(8):
            r[j] += a[i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[i]
        i += 1
    return res


@njit(cache=True, error_model="numpy")
def _physics(t, clock, theta, speed, live, driving, enc_ok, link, body, kin, motion, counts,
             dt):
    """The physics to the step nearest t (SimulatedAiko.advance) with the
    modules' motors (theta, speed (j, 2)), driven where live, driving and
    enc_ok; the links' angles back into link (j, 2). 0 or the step's code
    below zero."""
    q, u, P, active, dP = body
    par, sol, pegs, steps, no_refs = kin
    theta_prev, play, Rs, ang = motion
    m = max(0, int(round((t - clock[1]) / dt)))
    if m <= 0:
        return 0
    nj = theta.shape[0]
    motors = np.empty((m, nj, 4))
    for i in range(m):
        frac = (i + 1) / m
        for j in range(nj):
            for k in range(2):
                motors[i, j, k] = theta_prev[j, k] + (theta[j, k] - theta_prev[j, k]) * frac
                motors[i, j, 2 + k] = speed[j, k]
    for j in range(nj):
        for k in range(2):
            theta_prev[j, k] = motors[m - 1, j, k]
            on = live[j] and driving[j] and enc_ok[j, k]
            play[j, 2 + k] = 1.0 if on else 0.0
    stats = np.zeros(3, dtype=np.int64)
    work = np.zeros(m)
    done = _advance(q, u, P, active, dP, no_refs, motors, play, par, sol, pegs, steps, m,
                    stats, work)
    if done < 0:
        return done
    clock[1] = clock[1] + m * dt
    counts[0] += m
    counts[1] += stats[0]
    counts[2] += stats[2]
    clock[2] += _sum(work, m)
    _all_rotations(q, Rs)
    joint_angles(Rs, u, ang)
    for j in range(nj):
        link[j, 0] = ang[j, 0]
        link[j, 1] = ang[j, 1]
    return 0


@njit(cache=True, error_model="numpy", nogil=True)
def plant_ticks(t_event, end, tick, sample_dt, clock, bank, codes, events, body, kin, motion,
                counts, samples, ns, dt, attend):
    """Ticks of ``tick`` s from clock[0] until the next one would have a frame
    due (t_event), or to ``end``, or (``attend``) after one in which a module
    has frames to send: see the module docstring. Returns OK, ATTENTION, or a
    code below zero (the step's, or EVENTS_FULL). Runs without the GIL (the
    parallel model's thread steps meanwhile in virtual time)."""
    (t_mod, live, driving, operational, clamped, holding, seen_sync, last_sync, enc_reported,
     next_hb, par_m, ideal, fault, theta, link, duty, speed, strength, enc_ok, reported,
     target, omega, sat_since, cur_lim, n_sub, t_start, attention) = bank
    s_t, s_pos, s_work = samples
    q = body[0]
    n = theta.shape[0]
    while clock[0] < end - 1e-12:
        t = min(clock[0] + tick, end)
        if t_event <= t + 1e-12:
            return OK
        clock[0] = t
        rows = bank_tick(0, n, t, t_mod, live, driving, operational, clamped, holding,
                         seen_sync, last_sync, enc_reported, next_hb, par_m, ideal, fault, theta,
                         link, duty, speed, strength, enc_ok, reported, target, omega, sat_since,
                         cur_lim, codes, events, n_sub, t_start, attention)
        if rows < 0:
            return EVENTS_FULL
        code = _physics(t, clock, theta, speed, live, driving, enc_ok, link, body, kin, motion,
                        counts, dt)
        if code < 0:
            return code
        if attend[0] == 1 and attention.any():
            attend[1] = rows
            return ATTENTION
        while clock[3] <= clock[1] + 1e-9 and ns[0] < s_t.shape[0]:
            k = ns[0]
            s_t[k] = clock[3]
            for i in range(q.shape[0]):
                for c in range(3):
                    s_pos[k, i, c] = q[i, c]
            s_work[k] = clock[2]
            ns[0] = k + 1
            clock[3] += sample_dt
    return OK
