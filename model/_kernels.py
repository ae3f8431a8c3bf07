"""Compiled kernels of the time-stepping scheme (numba, ``cache=True``).

Private: the public wrappers in :mod:`aiko.model.simulation` check their input and
call these. Every kernel takes plain arrays and scalars. The readable dense twin
of the whole step is :mod:`aiko.model.reference`; tests compare the two. The
step's products are summed with :data:`aiko.model._fused.fma` (rounded once)
where the code says so, never by the compiler's choice, so the step gives the
same bits wherever it is compiled in.

Array layouts (n links, c = 2n contact spheres, nJ = n - 1 joints):

* ``q``  (n, 7): ``[x, y, z, e0, e1, e2, e3]`` per link, (4)
* ``u``  (n, 6): ``[v_x, v_y, v_z, omega_x, omega_y, omega_z]``, omega in the body
  frame B_i, (5)
* ``refs`` (nJ, 4): ``[alpha_h_r, alpha_v_r, alphadot_h_r, alphadot_v_r]``
* ``P``  (2n, 5): contact impulsions per sphere, rows ordered as g_N in (10)
  (front spheres of links 1..n, then rear spheres); columns
  ``[P_N, P_Tx, P_Ty, P_Vx, P_Vy]`` with T in the frame Pi_i (27) and V along the
  ground axes (33).
* ``par``: see :data:`PAR_FIELDS`; ``sol``: see :data:`SOL_FIELDS`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._chain import (
    NR,
    all_right,
    chol_factor,
    eliminations,
    joint_blocks,
    joint_rhs,
    joint_rhs_change,
    link_block,
    link_joints,
    link_velocity,
    propagate_left,
    sub_joint_velocity,
)
from ._fused import fma
from .prox import _prox_disc, _prox_ellipse, _prox_ellipse_warm

PAR_FIELDS = (
    "L", "L_SC", "L_GS", "m", "Theta1", "Theta3", "g_x", "g_y", "g_z",
    "K_hp", "K_hd", "K_vp", "K_vd", "mu_x", "mu_y", "mu_V", "e_N", "contact", "k_pc", "k_vc",
)
SOL_FIELDS = (
    "dt", "solver", "alpha", "r_N", "r_T", "r_V", "eps", "T_rel", "T_abs",
    "u_tol", "max_iter", "active_tol", "projection", "warm_start", "link_passes", "drive",
    "drive_weight", "extrapolate",
)
SOLVER_CODES = {"newton": 0, "jor": 1, "sor": 2}
CONTACT_CODES = {"hard": 0, "compliant": 1}
PROJECTION_CODES = {"link1": 0, "com": 1}
DRIVE_CODES = {"explicit": 0, "implicit": 1}

EXTRAPOLATION_GAIN = 0.9
"""The share of a ground contact's last change of impulses added to its warm
start (SolverParams.extrapolate). Below 1 the extrapolation of the solver's
own drift, among the impulses the velocities do not see (the contact problem
is rank deficient), dies out instead of carrying on: at 1 a single resting
link kept a tolerance-level jiggle (5e-6 rad/s) for good; at 0.9 it comes to
rest as with the plain warm start, and lateral undulation still needs 1.6
sweeps a step instead of 2.4."""
_TINY = 1e-300


# --------------------------------------------------------------------------
# small vector helpers
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, error_model="numpy", inline="always")
def rotation(p, R):
    """Rotation matrix R^I_B = H Hbar^T of the Euler parameters p, (6)-(7).

    p (4,) need not be normalised: it is scaled to unit norm first.
    Writes R (3, 3) and returns it.
    """
    s = 1.0 / math.sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3])
    e0 = p[0] * s
    e1 = p[1] * s
    e2 = p[2] * s
    e3 = p[3] * s
    R[0, 0] = e0 * e0 + e1 * e1 - e2 * e2 - e3 * e3
    R[0, 1] = 2.0 * (e1 * e2 - e0 * e3)
    R[0, 2] = 2.0 * (e1 * e3 + e0 * e2)
    R[1, 0] = 2.0 * (e1 * e2 + e0 * e3)
    R[1, 1] = e0 * e0 - e1 * e1 + e2 * e2 - e3 * e3
    R[1, 2] = 2.0 * (e2 * e3 - e0 * e1)
    R[2, 0] = 2.0 * (e1 * e3 - e0 * e2)
    R[2, 1] = 2.0 * (e2 * e3 + e0 * e1)
    R[2, 2] = e0 * e0 - e1 * e1 - e2 * e2 + e3 * e3
    return R


@njit(cache=True, error_model="numpy")
def _all_rotations(q, Rs):
    for i in range(q.shape[0]):
        rotation(q[i, 3:7], Rs[i])


@njit(cache=True, error_model="numpy")
def _kinematic_update(q, u, h, out):
    """out = q + h F(q) u with F of (73)-(74): r += h v, p += h/2 Hbar^T omega."""
    for i in range(q.shape[0]):
        for k in range(3):
            out[i, k] = q[i, k] + h * u[i, k]
        e0 = q[i, 3]
        e1 = q[i, 4]
        e2 = q[i, 5]
        e3 = q[i, 6]
        w0 = u[i, 3]
        w1 = u[i, 4]
        w2 = u[i, 5]
        c0, c1, c2 = _cross(e1, e2, e3, w0, w1, w2)
        out[i, 3] = e0 + 0.5 * h * (-e1 * w0 - e2 * w1 - e3 * w2)
        out[i, 4] = e1 + 0.5 * h * (c0 + e0 * w0)
        out[i, 5] = e2 + 0.5 * h * (c1 + e0 * w1)
        out[i, 6] = e3 + 0.5 * h * (c2 + e0 * w2)


@njit(cache=True, error_model="numpy")
def _normalise_quaternions(q):
    for i in range(q.shape[0]):
        s = math.sqrt(q[i, 3] ** 2 + q[i, 4] ** 2 + q[i, 5] ** 2 + q[i, 6] ** 2)
        for k in range(3, 7):
            q[i, k] /= s


# --------------------------------------------------------------------------
# gap functions and Jacobians
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def contact_gaps(q, L_SC, L_GS, g_N):
    """Gap functions of the end spheres (9)-(10). g_N (2n,): fronts, then rears."""
    n = q.shape[0]
    R = np.empty((3, 3))
    for i in range(n):
        rotation(q[i, 3:7], R)
        g_N[i] = q[i, 2] + L_GS * R[2, 2] - L_SC
        g_N[n + i] = q[i, 2] - L_GS * R[2, 2] - L_SC
    return g_N


@njit(cache=True, error_model="numpy", inline="always")
def _set_column(W, col, R, d0, d1, d2, r0, r1, r2, translational):
    """Column of a generalised force direction on one link.

    Translational: [d; R^T (r x d)] (the body-fixed point at r from G moving along
    d, (17)-(18), (21)-(22)); rotational only: [0; R^T (d x r)] (36).
    """
    if translational:
        W[0, col] = d0
        W[1, col] = d1
        W[2, col] = d2
        c0, c1, c2 = _cross(r0, r1, r2, d0, d1, d2)
    else:
        W[0, col] = 0.0
        W[1, col] = 0.0
        W[2, col] = 0.0
        c0, c1, c2 = _cross(d0, d1, d2, r0, r1, r2)
    for k in range(3):
        W[3 + k, col] = R[0, k] * c0 + R[1, k] * c1 + R[2, k] * c2


@njit(cache=True, error_model="numpy", inline="always")
def contact_jacobian(R, side, L_SC, L_GS, W):
    """Force directions of one end sphere, W (6, 5) = [w_N, W_T, W_V].

    side = +1 for the front sphere, -1 for the rear one. Columns: w_N (18) along
    e_z; W_T (30) along e_x^Pi, e_y^Pi of (27) (the projected link axis and its
    horizontal normal); W_V (36) along the ground axes e_x, e_y. C is the point of
    the sphere closest to the ground, r_GC = side L_GS e_z^B - L_SC e_z (14)-(16);
    r_CS = L_SC e_z (33).
    """
    zx = R[0, 2]
    zy = R[1, 2]
    zz = R[2, 2]
    r0 = side * L_GS * zx
    r1 = side * L_GS * zy
    r2 = side * L_GS * zz - L_SC
    _set_column(W, 0, R, 0.0, 0.0, 1.0, r0, r1, r2, True)
    nrm = math.sqrt(zx * zx + zy * zy)
    if nrm > 1e-12:
        cx = zx / nrm
        cy = zy / nrm
    else:  # link standing upright: Pi_i is undefined (27); take the ground axes
        cx = 1.0
        cy = 0.0
    _set_column(W, 1, R, cx, cy, 0.0, r0, r1, r2, True)
    _set_column(W, 2, R, -cy, cx, 0.0, r0, r1, r2, True)
    _set_column(W, 3, R, 1.0, 0.0, 0.0, 0.0, 0.0, L_SC, False)
    _set_column(W, 4, R, 0.0, 1.0, 0.0, 0.0, 0.0, L_SC, False)
    return W


@njit(cache=True, error_model="numpy", inline="always")
def joint_jacobian(Ra, Rb, La, Lb, W):
    """W_Ji (12, 4) of the joint between links a = i and b = i + 1, (38)-(41),
    into W's first four columns (W may have more: the drive rows).

    Columns chi = x, y, z: [e_chi; Ra^T (La/2 z_a x e_chi); -e_chi;
    Rb^T (Lb/2 z_b x e_chi)]. Column phi: [0; Ra^T (y_a x x_b); 0;
    Rb^T (x_b x y_a)], the time derivative of g_Jphi = y_a . x_b (13).
    """
    for j in range(12):
        for k in range(4):
            W[j, k] = 0.0
    ha = 0.5 * La
    hb = 0.5 * Lb
    for chi in range(3):
        d0 = 1.0 if chi == 0 else 0.0
        d1 = 1.0 if chi == 1 else 0.0
        d2 = 1.0 if chi == 2 else 0.0
        W[chi, chi] = 1.0
        W[6 + chi, chi] = -1.0
        c0, c1, c2 = _cross(ha * Ra[0, 2], ha * Ra[1, 2], ha * Ra[2, 2], d0, d1, d2)
        for k in range(3):
            W[3 + k, chi] = Ra[0, k] * c0 + Ra[1, k] * c1 + Ra[2, k] * c2
        c0, c1, c2 = _cross(hb * Rb[0, 2], hb * Rb[1, 2], hb * Rb[2, 2], d0, d1, d2)
        for k in range(3):
            W[9 + k, chi] = Rb[0, k] * c0 + Rb[1, k] * c1 + Rb[2, k] * c2
    c0, c1, c2 = _cross(Ra[0, 1], Ra[1, 1], Ra[2, 1], Rb[0, 0], Rb[1, 0], Rb[2, 0])
    for k in range(3):
        W[3 + k, 3] = Ra[0, k] * c0 + Ra[1, k] * c1 + Ra[2, k] * c2
        W[9 + k, 3] = -(Rb[0, k] * c0 + Rb[1, k] * c1 + Rb[2, k] * c2)
    return W


@njit(cache=True, error_model="numpy")
def joint_gaps(q, L, g_J):
    """Joint gap functions (12)-(13), g_J (nJ, 4) = [g_x, g_y, g_z, g_phi]."""
    n = q.shape[0]
    Ra = np.empty((3, 3))
    Rb = np.empty((3, 3))
    for i in range(n - 1):
        rotation(q[i, 3:7], Ra)
        rotation(q[i + 1, 3:7], Rb)
        for k in range(3):
            g_J[i, k] = q[i, k] - q[i + 1, k] + 0.5 * L * (Ra[k, 2] + Rb[k, 2])
        g_J[i, 3] = Ra[0, 1] * Rb[0, 0] + Ra[1, 1] * Rb[1, 0] + Ra[2, 1] * Rb[2, 0]
    return g_J


# --------------------------------------------------------------------------
# joints, actuators, smooth forces
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def joint_angles(Rs, u, out):
    """Joint angles (65)-(66) and rates (67): out (nJ, 4) = [a_h, a_v, w_h, w_v]."""
    n = Rs.shape[0]
    Rr = np.empty((3, 3))
    for i in range(n - 1):
        for r in range(3):
            for c in range(3):
                Rr[r, c] = (Rs[i, 0, r] * Rs[i + 1, 0, c] + Rs[i, 1, r] * Rs[i + 1, 1, c]
                            + Rs[i, 2, r] * Rs[i + 1, 2, c])
        out[i, 1] = math.atan2(Rr[2, 1], Rr[2, 2])
        out[i, 0] = -math.asin(min(1.0, max(-1.0, Rr[2, 0])))
        # omega_J = omega_{i+1} - Rr^T omega_i, in B_{i+1}
        wj0 = u[i + 1, 3] - (Rr[0, 0] * u[i, 3] + Rr[1, 0] * u[i, 4] + Rr[2, 0] * u[i, 5])
        wj1 = u[i + 1, 4] - (Rr[0, 1] * u[i, 3] + Rr[1, 1] * u[i, 4] + Rr[2, 1] * u[i, 5])
        out[i, 2] = wj1
        out[i, 3] = wj0
    return out


@njit(cache=True, error_model="numpy")
def control_torques(Rs, u, refs, K_hp, K_hd, K_vp, K_vd, tau, power):
    """PD torques (68)-(69) applied as body torques tau (n, 3) of (62)-(63).

    power (nJ, 2) receives each motor's mechanical power, W: the power its
    pair of torques delivers to the two links, -t_h y_i . (omega_{i+1} -
    omega_i) and -t_v x_{i+1} . (omega_{i+1} - omega_i) (y_i, x_{i+1}: the
    cardan axes the torques act about), so that their sum is tau_C^T u exactly;
    positive when the motor drives the joint, negative when it brakes it."""
    n = Rs.shape[0]
    for i in range(n):
        for k in range(3):
            tau[i, k] = 0.0
    if n < 2:
        return tau
    ang = np.empty((n - 1, 4))
    Rr = np.empty((3, 3))
    joint_angles(Rs, u, ang)
    for i in range(n - 1):
        t_h = K_hp * (ang[i, 0] - refs[i, 0]) + K_hd * (ang[i, 2] - refs[i, 2])
        t_v = K_vp * (ang[i, 1] - refs[i, 1]) + K_vd * (ang[i, 3] - refs[i, 3])
        # omega_{i+1} - omega_i in B_{i+1}: wj = omega_{i+1} - Rr^T omega_i;
        # y_i in B_{i+1} is Rr^T e_y (row 1 of Rr), x_{i+1} is e_x
        for r in range(3):
            for c in range(3):
                Rr[r, c] = (Rs[i, 0, r] * Rs[i + 1, 0, c] + Rs[i, 1, r] * Rs[i + 1, 1, c]
                            + Rs[i, 2, r] * Rs[i + 1, 2, c])
        w_y = 0.0
        for c in range(3):
            wj_c = u[i + 1, 3 + c] - (Rr[0, c] * u[i, 3] + Rr[1, c] * u[i, 4]
                                      + Rr[2, c] * u[i, 5])
            w_y += Rr[1, c] * wj_c
        power[i, 0] = -t_h * w_y
        power[i, 1] = -t_v * ang[i, 3]
        # Rr = R_i^T R_{i+1}; link i gets [0, t_h, 0] + Rr [t_v, 0, 0]
        for k in range(3):
            rr_k0 = (Rs[i, 0, k] * Rs[i + 1, 0, 0] + Rs[i, 1, k] * Rs[i + 1, 1, 0]
                     + Rs[i, 2, k] * Rs[i + 1, 2, 0])
            rr_1k = (Rs[i, 0, 1] * Rs[i + 1, 0, k] + Rs[i, 1, 1] * Rs[i + 1, 1, k]
                     + Rs[i, 2, 1] * Rs[i + 1, 2, k])
            tau[i, k] += rr_k0 * t_v
            # link i+1 gets -Rr^T [0, t_h, 0] - [t_v, 0, 0]
            tau[i + 1, k] -= rr_1k * t_h
        tau[i, 1] += t_h
        tau[i + 1, 0] -= t_v
    return tau


@njit(cache=True, error_model="numpy")
def drive_rows(Rs, u, refs, K_hp, K_hd, K_vp, K_vd, dt, sigma, WJ, comp, bo):
    """The PD drives (68)-(69) integrated implicitly: two rows per joint in the
    chain's direct solve, beside its four constraint rows.

    A drive's torque over the step is taken at a weighted angle and rate,
    t = K_p (alpha_s - alpha_r) + K_d (alphadot_s - alphadot_r) with
    alpha_s = alpha_A + sigma (alpha_E - alpha_A) and alphadot_s =
    (1 - sigma) alphadot_A + sigma alphadot_E, where, in the midpoint scheme
    (72)-(83), alpha_A = alpha_M - dt/2 alphadot_A and alpha_E = alpha_M +
    dt/2 alphadot_E; alpha_M is the joint angle (65)-(66) at q_M, alphadot =
    w^T u the joint's rate (w: the drive's row; alphadot_h = y_i .
    (omega_{i+1} - omega_i), alphadot_v = x_{i+1} . (omega_{i+1} - omega_i),
    exact where g_Jphi = 0). The drive's impulse lambda = -dt t is then
    lambda = -gamma w^T u_E - c, gamma = sigma dt (K_d + dt K_p / 2),
    c = dt (K_p (alpha_M - (1 - sigma) dt/2 alphadot_A - alpha_r)
    + K_d ((1 - sigma) alphadot_A - alphadot_r)): a compliant bilateral
    constraint w^T u_E + lambda / gamma + c / gamma = 0, solved with the joint's
    own (84) rows. Its compliance 1/gamma adds to G_J's diagonal, c/gamma to
    the right-hand side b. The generalised force directions w are those of the
    torque pairs of (62)-(64): tau_C = -sum w t (see control_torques).
    sigma = 1 takes the end of the step, sigma = 1/2 the trapezoidal rule; for
    a linear spring the step is stable for any dt when sigma >= 1/2.

    Writes WJ[:, :, 4:6] (Rs: rotations at q_M, u (n, 6) the velocities u_A,
    refs (nJ, 4)), comp (nJ, 6) the compliance on the diagonal (zero on the
    four constraint rows) and bo (nJ, 6) the offset of b. A drive with
    K_p = K_d = 0 gets a zero row and unit compliance: no impulse."""
    nj = WJ.shape[0]
    for i in range(nj):
        # Rr = R_i^T R_{i+1} (63); alpha_h, alpha_v (65)-(66)
        r00 = Rs[i, 0, 0] * Rs[i + 1, 0, 0] + Rs[i, 1, 0] * Rs[i + 1, 1, 0] + Rs[i, 2, 0] * Rs[i + 1, 2, 0]
        r10 = Rs[i, 0, 1] * Rs[i + 1, 0, 0] + Rs[i, 1, 1] * Rs[i + 1, 1, 0] + Rs[i, 2, 1] * Rs[i + 1, 2, 0]
        r20 = Rs[i, 0, 2] * Rs[i + 1, 0, 0] + Rs[i, 1, 2] * Rs[i + 1, 1, 0] + Rs[i, 2, 2] * Rs[i + 1, 2, 0]
        r11 = Rs[i, 0, 1] * Rs[i + 1, 0, 1] + Rs[i, 1, 1] * Rs[i + 1, 1, 1] + Rs[i, 2, 1] * Rs[i + 1, 2, 1]
        r12 = Rs[i, 0, 1] * Rs[i + 1, 0, 2] + Rs[i, 1, 1] * Rs[i + 1, 1, 2] + Rs[i, 2, 1] * Rs[i + 1, 2, 2]
        r21 = Rs[i, 0, 2] * Rs[i + 1, 0, 1] + Rs[i, 1, 2] * Rs[i + 1, 1, 1] + Rs[i, 2, 2] * Rs[i + 1, 2, 1]
        r22 = Rs[i, 0, 2] * Rs[i + 1, 0, 2] + Rs[i, 1, 2] * Rs[i + 1, 1, 2] + Rs[i, 2, 2] * Rs[i + 1, 2, 2]
        a_v = math.atan2(r21, r22)
        a_h = -math.asin(min(1.0, max(-1.0, r20)))
        for j in range(12):
            WJ[i, j, 4] = 0.0
            WJ[i, j, 5] = 0.0
        for k in range(4):
            comp[i, k] = 0.0
            bo[i, k] = 0.0
        # horizontal drive about y_i: link i -e_y (in B_i), link i+1 Rr^T e_y
        wA = -u[i, 4] + r10 * u[i + 1, 3] + r11 * u[i + 1, 4] + r12 * u[i + 1, 5]
        on, comp[i, 4], bo[i, 4] = _drive_terms(K_hp, K_hd, dt, sigma, a_h, wA, refs[i, 0],
                                                refs[i, 2])
        if on:
            WJ[i, 4, 4] = -1.0
            WJ[i, 9, 4] = r10
            WJ[i, 10, 4] = r11
            WJ[i, 11, 4] = r12
        # vertical drive about x_{i+1}: link i -Rr e_x, link i+1 e_x (in B_{i+1})
        wA = -r00 * u[i, 3] - r10 * u[i, 4] - r20 * u[i, 5] + u[i + 1, 3]
        on, comp[i, 5], bo[i, 5] = _drive_terms(K_vp, K_vd, dt, sigma, a_v, wA, refs[i, 1],
                                                refs[i, 3])
        if on:
            WJ[i, 3, 5] = -r00
            WJ[i, 4, 5] = -r10
            WJ[i, 5, 5] = -r20
            WJ[i, 9, 5] = 1.0


@njit(cache=True, error_model="numpy", inline="always")
def _drive_terms(K_p, K_d, dt, sigma, alpha, rate_A, ref, ref_rate):
    """One drive row's (has gains, compliance 1/gamma, offset c/gamma) of
    :func:`drive_rows`; (False, 1, 0) for a drive without gains (its row stays
    zero: no impulse)."""
    g = sigma * dt * (K_d + 0.5 * dt * K_p)
    if not g > 0.0:
        return False, 1.0, 0.0
    c = dt * (K_p * (alpha - (1.0 - sigma) * 0.5 * dt * rate_A - ref)
              + K_d * ((1.0 - sigma) * rate_A - ref_rate))
    return True, 1.0 / g, c / g


@njit(cache=True, error_model="numpy")
def _inert_drive_rows(WJ, comp, bo):
    """The drive rows with explicit drives: zero, unit compliance, no offset,
    so that their impulses are zero and the four constraint rows are solved as
    without them."""
    for i in range(WJ.shape[0]):
        for j in range(12):
            WJ[i, j, 4] = 0.0
            WJ[i, j, 5] = 0.0
        for k in range(NR):
            comp[i, k] = 1.0 if k >= 4 else 0.0
            bo[i, k] = 0.0


@njit(cache=True, error_model="numpy")
def drive_work(WJ, jwork, u):
    """The implicit drives' positive work over the step, J: each drive's
    impulse lambda = -x (x = G_J^-1 b, jwork (nJ, 6), left by
    constrain_velocity) times its rate w^T u_E, counted when positive (the
    motor drives the joint; see control_torques' power)."""
    work = 0.0
    for i in range(WJ.shape[0]):
        for k in range(4, 6):
            rate = 0.0
            for j in range(12):
                rate += WJ[i, j, k] * u[6 * i + j]
            p = -jwork[i, k] * rate
            if p > 0.0:
                work += p
    return work


# --------------------------------------------------------------------------
# constraint projection (VII-C)
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def project_joints(q, L, keep_com, R2):
    """Project the links onto the joint constraints, (12)-(13) = 0 (VII-C).

    First every link i+1 is turned about its own z axis so that its x axis is
    normal to the (corrected) y axis of link i (g_Jphi = 0); then links 2..n are
    translated so that the joint points coincide (g_Jchi = 0). Link 1 stays fixed
    (the paper); with keep_com the chain is then shifted so that the centre of
    mass (equal link masses) is where it was. Quaternions must be unit on entry.
    R2 (>= 2, 3, 3): scratch for two rotation matrices.
    """
    n = q.shape[0]
    if n < 2:
        return
    Ra = R2[0]
    Rb = R2[1]
    cx = 0.0
    cy = 0.0
    cz = 0.0
    for i in range(n):
        cx += q[i, 0]
        cy += q[i, 1]
        cz += q[i, 2]
    rotation(q[0, 3:7], Ra)
    for i in range(n - 1):
        rotation(q[i + 1, 3:7], Rb)
        # target x axis of link i+1: normal to y_a and to z_b
        tx, ty, tz = _cross(Ra[0, 1], Ra[1, 1], Ra[2, 1], Rb[0, 2], Rb[1, 2], Rb[2, 2])
        nt = math.sqrt(tx * tx + ty * ty + tz * tz)
        if nt > 1e-12:
            inv = 1.0 / nt
            tx *= inv
            ty *= inv
            tz *= inv
            xb0 = Rb[0, 0]
            xb1 = Rb[1, 0]
            xb2 = Rb[2, 0]
            cth = xb0 * tx + xb1 * ty + xb2 * tz
            if cth < 0.0:
                tx = -tx
                ty = -ty
                tz = -tz
                cth = -cth
            sx, sy, sz = _cross(xb0, xb1, xb2, tx, ty, tz)
            sth = sx * Rb[0, 2] + sy * Rb[1, 2] + sz * Rb[2, 2]
            if sth != 0.0:
                # world-frame rotation about z_b by th (cos th = cth >= 0,
                # sin th = sth): p <- p_delta (x) p, with the half angle's
                # cosine and sine from cth, sth (no trigonometric calls)
                h = 1.0 / math.sqrt(cth * cth + sth * sth)  # both of order 1
                c = math.sqrt(0.5 * (1.0 + cth * h))
                s = 0.5 * sth * h / c
                d0 = c
                d1 = s * Rb[0, 2]
                d2 = s * Rb[1, 2]
                d3 = s * Rb[2, 2]
                p0 = q[i + 1, 3]
                p1 = q[i + 1, 4]
                p2 = q[i + 1, 5]
                p3 = q[i + 1, 6]
                x1, x2, x3 = _cross(d1, d2, d3, p1, p2, p3)
                q[i + 1, 3] = d0 * p0 - (d1 * p1 + d2 * p2 + d3 * p3)
                q[i + 1, 4] = d0 * p1 + p0 * d1 + x1
                q[i + 1, 5] = d0 * p2 + p0 * d2 + x2
                q[i + 1, 6] = d0 * p3 + p0 * d3 + x3
                s2 = 1.0 / math.sqrt(q[i + 1, 3] ** 2 + q[i + 1, 4] ** 2 + q[i + 1, 5] ** 2
                                     + q[i + 1, 6] ** 2)
                for k in range(3, 7):
                    q[i + 1, k] *= s2
                # the turned frame: x_b = t, z_b unchanged, y_b = z_b x t
                yx, yy, yz = _cross(Rb[0, 2], Rb[1, 2], Rb[2, 2], tx, ty, tz)
                Rb[0, 0] = tx
                Rb[1, 0] = ty
                Rb[2, 0] = tz
                Rb[0, 1] = yx
                Rb[1, 1] = yy
                Rb[2, 1] = yz
        for k in range(3):
            q[i + 1, k] = q[i, k] + 0.5 * L * (Ra[k, 2] + Rb[k, 2])
        for r in range(3):
            for c2 in range(3):
                Ra[r, c2] = Rb[r, c2]
    if keep_com:
        nx = 0.0
        ny = 0.0
        nz = 0.0
        for i in range(n):
            nx += q[i, 0]
            ny += q[i, 1]
            nz += q[i, 2]
        dx = (cx - nx) / n
        dy = (cy - ny) / n
        dz = (cz - nz) / n
        for i in range(n):
            q[i, 0] += dx
            q[i, 1] += dy
            q[i, 2] += dz


# --------------------------------------------------------------------------
# one time step (72)-(83)
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", inline="always")
def _soft_normal(par, sol):
    """The contacts' normal stiffness k_N, damping d_N and largest push-out
    speed v_N (par[20:23]) as the normal prox's terms (c_N, k_g, v_N), with
    gamma = dt d_N + dt^2 k_N / 2, c_N = 1 / gamma and k_g = dt k_N / gamma.
    A closed contact's normal impulse is its spring and damper's,
    P_N = -gamma gamma_N^E - dt k_N g_M (g_M + dt gamma_N^E / 2 the gap at
    the step's end), the spring's part -dt k_N g_M capped at gamma v_N (it
    pushes the contact apart at v_N at most), and not negative: P_N >= 0
    complementary to phi = gamma_N^E + e_N gamma_N^A + c_N P_N
    + max(k_g g_M, -v_N) >= 0, phi increasing in P_N (so unique where the
    rigid law is not). k_N infinite: (0, 0, 0), the paper's hard law (77)."""
    k_N = par[20]
    if not k_N < math.inf:
        return 0.0, 0.0, 0.0
    dt = sol[0]
    gamma = dt * par[21] + 0.5 * dt * dt * k_N
    return 1.0 / gamma, dt * k_N / gamma, par[22]


@njit(cache=True, error_model="numpy", inline="always")
def _contact_prox(P, c, gam, grp, r, gA, gM, sn, mu_x, mu_y, mu_V, out, tw):
    """One group of contact c's prox equations, from its impulses P[c] into
    out[c]: grp 0 normal (77) (with Newton restitution on the normal velocity),
    1 Coulomb ellipse (78), (58), 2 rolling disc (79), (60). The friction sets use
    the normal impulse already in out[c, 0]. r (3,): r_N, r_T, r_V. gA: the
    restitution velocity e_N gamma_N^A, gM the gap at the midpoint, sn the
    springs' (c_N, k_g, v_N) of :func:`_soft_normal`. tw (nc,):
    each contact's last multiplier of the ellipse prox, its next start."""
    if grp == 0:
        pn = P[c, 0] - r[0] * (gam[0] + gA + sn[0] * P[c, 0] + max(sn[1] * gM, -sn[2]))
        out[c, 0] = pn if pn > 0.0 else 0.0
    elif grp == 1:
        pt0, pt1, tw[c] = _prox_ellipse_warm(P[c, 1] - r[1] * gam[1], P[c, 2] - r[1] * gam[2],
                                             mu_x * out[c, 0], mu_y * out[c, 0], tw[c])
        out[c, 1] = pt0
        out[c, 2] = pt1
    else:
        pv = _prox_disc(P[c, 3] - r[2] * gam[3], P[c, 4] - r[2] * gam[4], mu_V * out[c, 0])
        out[c, 3] = pv[0]
        out[c, 4] = pv[1]


@njit(cache=True, error_model="numpy")
def _inverse_mass(par, minv):
    """Diagonal of M^-1, (47)-(48): minv (n, 6), each link's
    [1/m x3, 1/Theta1 x2, 1/Theta3]."""
    for i in range(minv.shape[0]):
        minv[i, 0] = 1.0 / par[3]
        minv[i, 1] = minv[i, 0]
        minv[i, 2] = minv[i, 0]
        minv[i, 3] = 1.0 / par[4]
        minv[i, 4] = minv[i, 3]
        minv[i, 5] = 1.0 / par[5]


@njit(cache=True, error_model="numpy")
def joint_system(Rs, par, minv, WJ, comp, D, E, Ld, Ls):
    """W_J (39)-(41) into WJ's first four columns (WJ (nJ, 12, r); with r = 6 the
    drive rows of :func:`drive_rows` are already in the last two), the blocks
    D, E of G_J = W_J^T M^-1 W_J + diag(comp) (the matrix of the direct
    bilateral impulses (84), see :func:`aiko.model._chain.joint_blocks`; minv
    (n, 6) holds the links' diagonals of M^-1; comp (nJ, r) the rows'
    compliance) and its block Cholesky factor. O(n).

    G_J = L L^T with diagonal blocks Ld[i] (lower triangular, the reciprocals of
    their diagonals stored on it, see :func:`aiko.model._chain.chol_factor`) and
    sub-diagonal blocks Ls[i] (row i, column i-1; Ls[0] unused):
    Ls[i] = E_{i-1}^T Ld[i-1]^-T, Ld[i] Ld[i]^T = D_i - Ls[i] Ls[i]^T.
    """
    n = Rs.shape[0]
    L = par[0]
    for i in range(n - 1):
        joint_jacobian(Rs[i], Rs[i + 1], L, L, WJ[i])
    joint_blocks(WJ, minv, D, E)
    nr = NR
    for i in range(n - 1):
        for a in range(nr):
            D[i, a, a] += comp[i, a]
    for i in range(n - 1):
        S = Ld[i]  # the Schur complement, factored in place
        for a in range(nr):
            for b in range(a + 1):
                S[a, b] = D[i, a, b]
        if i > 0:
            # Ls[i] Ld[i-1]^T = E^T: forward substitution, row by row
            for r in range(nr):
                for c in range(nr):
                    s = E[i - 1, c, r]
                    for k in range(c):
                        s = fma(-Ls[i, r, k], Ld[i - 1, c, k], s)
                    Ls[i, r, c] = s * Ld[i - 1, c, c]
            for a in range(nr):
                for b in range(a + 1):
                    s = 0.0
                    for k in range(nr):
                        s = fma(Ls[i, a, k], Ls[i, b, k], s)
                    S[a, b] -= s
        chol_factor(S, nr, S)  # in place: A's column j is read before F's is written


@njit(cache=True, error_model="numpy")
def _joint_solve(Ld, Ls, x):
    """Solve G_J y = x in place, x (nJ, r), with the factor of joint_system."""
    nj = x.shape[0]
    nr = NR
    for i in range(nj):  # L z = x
        if i > 0:
            for r in range(nr):
                s = 0.0
                for k in range(nr):
                    s = fma(Ls[i, r, k], x[i - 1, k], s)
                x[i, r] -= s
        for r in range(nr):
            s = x[i, r]
            for k in range(r):
                s = fma(-Ld[i, r, k], x[i, k], s)
            x[i, r] = s * Ld[i, r, r]
    for i in range(nj - 1, -1, -1):  # L^T y = z
        if i < nj - 1:
            for r in range(nr):
                s = 0.0
                for k in range(nr):
                    s = fma(Ls[i + 1, k, r], x[i + 1, k], s)
                x[i, r] -= s
        for r in range(nr - 1, -1, -1):
            s = x[i, r]
            for k in range(r + 1, nr):
                s = fma(-Ld[i, k, r], x[i, k], s)
            x[i, r] = s * Ld[i, r, r]


@njit(cache=True, error_model="numpy")
def constrain_velocity(WJ, Ld, Ls, minv, bo, v, work):
    """v <- v - M^-1 W_J G_J^-1 (W_J^T v + bo): add the direct joint impulses
    that make W_J^T v = 0 (the corrected (84)); without drive rows the
    M-orthogonal projection onto the velocities the joints allow, with them
    also the drives' impulses (:func:`drive_rows`; bo their offset, zero on the
    constraint rows). O(n). minv (n, 6); work (nJ, r) receives
    G_J^-1 (W_J^T v + bo), minus the impulses."""
    joint_rhs(WJ, v, bo, work)
    _joint_solve(Ld, Ls, work)
    sub_joint_velocity(WJ, minv, work, v)


@njit(cache=True, error_model="numpy", inline="always")
def _group_cols(grp):
    """Columns [k0, k1) of a contact's group: 0 normal, 1 friction, 2 rolling."""
    if grp == 0:
        return 0, 1
    return 2 * grp - 1, 2 * grp + 1


@njit(cache=True, error_model="numpy", inline="always")
def _contact_setup(P, active, dP, u, par, sol, Rs, WJ, Ld, Ls, v, Wc, ws):
    """Everything a sweep needs, O(n): the chain's eliminations, the gains
    (C_l, Y_l, K_l) of each link touching the ground, each contact's W (6, 5), r and
    restitution velocity, K_l W, the warm start folded into v (a ground
    contact that _step marked in ext extrapolated by its last change dP
    (2n, 5), times EXTRAPOLATION_GAIN),
    b = W_J^T v. Returns the number of links touching the ground (listed in
    order in lk, their contacts in cs)."""
    (D, E, FL, DR, FR, b, bL, bR, xJ, Yl, K, lk, cs, ccount, rr, gA, Pnew,
     tv, zv, Cl, F4, sv, tau, minv, power, comp, bo, cmu, oc, ocount, KW, tw, Pb, ext, gM) = ws
    n = u.shape[0]
    kind = int(sol[1])
    alpha = sol[2]
    L_SC = par[1]
    L_GS = par[2]
    e_N = par[16]
    cN = _soft_normal(par, sol)[0]
    nl = 0
    for l in range(n):
        cnt = 0
        for c in (l, l + n):
            if active[c]:
                cs[nl, cnt] = c
                cnt += 1
        for s in range(ocount[l]):  # obstacles: W filled by _obstacle_contacts
            cs[nl, cnt] = oc[l, s]
            cnt += 1
        if cnt == 0:
            continue
        lk[nl] = l
        ccount[nl] = cnt
        nl += 1
    if nl == 0:
        return 0
    # the sweeps reach from the first link touching the ground to the last
    eliminations(D, E, Ld, Ls, FL, DR, FR, F4, lk[0], lk[nl - 1] - 1)
    for t in range(nl):
        l = lk[t]
        cnt = ccount[t]
        link_block(l, WJ, minv[l], Ld, Ls, DR, Yl[l], K[l], Cl[l], tv)
        for ci in range(cnt):
            c = cs[t, ci]
            if c < 2 * n:
                contact_jacobian(Rs[l], 1.0 if c < n else -1.0, L_SC, L_GS, Wc[c])
            # KW = K_l W: the link's velocity response to this contact's
            # impulses; its columns give the diagonal of the Delassus matrix
            # W^T A W
            for k in range(5):
                for i in range(6):
                    s = 0.0
                    for j in range(6):
                        s = fma(K[l, i, j], Wc[c, j, k], s)
                    KW[c, i, k] = s
            for grp in range(3):
                k0, k1 = _group_cols(grp)
                gmax = 0.0
                for k in range(k0, k1):
                    g = 0.0
                    for i in range(6):
                        g = fma(Wc[c, i, k], KW[c, i, k], g)
                    gmax = max(gmax, g)
                if kind == 0:
                    rr[c, grp] = sol[3 + grp]
                elif grp == 0:
                    rr[c, grp] = alpha / max(gmax + cN, _TINY)
                else:
                    rr[c, grp] = alpha / max(gmax, _TINY)
                if c < 2 * n and ext[c]:
                    # the extrapolation of a ground contact closed in the
                    # last two steps, where its change is one the solver
                    # tells from converged (|dP| / r > u_tol, as its
                    # residual): below that it is the solver's own tolerance,
                    # and extrapolating it would let it grow step by step
                    big = False
                    for k in range(k0, k1):
                        if abs(dP[c, k]) > sol[9] * rr[c, grp]:
                            big = True
                    if big:
                        for k in range(k0, k1):
                            P[c, k] += EXTRAPOLATION_GAIN * dP[c, k]
                        if grp == 0 and P[c, 0] < 0.0:
                            P[c, 0] = 0.0
            s = 0.0
            for j in range(6):
                s += Wc[c, j, 0] * u[l, j]
            gA[c] = e_N * s
            # warm start: the last impulses act on the free velocity
            for j in range(6):
                w = 0.0
                for k in range(5):
                    w += Wc[c, j, k] * P[c, k]
                v[6 * l + j] += minv[l, j] * w
    joint_rhs(WJ, v, bo, b)
    return nl


@njit(cache=True, error_model="numpy", inline="always")
def _apply_link_impulse(l, df, v, WJ, minv, b, dbp, dbn):
    """Fold an impulse change df (6,) on link l into v and b = W_J^T v; dbp, dbn
    (4,) receive b's changes at joints l-1 and l. Returns whether b changed."""
    nz = False
    for j in range(6):
        if df[j] != 0.0:
            nz = True
            v[6 * l + j] += minv[l, j] * df[j]
    if not nz or WJ.shape[0] == 0:
        return False
    joint_rhs_change(l, WJ, minv[l], df, b, dbp, dbn)
    return True


@njit(cache=True, error_model="numpy", inline="always")
def _sor_solve(P, par, sol, WJ, minv, v, Wc, nl, b, bL, bR, FL, FR, Ld, Ls, Cl, Yl, KW, lk, cs,
               ccount, rr, gA, gM, Pnew, sv, cmu, tw, z):
    """Gauss-Seidel sweeps along the chain (links 1..n; a link's front, then
    rear sphere, then its obstacle contacts; normal, friction, rolling, the velocities following each
    projection, Gehring et al. after (19)), with the joints' impulses exact at
    every update, until converged or max_iter sweeps. Each link's contacts are
    passed over up to ``link_passes`` times before the sweep moves on (a block
    Gauss-Seidel step, the block solved by inner sweeps): stops early when a pass
    changes no velocity by more than u_tol. The residual and impulse test of a
    sweep are those of its first passes. O(n + contacts) per sweep. Returns
    (sweeps, converged). Inlined into the step, as the step's other large parts
    and the step into :func:`_advance`: every call of a compiled function updates
    the reference counts of its array arguments (atomic operations), and those
    calls passed some hundred arrays per step."""
    sn = _soft_normal(par, sol)
    passes = int(sol[14])
    ul = sv[0]
    df = sv[1]
    gam = sv[2]
    max_iter = int(sol[10])
    nj = WJ.shape[0]
    # b changes only at the joints of links touching the ground: after the
    # first sweep, bL before the first such joint and bR after the last stay
    j_first = lk[0] - 1
    j_last = lk[nl - 1]
    iters = 0
    while iters < max_iter:
        iters += 1
        all_right(b, FR, bR, lk[0], nj - 1 if iters == 1 else j_last)
        jl = -1 if iters == 1 else max(j_first - 1, -1)
        res = 0.0
        imp_ok = True
        for t in range(nl):
            l = lk[t]
            while jl < l - 1:
                jl += 1
                propagate_left(jl, b, FL, bL)
            link_velocity(l, v, WJ.shape[0], bL, bR, Ld, Ls, Cl[l], Yl[l], z, ul)
            for j in range(6):
                df[j] = 0.0
            for p in range(passes):
                local = 0.0
                for s in range(ccount[t]):
                    c = cs[t, s]
                    for grp in range(3):
                        k0, k1 = _group_cols(grp)
                        for k in range(k0, k1):
                            g = 0.0
                            for j in range(6):
                                g = fma(Wc[c, j, k], ul[j], g)
                            gam[k] = g
                        _contact_prox(P, c, gam, grp, rr[c], gA[c], gM[c], sn, cmu[c, 0], cmu[c, 1],
                                      cmu[c, 2], Pnew, tw)
                        for k in range(k0, k1):
                            d = Pnew[c, k] - P[c, k]
                            if d == 0.0:
                                continue
                            if p == 0 and abs(d) > abs(P[c, k]) * sol[7] + sol[8]:
                                imp_ok = False
                            local = max(local, abs(d) / rr[c, grp])
                            P[c, k] = Pnew[c, k]
                            for i in range(6):
                                ul[i] = fma(KW[c, i, k], d, ul[i])
                                df[i] = fma(Wc[c, i, k], d, df[i])
                if p == 0:
                    res = max(res, local)
                if local <= sol[9]:
                    break
            if _apply_link_impulse(l, df, v, WJ, minv, b, sv[4], sv[5]):
                # bL behind the sweep and bR ahead of it follow b at the link's joints
                jp, jn = link_joints(l, WJ.shape[0])
                for a in range(NR):
                    if jp >= 0:
                        bL[jp, a] += sv[4, a]
                    if jn >= 0:
                        bR[jn, a] += sv[5, a]
        # res: the largest violation of a prox equation (61), in velocity
        # units, |P - prox(P - r gamma)| / r, taken at the start of the sweep
        if imp_ok or res <= sol[9]:
            return iters, True
    return iters, False


@njit(cache=True, error_model="numpy")
def _jacobi_sweep(P, par, sol, WJ, Ld, Ls, minv, v, Wc, nl, b, xJ, lk, cs, ccount, rr, gA,
                  gM, Pnew, sv, cmu, tw):
    """One Jacobi sweep: every contact's prox from the same velocities (the
    joints' impulses solved once, O(n)), then all impulses updated. Returns
    (residual, impulse test passed, change norm of (93))."""
    sn = _soft_normal(par, sol)
    nj = WJ.shape[0]
    ul = sv[0]
    df = sv[1]
    gam = sv[2]
    for i in range(nj):
        for a in range(NR):
            xJ[i, a] = b[i, a]
    _joint_solve(Ld, Ls, xJ)
    for t in range(nl):
        l = lk[t]
        jp, jn = link_joints(l, nj)
        for j in range(6):
            s = 0.0
            if jp >= 0:
                for a in range(NR):
                    s += WJ[jp, 6 + j, a] * xJ[jp, a]
            if jn >= 0:
                for a in range(NR):
                    s += WJ[jn, j, a] * xJ[jn, a]
            ul[j] = v[6 * l + j] - minv[l, j] * s
        for s in range(ccount[t]):
            c = cs[t, s]
            for k in range(5):
                g = 0.0
                for j in range(6):
                    g += Wc[c, j, k] * ul[j]
                gam[k] = g
            for grp in range(3):
                _contact_prox(P, c, gam, grp, rr[c], gA[c], gM[c], sn, cmu[c, 0], cmu[c, 1],
                              cmu[c, 2], Pnew, tw)
    res = 0.0
    imp_ok = True
    d_n = 0.0
    d_t = 0.0
    d_v = 0.0
    for t in range(nl):
        l = lk[t]
        for j in range(6):
            df[j] = 0.0
        for s in range(ccount[t]):
            c = cs[t, s]
            for grp in range(3):
                k0, k1 = _group_cols(grp)
                for k in range(k0, k1):
                    d = Pnew[c, k] - P[c, k]
                    if abs(d) > abs(P[c, k]) * sol[7] + sol[8]:
                        imp_ok = False
                    res = max(res, abs(d) / rr[c, grp])
                    if grp == 0:
                        d_n += d * d
                    elif grp == 1:
                        d_t += d * d
                    else:
                        d_v += d * d
                    P[c, k] = Pnew[c, k]
                    for j in range(6):
                        df[j] += Wc[c, j, k] * d
        _apply_link_impulse(l, df, v, WJ, minv, b, sv[4], sv[5])
    return res, imp_ok, math.sqrt(d_n) + math.sqrt(d_t) + math.sqrt(d_v)



@njit(cache=True, error_model="numpy")
def _compliant_impulses(qM, u, P, active, par, sol, Rs, WJ, Ld, Ls, minv, bo, ufree, Wc,
                        jwork):
    """The compliant contact law (:data:`aiko.model.params.CONTACT_LAWS`,
    seeds/001 (17)-(20)) at velocity level. The spheres at or below the ground
    at the midpoint qM are the contacts; their impulses x = P[c, :3] (normal,
    friction in Pi (27)) make the joint-constrained velocity after the step
    W^T u_E = v + dt a_d, a_d = -k_pc [0, 0, g_N] - k_vc [v_T, min(0, v_N)]
    (17) at the contact point's velocity v of the step's start, as far as
    P_N >= 0 (19) and the friction ellipse (58) (for (20)) allow: (18) with
    G = W^T A W (A the joints' constrained inverse mass; one O(n) joint solve
    per column) solved by projected Gauss-Seidel over the contacts, normal then
    friction, r = 1 / G_ll, warm-started from the last step, until no impulse
    changes the velocity by more than u_tol or every impulse changes by at most
    |P| T_rel + T_abs (or max_iter sweeps). Where the
    friction saturates this is what (18)-(20) solved once and clipped cannot
    give: the impulses that slide with the largest friction the cone allows.
    bo: the drive rows' offset (see constrain_velocity), in the velocity
    without contacts, not in the contacts' columns. Adds M^-1 W P to ufree
    (the joints are solved afterwards); writes P
    (rolling columns 0) and active. Returns (sweeps, converged)."""
    n = qM.shape[0]
    dt = sol[0]
    u_tol = sol[9]
    max_iter = int(sol[10])
    warm = sol[13] > 0.5
    L_SC = par[1]
    L_GS = par[2]
    mu_x = par[13]
    mu_y = par[14]
    k_p = par[18]
    k_v = par[19]
    idx = np.empty(2 * n, dtype=np.int64)
    gap = np.empty(2 * n)
    m = 0
    for c in range(2 * n):
        i = c % n
        side = 1.0 if c < n else -1.0
        g = qM[i, 2] + side * L_GS * Rs[i, 2, 2] - L_SC
        if g <= 0.0:
            active[c] = True
            contact_jacobian(Rs[i], side, L_SC, L_GS, Wc[c])
            idx[m] = c
            gap[m] = g
            m += 1
        else:
            active[c] = False
    x = np.zeros(3 * m)
    for k in range(m):
        for j in range(3):
            x[3 * k + j] = P[idx[k], j] if warm else 0.0
    for c in range(2 * n):
        for j in range(5):
            P[c, j] = 0.0
    if m == 0:
        return 0, True
    nv = 6 * n
    # A M ufree: the velocity without contact impulses, joints solved
    v0 = ufree.copy()
    constrain_velocity(WJ, Ld, Ls, minv, bo, v0, jwork)
    no_offset = np.zeros_like(bo)
    # columns of A W, one joint solve each
    AW = np.zeros((nv, 3 * m))
    col = np.zeros(nv)
    for a in range(3 * m):
        c = idx[a // 3]
        i = c % n
        for k in range(nv):
            col[k] = 0.0
        for k in range(6):
            col[6 * i + k] = minv[i, k] * Wc[c, k, a % 3]
        constrain_velocity(WJ, Ld, Ls, minv, no_offset, col, jwork)
        for k in range(nv):
            AW[k, a] = col[k]
    G = np.empty((3 * m, 3 * m))
    b = np.empty(3 * m)
    for a in range(3 * m):
        c = idx[a // 3]
        i = c % n
        ja = a % 3
        for bb in range(3 * m):
            s = 0.0
            for k in range(6):
                s += Wc[c, k, ja] * AW[6 * i + k, bb]
            G[a, bb] = s
        now = 0.0
        free = 0.0
        for k in range(6):
            now += Wc[c, k, ja] * u[i, k]
            free += Wc[c, k, ja] * v0[6 * i + k]
        if ja == 0:
            acc = -k_p * gap[a // 3] - k_v * min(0.0, now)
        else:
            acc = -k_v * now
        b[a] = now + dt * acc - free
    T_rel = sol[7]
    T_abs = sol[8]
    it = 0
    converged = False
    while it < max_iter and not converged:
        it += 1
        res = 0.0
        imp_ok = True
        for k in range(m):
            a = 3 * k
            rN = 1.0 / G[a, a]
            y = 0.0
            for bb in range(3 * m):
                y += G[a, bb] * x[bb]
            new = x[a] - rN * (y - b[a])
            if new < 0.0:
                new = 0.0
            d = abs(new - x[a]) / rN
            if d > res:
                res = d
            imp_ok = imp_ok and abs(new - x[a]) <= abs(x[a]) * T_rel + T_abs
            x[a] = new
            rT = 1.0 / max(G[a + 1, a + 1], G[a + 2, a + 2])
            y1 = 0.0
            y2 = 0.0
            for bb in range(3 * m):
                y1 += G[a + 1, bb] * x[bb]
                y2 += G[a + 2, bb] * x[bb]
            pt = _prox_ellipse(x[a + 1] - rT * (y1 - b[a + 1]), x[a + 2] - rT * (y2 - b[a + 2]),
                               mu_x * x[a], mu_y * x[a])
            d = max(abs(pt[0] - x[a + 1]), abs(pt[1] - x[a + 2])) / rT
            if d > res:
                res = d
            imp_ok = (imp_ok and abs(pt[0] - x[a + 1]) <= abs(x[a + 1]) * T_rel + T_abs
                      and abs(pt[1] - x[a + 2]) <= abs(x[a + 2]) * T_rel + T_abs)
            x[a + 1] = pt[0]
            x[a + 2] = pt[1]
        converged = imp_ok or res <= u_tol
    for k in range(m):
        c = idx[k]
        i = c % n
        P[c, 0] = x[3 * k]
        P[c, 1] = x[3 * k + 1]
        P[c, 2] = x[3 * k + 2]
        for r in range(6):
            ufree[6 * i + r] += minv[i, r] * (Wc[c, r, 0] * x[3 * k] + Wc[c, r, 1] * x[3 * k + 1]
                                              + Wc[c, r, 2] * x[3 * k + 2])
    return it, converged


# --------------------------------------------------------------------------
# obstacles: pegs and steps (aiko.model.scene)
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy", inline="always")
def _count_below(rows, x, strict):
    """How many rows have rows[k, 0] < x (strict) or <= x: bisection on a
    column sorted ascending."""
    lo = 0
    hi = rows.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if rows[mid, 0] < x or (not strict and rows[mid, 0] == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, error_model="numpy")
def ground_level(steps, x):
    """The ground's height at x, m: the level above the last step with
    x0 <= x (steps (ns, 4) = [x0, level below, level above, mu], sorted)."""
    k = _count_below(steps, x, False)
    return steps[k - 1, 2] if k > 0 else 0.0


@njit(cache=True, error_model="numpy", inline="always")
def _obstacle_columns(W, mus, mu, R, n0, n1, n2, t0, t1, t2, s0, s1, s2, r0, r1, r2):
    """An obstacle contact's W (6, 5): normal n, friction directions t and s
    (spanning the obstacle's tangent plane) at the contact point r from G
    (world frame), as (17)-(18), (21)-(22); no rolling columns. Its friction
    mus (3,) = [mu, mu, 0]: isotropic Coulomb, no rolling resistance."""
    mus[0] = mu
    mus[1] = mu
    mus[2] = 0.0
    _set_column(W, 0, R, n0, n1, n2, r0, r1, r2, True)
    _set_column(W, 1, R, t0, t1, t2, r0, r1, r2, True)
    _set_column(W, 2, R, s0, s1, s2, r0, r1, r2, True)
    for j in range(6):
        W[j, 3] = 0.0
        W[j, 4] = 0.0


@njit(cache=True, error_model="numpy")
def _obstacle_contacts(qM, Rs, par, sol, scene, P, active, Wc, cmu, oc, ocount, gM):
    """The obstacle contacts closed at the midpoint qM (the active set (49)
    with ``active_tol``), their W (6, 5) into Wc and friction into cmu, each
    link's list into oc/ocount (cleared first, with the active flags of the
    last step's list). Returns how many closed. scene = (pegs, steps, rmax).

    Contact slots after the 2n spheres on the ground: link l against peg k is
    2n + l np + k; sphere c (as g_N's rows) against step k is
    2n + n np + c ns + k.

    Peg k (axis (x_k, y_k) vertical, radius r_k) against link l's body, the
    capsule of radius L_SC about the segment G + s z_B, |s| <= L_GS: the
    segment's point closest to the axis (its horizontal projection closest to
    (x_k, y_k)), gap g = d - L_SC - r_k with d its horizontal distance, normal
    n the horizontal unit vector from the axis to it; the contact point lies
    at L_SC against n from that point; friction along e_z x n and e_z,
    isotropic.

    Step k (riser at x0 from the level below to the level above) against a
    sphere whose centre o lies before it (o_x < x0, within L_SC + active_tol):
    the riser's point closest to o (its top end is the edge), gap |o - Q| -
    L_SC, normal (o - Q) / |o - Q| (horizontal on the riser, slanted on the
    edge); friction along e_y and n x e_y. The step's top face is the
    ground's contact at the level under the sphere's centre (see _step).

    Broad phase: pegs and steps are sorted by x, and bisection finds those
    within a link's reach; far obstacles cost nothing."""
    n = qM.shape[0]
    pegs = scene[0]
    steps = scene[1]
    rmax = scene[2]
    npg = pegs.shape[0]
    ns = steps.shape[0]
    L_SC = par[1]
    L_GS = par[2]
    tol = sol[11]
    cold = sol[13] < 0.5
    for l in range(n):
        for s in range(ocount[l]):
            active[oc[l, s]] = False
        ocount[l] = 0
    found = 0
    for l in range(n):
        R = Rs[l]
        zx = R[0, 2]
        zy = R[1, 2]
        zz = R[2, 2]
        gx = qM[l, 0]
        gy = qM[l, 1]
        gz = qM[l, 2]
        cnt = 0
        if npg > 0:
            reach = L_SC + rmax + tol
            ex = L_GS * abs(zx) + reach
            ey = L_GS * abs(zy) + reach
            zh2 = zx * zx + zy * zy
            k = _count_below(pegs, gx - ex, True)
            while k < npg and pegs[k, 0] <= gx + ex:
                dx0 = gx - pegs[k, 0]
                dy0 = gy - pegs[k, 1]
                if abs(dy0) <= ey:
                    s = 0.0
                    if zh2 > 1e-24:
                        s = min(L_GS, max(-L_GS, -(dx0 * zx + dy0 * zy) / zh2))
                    hx = dx0 + s * zx
                    hy = dy0 + s * zy
                    d = math.sqrt(hx * hx + hy * hy)
                    if d - L_SC - pegs[k, 2] <= tol:
                        nx = 1.0
                        ny = 0.0
                        if d > 0.0:
                            nx = hx / d
                            ny = hy / d
                        c = 2 * n + l * npg + k
                        gM[c] = d - L_SC - pegs[k, 2]
                        _obstacle_columns(Wc[c], cmu[c], pegs[k, 3], R, nx, ny, 0.0, -ny, nx,
                                          0.0, 0.0, 0.0, 1.0, s * zx - L_SC * nx,
                                          s * zy - L_SC * ny, s * zz)
                        oc[l, cnt] = c
                        cnt += 1
                k += 1
        if ns > 0:
            for sd in range(2):
                side = 1.0 - 2.0 * sd
                ox = gx + side * L_GS * zx
                oz = gz + side * L_GS * zz
                k = _count_below(steps, ox, False)  # the first step beyond o
                while k < ns and steps[k, 0] - ox <= L_SC + tol:
                    dx = ox - steps[k, 0]
                    dz = oz - min(max(oz, steps[k, 1]), steps[k, 2])
                    d = math.sqrt(dx * dx + dz * dz)
                    if d - L_SC <= tol:
                        nx = dx / d
                        nz = dz / d
                        c = 2 * n + n * npg + (l + sd * n) * ns + k
                        gM[c] = d - L_SC
                        _obstacle_columns(Wc[c], cmu[c], steps[k, 3], R, nx, 0.0, nz, 0.0, 1.0,
                                          0.0, -nz, 0.0, nx, side * L_GS * zx - L_SC * nx,
                                          side * L_GS * zy, side * L_GS * zz - L_SC * nz)
                        oc[l, cnt] = c
                        cnt += 1
                    k += 1
        for s in range(cnt):
            c = oc[l, s]
            if cold:
                for j in range(5):
                    P[c, j] = 0.0
            active[c] = True
        ocount[l] = cnt
        found += cnt
    return found


@njit(cache=True, error_model="numpy", inline="always")
def _step(q, u, P, active, dP, refs, par, sol, scene, Rs, WJ, Ld, Ls, Wc, tmp_q, ufree, jwork,
          ws):
    """Advance q (n, 7), u (n, 6) by one time step in place, (72)-(83).

    The hard law's normal impulses come from the contact springs of par
    (:func:`_soft_normal`; the paper's rigid law when k_N is infinite).
    The PD drives (68)-(69) enter explicitly (as the paper: tau_C at q_M and
    u_A in the free velocity, the two drive rows inert, :func:`_inert_drive_rows`)
    or implicitly (:func:`drive_rows`), as sol's ``drive`` says. WJ, Ld, Ls,
    jwork and ws have NR = 6 rows per joint either way.

    Returns (iterations, converged, work): work is the drives' positive
    mechanical work over the step, J (explicit: each motor's power of
    :func:`control_torques` at the step's start times dt; implicit: each
    drive's impulse times its rate at the step's end, :func:`drive_work`;
    counted when positive: the modules' motors do not recover energy when they
    brake). P (nc, 5) holds each contact's last impulsions (warm start, as in
    the paper: the value it had when the contact was last active) and on return
    this step's; active (nc,) the active set (49): the 2n spheres on the ground,
    then the scene's obstacle slots (:func:`_obstacle_contacts`). dP (2n, 5):
    a ground contact's change of impulses over the last step; with sol's
    ``extrapolate`` one closed in that step and in this one starts from
    P + EXTRAPOLATION_GAIN dP where the change is above the solver's
    tolerance (:func:`_contact_setup`; P_N kept >= 0), and on return dP is
    this step's change (zero for the others; untouched by the compliant
    law). scene: the tuple (pegs, steps, peg_rmax) of :func:`_advance`.
    ufree (6n,), jwork (nJ, r) and ws (:func:`_workspace`) are scratch.
    """
    n = q.shape[0]
    dt = sol[0]
    kind = int(sol[1])
    max_iter = int(sol[10])
    L_SC = par[1]
    L_GS = par[2]
    implicit = int(sol[15]) == 1
    # (72): explicit first half step; the quaternions are renormalised there
    _kinematic_update(q, u, 0.5 * dt, tmp_q)
    _normalise_quaternions(tmp_q)
    _all_rotations(tmp_q, Rs)
    # smooth forces h_M (gravity, gyroscopic) and control torques tau_C
    tau = ws[22]
    power = ws[24]
    comp = ws[25]
    bo = ws[26]
    work = 0.0
    if implicit:
        drive_rows(Rs, u, refs, par[9], par[10], par[11], par[12], dt, sol[16], WJ, comp, bo)
        for i in range(n):
            for k in range(3):
                tau[i, k] = 0.0
    else:
        _inert_drive_rows(WJ, comp, bo)
        control_torques(Rs, u, refs, par[9], par[10], par[11], par[12], tau, power)
        for i in range(power.shape[0]):
            for k in range(2):
                if power[i, k] > 0.0:
                    work += power[i, k] * dt
    th0 = par[4]
    th2 = par[5]
    for i in range(n):
        for k in range(3):
            ufree[6 * i + k] = u[i, k] + dt * par[6 + k]
        w0 = u[i, 3]
        w1 = u[i, 4]
        w2 = u[i, 5]
        g0, g1, g2 = _cross(w0, w1, w2, th0 * w0, th0 * w1, th2 * w2)
        ufree[6 * i + 3] = u[i, 3] + dt * (tau[i, 0] - g0) / th0
        ufree[6 * i + 4] = u[i, 4] + dt * (tau[i, 1] - g1) / th0
        ufree[6 * i + 5] = u[i, 5] + dt * (tau[i, 2] - g2) / th2
    minv = ws[23]
    _inverse_mass(par, minv)
    joint_system(Rs, par, minv, WJ, comp, ws[0], ws[1], Ld, Ls)
    if par[17] > 0.5:  # the compliant law
        iters, converged = _compliant_impulses(tmp_q, u, P, active, par, sol, Rs, WJ, Ld, Ls,
                                               minv, bo, ufree, Wc, jwork)
        return _finish_step(q, u, tmp_q, ufree, par, sol, WJ, Ld, Ls, minv, bo, jwork, iters,
                            converged, work, Rs)
    # active set (49) at the midpoint, with a round-off tolerance
    nact = 0
    steps = scene[1]
    extrapolate = sol[17] > 0.5
    Pb = ws[32]
    ext = ws[33]
    gM = ws[34]
    for c in range(2 * n):
        i = c % n
        side = 1.0 if c < n else -1.0
        gap = tmp_q[i, 2] + side * L_GS * Rs[i, 2, 2] - L_SC
        if steps.shape[0] > 0:  # the level under the sphere's centre
            gap -= ground_level(steps, tmp_q[i, 0] + side * L_GS * Rs[i, 0, 2])
        ext[c] = False
        gM[c] = gap
        if gap <= sol[11]:
            if sol[13] < 0.5:  # cold start
                for k in range(5):
                    P[c, k] = 0.0
            elif extrapolate and active[c]:  # closed in the last step too:
                ext[c] = True  # extrapolated in _contact_setup
                for k in range(5):
                    Pb[c, k] = P[c, k]
            active[c] = True
            nact += 1
        else:
            active[c] = False
    if scene[0].shape[0] + steps.shape[0] > 0:
        nact += _obstacle_contacts(tmp_q, Rs, par, sol, scene, P, active, Wc, ws[27], ws[28],
                                   ws[29], gM)
    iters = 0
    converged = True
    if nact > 0:
        converged = False
        nl = _contact_setup(P, active, dP, u, par, sol, Rs, WJ, Ld, Ls, ufree, Wc, ws)
        # the solvers take the arrays they use by name; SOR runs all its sweeps
        # in one (inlined) call
        (D, E, FL, DR, FR, b, bL, bR, xJ, Yl, K, lk, cs, ccount, rr, gA, Pnew,
         tv, zv, Cl, F4, sv, tau, minv, power, comp, bo, cmu, oc, ocount, KW, tw, Pb, ext, gM) = ws
        if kind == 2:
            iters, converged = _sor_solve(P, par, sol, WJ, minv, ufree, Wc, nl, b, bL, bR, FL,
                                          FR, Ld, Ls, Cl, Yl, KW, lk, cs, ccount, rr, gA, gM, Pnew,
                                          sv, cmu, tw, zv)
        while kind != 2 and iters < max_iter:
            iters += 1
            res, imp_ok, dsum = _jacobi_sweep(P, par, sol, WJ, Ld, Ls, minv, ufree, Wc, nl, b,
                                              xJ, lk, cs, ccount, rr, gA, gM, Pnew, sv, cmu,
                                              tw)
            if kind == 0:  # (93)
                imp_ok = dsum < sol[6]
            # res: the largest violation of a prox equation (61), in velocity
            # units, |P - prox(P - r gamma)| / r, taken at the start of the sweep
            if imp_ok or res <= sol[9]:
                converged = True
                break
    for c in range(2 * n):  # the change this step, for the next one's start
        for k in range(5):
            dP[c, k] = P[c, k] - Pb[c, k] if ext[c] else 0.0
    return _finish_step(q, u, tmp_q, ufree, par, sol, WJ, Ld, Ls, minv, bo, jwork, iters,
                        converged, work, Rs)


@njit(cache=True, error_model="numpy", inline="always")
def _finish_step(q, u, tmp_q, ufree, par, sol, WJ, Ld, Ls, minv, bo, jwork, iters, converged,
                 work, Rs):
    """The end of a step: u_E with the joints' (and implicit drives') impulses
    solved directly for the final contact impulses, then (83), the second half
    step, and VII-C. Rs (n, 3, 3): the midpoint's rotations, used up as
    scratch."""
    n = q.shape[0]
    constrain_velocity(WJ, Ld, Ls, minv, bo, ufree, jwork)
    if int(sol[15]) == 1:
        work += drive_work(WJ, jwork, ufree)
    for i in range(n):
        for k in range(6):
            u[i, k] = ufree[6 * i + k]
    _kinematic_update(tmp_q, u, 0.5 * sol[0], q)
    _normalise_quaternions(q)
    project_joints(q, par[0], int(sol[12]) == 1, Rs)
    return iters, converged, work


@njit(cache=True, error_model="numpy")
def _workspace(n, nr, nc, maxc):
    """Scratch arrays of _step for n links and nr rows per joint
    (:data:`aiko.model._chain.NR`), nc contact slots (2n spheres on the ground
    and the scene's obstacle slots) and up to maxc contacts per link, in the
    order they are unpacked: the chain's
    eliminations D, E, FL, DR, FR (nJ, nr, nr); the joints' right-hand sides
    b, bL, bR, xJ (nJ, nr); each link's gains Y (n, 2 nr, 6) and K (n, 6, 6);
    the links touching the ground lk (n,), their contacts cs (n, maxc) and
    counts ccount (n,); per contact r (nc, 3), the restitution velocity gA
    (nc,) and the prox results Pnew (nc, 5); scratch vectors tv (6,) and zv
    (2 nr,); each link's block C (n, nr, nr) of its Q's factor
    (:func:`aiko.model._chain.link_block`); small scratch F4 (nr, nr),
    sv (6, 8); tau (n, 3); minv (n, 6); the motors'
    power (nJ, 2); the rows' compliance comp and offset bo (nJ, nr); per
    contact its friction [mu_a, mu_b, mu_V] cmu (nc, 3); each link's obstacle
    contacts oc (n, maxc) and their counts ocount (n,); per contact
    KW = K_l W (nc, 6, 5), its link's velocity response to its impulses, and tw
    (nc,), the last multiplier of its ellipse prox (the next one's start); the
    ground contacts' impulses before their extrapolation Pb (2n, 5) and whether
    they were extrapolated, ext (2n,); per contact its gap at the midpoint gM
    (nc,), for the contact springs (:func:`_soft_normal`)."""
    nj = max(n - 1, 0)
    return (np.zeros((nj, nr, nr)), np.zeros((nj, nr, nr)), np.zeros((nj, nr, nr)),
            np.zeros((nj, nr, nr)), np.zeros((nj, nr, nr)),
            np.zeros((nj, nr)), np.zeros((nj, nr)), np.zeros((nj, nr)), np.zeros((nj, nr)),
            np.zeros((n, 2 * nr, 6)), np.zeros((n, 6, 6)),
            np.zeros(n, dtype=np.int64), np.zeros((n, maxc), dtype=np.int64),
            np.zeros(n, dtype=np.int64), np.zeros((nc, 3)), np.zeros(nc),
            np.zeros((nc, 5)), np.zeros(6), np.zeros(2 * nr), np.zeros((n, nr, nr)),
            np.zeros((nr, nr)), np.zeros((6, 8)), np.zeros((n, 3)),
            np.zeros((n, 6)), np.zeros((nj, 2)), np.zeros((nj, nr)), np.zeros((nj, nr)),
            np.zeros((nc, 3)), np.zeros((n, maxc), dtype=np.int64), np.zeros(n, dtype=np.int64),
            np.zeros((nc, 6, 5)), np.zeros(nc), np.zeros((2 * n, 5)),
            np.zeros(2 * n, dtype=np.bool_), np.zeros(nc))


BAD_STATE = -1
"""_advance's code for a state with a non-finite entry (nothing done)."""
BAD_REFS = -2
"""_advance's code for non-finite joint references (nothing done)."""
DIVERGED = -3
"""_advance's code for coordinates or velocities not finite after the steps."""


@njit(cache=True, error_model="numpy", inline="always")
def _finite(a):
    """Whether every entry of the array a is finite."""
    for x in a.flat:
        if not math.isfinite(x):
            return False
    return True


@njit(cache=True, error_model="numpy", inline="always")
def _play_references(ang, motors, play, out):
    """The PD law's references (nJ, 4) through free play: each link pulled to
    the edge of the play around its motor, at the motor's speed, where it is
    outside the play; inside it, or behind a motor that is not driven, the
    link's own angle and rate (no torque). ang (nJ, 4) the joint angles and
    rates (65)-(67) now; motors (nJ, 4) [theta_h, theta_v, speed_h,
    speed_v]; play (nJ, 4) [half the play h, v (rad), driven h, v (1 or 0)]."""
    for i in range(ang.shape[0]):
        for k in range(2):
            a = ang[i, k]
            lo = motors[i, k] - play[i, k]
            hi = motors[i, k] + play[i, k]
            if play[i, 2 + k] > 0.5 and (a < lo or a > hi):
                out[i, k] = lo if a < lo else hi
                out[i, 2 + k] = motors[i, 2 + k]
            else:
                out[i, k] = a
                out[i, 2 + k] = ang[i, 2 + k]


@njit(cache=True, error_model="numpy", nogil=True)
def _advance(q, u, P, active, dP, refs, motors, play, par, sol, pegs, steps, n_steps, stats,
             work):
    """Run n_steps steps. refs (k, nJ, 4): k == 1 holds one set of references,
    k == n_steps gives one per step. Or, with motors (n_steps, nJ, 4) (an
    empty first axis: refs are used), the references of each step through
    the free play ``play`` (nJ, 4) from the joint angles at its start
    (:func:`_play_references`): the simulated robot's drives, whose play is
    taken up or left at every step, not once per call. pegs (np, 4) and steps (ns, 4): the
    scene (:meth:`aiko.model.scene.Scene.peg_array`, ``step_array``; sorted
    by x); P (nc, 5) and active (nc,) hold nc = 2n + n np + 2n ns contact
    slots (:func:`_obstacle_contacts`), dP (2n, 5) the ground contacts' last
    change (see _step). stats (3,) += [iterations, max iterations,
    unconverged steps]; work (n_steps,) receives each step's positive work of
    the drives, J (see _step). Returns the number of steps taken, or a code
    below zero: BAD_STATE (a non-finite entry in q, u, P or dP) and BAD_REFS
    (in refs) before any step, DIVERGED (q or u not finite after the steps).
    The step and its parts are inlined (see _sor_solve). Runs without the
    GIL: models stepped on threads of one process run at once."""
    if not (_finite(q) and _finite(u) and _finite(P) and _finite(dP)):
        return BAD_STATE
    if not (_finite(refs) and _finite(motors) and _finite(play)):
        return BAD_REFS
    n = q.shape[0]
    nr = NR
    Rs = np.empty((n, 3, 3))
    nj = max(n - 1, 0)
    WJ = np.zeros((nj, 12, nr))
    Ld = np.zeros((nj, nr, nr))
    Ls = np.zeros((nj, nr, nr))
    nc = P.shape[0]
    npg = pegs.shape[0]
    ns = steps.shape[0]
    Wc = np.empty((nc, 6, 5))  # each contact's W is written when it closes
    tmp_q = np.empty((n, 7))
    ufree = np.empty(6 * n)
    jwork = np.empty((nj, nr))
    ws = _workspace(n, nr, nc, 2 + npg + 2 * ns)
    cmu = ws[27]
    for c in range(nc):
        cmu[c, 0] = par[13]
        cmu[c, 1] = par[14]
        cmu[c, 2] = par[15]
    for c in range(2 * n, nc):  # obstacle contacts are found anew each step
        active[c] = False
    rmax = 0.0
    for k in range(npg):
        rmax = max(rmax, pegs[k, 2])
    scene = (pegs, steps, rmax)
    hold = refs.shape[0] == 1
    through_play = motors.shape[0] > 0
    ang = np.empty((nj, 4))
    r_play = np.empty((nj, 4))
    for s in range(n_steps):
        if through_play:
            _all_rotations(q, Rs)
            joint_angles(Rs, u, ang)
            _play_references(ang, motors[s], play, r_play)
            r = r_play
        else:
            r = refs[0] if hold else refs[s]
        it, ok, w = _step(q, u, P, active, dP, r, par, sol, scene, Rs, WJ, Ld, Ls, Wc, tmp_q,
                          ufree, jwork, ws)
        work[s] = w
        stats[0] += it
        if it > stats[1]:
            stats[1] = it
        if not ok:
            stats[2] += 1
    if not (_finite(q) and _finite(u)):
        return DIVERGED
    return n_steps
