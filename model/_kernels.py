"""Compiled kernels of the time-stepping scheme (numba, ``cache=True``).

Private: the public wrappers in :mod:`aiko.model.stepping` check their input and
call these. Every kernel takes plain arrays and scalars. The readable dense twin
of the whole step is :mod:`aiko.model.reference`; tests compare the two.

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

from .prox import _prox_disc, _prox_ellipse

PAR_FIELDS = (
    "L", "L_SC", "L_GS", "m", "Theta1", "Theta3", "g_x", "g_y", "g_z",
    "K_hp", "K_hd", "K_vp", "K_vd", "mu_x", "mu_y", "mu_V", "e_N",
)
SOL_FIELDS = (
    "dt", "solver", "alpha", "r_N", "r_T", "r_V", "eps", "T_rel", "T_abs",
    "u_tol", "max_iter", "active_tol", "projection", "warm_start",
)
SOLVER_CODES = {"newton": 0, "jor": 1, "sor": 2}
PROJECTION_CODES = {"link1": 0, "com": 1}

_TINY = 1e-300


# --------------------------------------------------------------------------
# small vector helpers
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True, error_model="numpy")
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


@njit(cache=True, error_model="numpy")
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


@njit(cache=True, error_model="numpy")
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


@njit(cache=True, error_model="numpy")
def joint_jacobian(Ra, Rb, La, Lb, W):
    """W_Ji (12, 4) of the joint between links a = i and b = i + 1, (38)-(41).

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
def control_torques(Rs, u, refs, K_hp, K_hd, K_vp, K_vd, tau):
    """PD torques (68)-(69) applied as body torques tau (n, 3) of (62)-(63)."""
    n = Rs.shape[0]
    for i in range(n):
        for k in range(3):
            tau[i, k] = 0.0
    if n < 2:
        return tau
    ang = np.empty((n - 1, 4))
    joint_angles(Rs, u, ang)
    for i in range(n - 1):
        t_h = K_hp * (ang[i, 0] - refs[i, 0]) + K_hd * (ang[i, 2] - refs[i, 2])
        t_v = K_vp * (ang[i, 1] - refs[i, 1]) + K_vd * (ang[i, 3] - refs[i, 3])
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


# --------------------------------------------------------------------------
# constraint projection (VII-C)
# --------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def project_joints(q, L, keep_com):
    """Project the links onto the joint constraints, (12)-(13) = 0 (VII-C).

    First every link i+1 is turned about its own z axis so that its x axis is
    normal to the (corrected) y axis of link i (g_Jphi = 0); then links 2..n are
    translated so that the joint points coincide (g_Jchi = 0). Link 1 stays fixed
    (the paper); with keep_com the chain is then shifted so that the centre of
    mass (equal link masses) is where it was. Quaternions must be unit on entry.
    """
    n = q.shape[0]
    if n < 2:
        return
    Ra = np.empty((3, 3))
    Rb = np.empty((3, 3))
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
            tx /= nt
            ty /= nt
            tz /= nt
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
            th = math.atan2(sth, cth)
            if th != 0.0:
                # world-frame rotation about z_b by th: p <- p_delta (x) p
                c = math.cos(0.5 * th)
                s = math.sin(0.5 * th)
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
                s2 = math.sqrt(q[i + 1, 3] ** 2 + q[i + 1, 4] ** 2 + q[i + 1, 5] ** 2
                               + q[i + 1, 6] ** 2)
                for k in range(3, 7):
                    q[i + 1, k] /= s2
                rotation(q[i + 1, 3:7], Rb)
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
@njit(cache=True, error_model="numpy")
def _contact_prox(Pc, gam, grp, rN, rT, rV, gA, e_N, mu_x, mu_y, mu_V, out):
    """One group of a contact's prox equations: grp 0 normal (77) (with Newton
    restitution on the normal velocity), 1 Coulomb ellipse (78), (58), 2 rolling
    disc (79), (60). The friction sets use the normal impulse already in out[0]."""
    if grp == 0:
        pn = Pc[0] - rN * (gam[0] + e_N * gA)
        out[0] = pn if pn > 0.0 else 0.0
    elif grp == 1:
        pt = _prox_ellipse(Pc[1] - rT * gam[1], Pc[2] - rT * gam[2],
                           mu_x * out[0], mu_y * out[0])
        out[1] = pt[0]
        out[2] = pt[1]
    else:
        pv = _prox_disc(Pc[3] - rV * gam[3], Pc[4] - rV * gam[4], mu_V * out[0])
        out[3] = pv[0]
        out[4] = pv[1]


@njit(cache=True, error_model="numpy")
def _inverse_mass(par, minv):
    """Diagonal of M^-1 for one link, (47)-(48): [1/m x3, 1/Theta1 x2, 1/Theta3]."""
    minv[0] = 1.0 / par[3]
    minv[1] = minv[0]
    minv[2] = minv[0]
    minv[3] = 1.0 / par[4]
    minv[4] = minv[3]
    minv[5] = 1.0 / par[5]


@njit(cache=True, error_model="numpy")
def _chol4(D, Lo):
    """Lower Cholesky factor of a 4x4 SPD block."""
    for j in range(4):
        s = D[j, j]
        for k in range(j):
            s -= Lo[j, k] * Lo[j, k]
        d = math.sqrt(s) if s > 0.0 else 1e-300
        Lo[j, j] = d
        for i in range(j + 1, 4):
            s = D[i, j]
            for k in range(j):
                s -= Lo[i, k] * Lo[j, k]
            Lo[i, j] = s / d
        for i in range(j):
            Lo[i, j] = 0.0


@njit(cache=True, error_model="numpy")
def joint_system(Rs, par, WJ, Ld, Ls):
    """W_J and the block Cholesky factor of G_J = W_J^T M^-1 W_J, the matrix of the
    direct bilateral impulses (84). O(n).

    Each joint touches two neighbouring links, so G_J is block tridiagonal with
    4x4 blocks D_i (joint i with itself) and E_i (joints i, i+1 through their
    shared link). Factor G_J = L L^T with diagonal blocks Ld[i] (lower triangular)
    and sub-diagonal blocks Ls[i] (row i, column i-1; Ls[0] unused):
    Ls[i] = E_{i-1}^T Ld[i-1]^-T, Ld[i] Ld[i]^T = D_i - Ls[i] Ls[i]^T.
    WJ (nJ, 12, 4) receives the joints' W_Ji (39)-(41).
    """
    n = Rs.shape[0]
    minv = np.empty(6)
    _inverse_mass(par, minv)
    L = par[0]
    D = np.empty((4, 4))
    E = np.empty((4, 4))
    for i in range(n - 1):
        joint_jacobian(Rs[i], Rs[i + 1], L, L, WJ[i])
    for i in range(n - 1):
        for a in range(4):
            for b in range(4):
                s = 0.0
                for j in range(12):
                    s += WJ[i, j, a] * minv[j % 6] * WJ[i, j, b]
                D[a, b] = s
        if i > 0:
            # E = G[i-1, i] = WJ[i-1, 6:]^T M^-1 WJ[i, :6] (the shared link i)
            for a in range(4):
                for b in range(4):
                    s = 0.0
                    for j in range(6):
                        s += WJ[i - 1, 6 + j, a] * minv[j] * WJ[i, j, b]
                    E[a, b] = s
            # Ls[i] Ld[i-1]^T = E^T: forward substitution, row by row
            for r in range(4):
                for c in range(4):
                    s = E[c, r]
                    for k in range(c):
                        s -= Ls[i, r, k] * Ld[i - 1, c, k]
                    Ls[i, r, c] = s / Ld[i - 1, c, c]
            for a in range(4):
                for b in range(4):
                    s = 0.0
                    for k in range(4):
                        s += Ls[i, a, k] * Ls[i, b, k]
                    D[a, b] -= s
        _chol4(D, Ld[i])


@njit(cache=True, error_model="numpy")
def _joint_solve(Ld, Ls, x):
    """Solve G_J y = x in place, x (nJ, 4), with the factor of joint_system."""
    nj = x.shape[0]
    for i in range(nj):  # L z = x
        if i > 0:
            for r in range(4):
                s = 0.0
                for k in range(4):
                    s += Ls[i, r, k] * x[i - 1, k]
                x[i, r] -= s
        for r in range(4):
            s = x[i, r]
            for k in range(r):
                s -= Ld[i, r, k] * x[i, k]
            x[i, r] = s / Ld[i, r, r]
    for i in range(nj - 1, -1, -1):  # L^T y = z
        if i < nj - 1:
            for r in range(4):
                s = 0.0
                for k in range(4):
                    s += Ls[i + 1, k, r] * x[i + 1, k]
                x[i, r] -= s
        for r in range(3, -1, -1):
            s = x[i, r]
            for k in range(r + 1, 4):
                s -= Ld[i, k, r] * x[i, k]
            x[i, r] = s / Ld[i, r, r]


@njit(cache=True, error_model="numpy")
def _sub_joint_velocity(WJ, minv, P_J, v):
    """v <- v - M^-1 W_J P_J: the velocity change of joint impulses P_J (nJ, 4)
    taken with the opposite sign (v: a 6n vector or a strided column)."""
    for i in range(WJ.shape[0]):
        for j in range(12):
            s = 0.0
            for k in range(4):
                s += WJ[i, j, k] * P_J[i, k]
            v[6 * i + j] -= minv[j % 6] * s


@njit(cache=True, error_model="numpy")
def constrain_velocity(WJ, Ld, Ls, minv, v, work):
    """v <- v - M^-1 W_J G_J^-1 W_J^T v: add the direct joint impulses that make
    W_J^T v = 0 (the corrected (84)); the M-orthogonal projection onto the
    velocities the joints allow. O(n). work (nJ, 4)."""
    nj = WJ.shape[0]
    for i in range(nj):
        for k in range(4):
            s = 0.0
            for j in range(12):
                s += WJ[i, j, k] * v[6 * i + j]
            work[i, k] = s
    _joint_solve(Ld, Ls, work)
    _sub_joint_velocity(WJ, minv, work, v)


@njit(cache=True, error_model="numpy")
def link_response(k, WJ, Ld, Ls, minv, out, work):
    """Velocity change of the whole chain per unit impulse on each of link k's six
    coordinates, with the joints' impulses solved directly: out (6n, 6) =
    (M^-1 - M^-1 W_J G_J^-1 W_J^T M^-1) E_k, the link-k columns of the constrained
    inverse mass. O(n) per column: the impulse reaches the joint system only
    through joints k-1 and k."""
    nj = WJ.shape[0]
    nd = out.shape[0]
    for j in range(6):
        for r in range(nd):
            out[r, j] = 0.0
        out[6 * k + j, j] = minv[j]
        for i in range(nj):
            for q in range(4):
                work[i, q] = 0.0
        if k >= 1:  # joint k-1 sees link k as its second body
            for q in range(4):
                work[k - 1, q] = WJ[k - 1, 6 + j, q] * minv[j]
        if k < nj:  # joint k sees it as its first
            for q in range(4):
                work[k, q] = WJ[k, j, q] * minv[j]
        _joint_solve(Ld, Ls, work)
        _sub_joint_velocity(WJ, minv, work, out[:, j])


@njit(cache=True, error_model="numpy")
def _step(q, u, P, active, refs, par, sol, Rs, WJ, Ld, Ls, Wc, tmp_q):
    """Advance q (n, 7), u (n, 6) by one time step in place, (72)-(83).

    Returns (iterations, converged). P (2n, 5) holds each sphere's last contact
    impulsions (warm start, as in the paper: the value it had when the contact was
    last active) and on return this step's; active (2n,) the active set (49).
    """
    n = q.shape[0]
    nd = 6 * n
    dt = sol[0]
    kind = int(sol[1])
    alpha = sol[2]
    max_iter = int(sol[10])
    L_SC = par[1]
    L_GS = par[2]
    mu_x = par[13]
    mu_y = par[14]
    mu_V = par[15]
    e_N = par[16]
    # (72): explicit first half step; the quaternions are renormalised there
    _kinematic_update(q, u, 0.5 * dt, tmp_q)
    _normalise_quaternions(tmp_q)
    _all_rotations(tmp_q, Rs)
    # smooth forces h_M (gravity, gyroscopic) and control torques tau_C
    tau = np.empty((n, 3))
    control_torques(Rs, u, refs, par[9], par[10], par[11], par[12], tau)
    theta = np.empty(3)
    theta[0] = par[4]
    theta[1] = par[4]
    theta[2] = par[5]
    ufree = np.empty(nd)
    for i in range(n):
        for k in range(3):
            ufree[6 * i + k] = u[i, k] + dt * par[6 + k]
        w0 = u[i, 3]
        w1 = u[i, 4]
        w2 = u[i, 5]
        g0, g1, g2 = _cross(w0, w1, w2, theta[0] * w0, theta[1] * w1, theta[2] * w2)
        ufree[6 * i + 3] = u[i, 3] + dt * (tau[i, 0] - g0) / theta[0]
        ufree[6 * i + 4] = u[i, 4] + dt * (tau[i, 1] - g1) / theta[1]
        ufree[6 * i + 5] = u[i, 5] + dt * (tau[i, 2] - g2) / theta[2]
    # the free velocity with the joint impulses solved directly
    minv = np.empty(6)
    _inverse_mass(par, minv)
    joint_system(Rs, par, WJ, Ld, Ls)
    jwork = np.empty((max(n - 1, 0), 4))
    uE = ufree
    constrain_velocity(WJ, Ld, Ls, minv, uE, jwork)
    # active set (49) at the midpoint, with a round-off tolerance
    nact = 0
    idx = np.empty(2 * n, dtype=np.int64)
    for c in range(2 * n):
        i = c % n
        side = 1.0 if c < n else -1.0
        gap = tmp_q[i, 2] + side * L_GS * Rs[i, 2, 2] - L_SC
        if gap <= sol[11]:
            if sol[13] < 0.5:  # cold start
                for k in range(5):
                    P[c, k] = 0.0
            active[c] = True
            idx[nact] = c
            nact += 1
        else:
            active[c] = False
    iters = 0
    converged = True
    if nact > 0:
        converged = False
        rN = np.empty(nact)
        rT = np.empty(nact)
        rV = np.empty(nact)
        gA = np.empty(nact)
        AW = np.empty((nact, nd, 5))  # velocity change per unit impulse of each column
        resp = np.empty((n, nd, 6))
        have = np.zeros(n, dtype=np.bool_)
        for a in range(nact):
            c = idx[a]
            i = c % n
            side = 1.0 if c < n else -1.0
            contact_jacobian(Rs[i], side, L_SC, L_GS, Wc[c])
            if not have[i]:
                link_response(i, WJ, Ld, Ls, minv, resp[i], jwork)
                have[i] = True
            for r in range(nd):
                for k in range(5):
                    s = 0.0
                    for j in range(6):
                        s += resp[i, r, j] * Wc[c, j, k]
                    AW[a, r, k] = s
            gdiag = np.zeros(5)
            for k in range(5):
                s = 0.0
                for j in range(6):
                    s += Wc[c, j, k] * AW[a, 6 * i + j, k]
                gdiag[k] = s
            if kind == 0:
                rN[a] = sol[3]
                rT[a] = sol[4]
                rV[a] = sol[5]
            else:
                rN[a] = alpha / max(gdiag[0], _TINY)
                rT[a] = alpha / max(max(gdiag[1], gdiag[2]), _TINY)
                rV[a] = alpha / max(max(gdiag[3], gdiag[4]), _TINY)
            s = 0.0
            for j in range(6):
                s += Wc[c, j, 0] * u[i, j]
            gA[a] = s
            # warm start
            for r in range(nd):
                uE[r] += (AW[a, r, 0] * P[c, 0] + AW[a, r, 1] * P[c, 1] + AW[a, r, 2] * P[c, 2]
                          + AW[a, r, 3] * P[c, 3] + AW[a, r, 4] * P[c, 4])
        Pnew = np.empty((nact, 5))
        dP = np.empty(5)
        gam = np.empty(5)
        while iters < max_iter:
            iters += 1
            dsum = 0.0
            imp_ok = True
            res = 0.0
            for a in range(nact):
                c = idx[a]
                i = c % n
                if kind == 2:
                    # SOR: normal, then friction, then rolling, the velocities
                    # following each projection at once (Gehring et al., after (19))
                    for grp in range(3):
                        k0 = 0 if grp == 0 else 2 * grp - 1
                        k1 = 1 if grp == 0 else 2 * grp + 1
                        for k in range(k0, k1):
                            s = 0.0
                            for j in range(6):
                                s += Wc[c, j, k] * uE[6 * i + j]
                            gam[k] = s
                        _contact_prox(P[c], gam, grp, rN[a], rT[a], rV[a], gA[a],
                                      e_N, mu_x, mu_y, mu_V, Pnew[a])
                        rk = rN[a] if grp == 0 else (rT[a] if grp == 1 else rV[a])
                        for k in range(k0, k1):
                            dP[k] = Pnew[a, k] - P[c, k]
                            if abs(dP[k]) > abs(P[c, k]) * sol[7] + sol[8]:
                                imp_ok = False
                            res = max(res, abs(dP[k]) / rk)
                            P[c, k] = Pnew[a, k]
                            if dP[k] != 0.0:
                                for r in range(nd):
                                    uE[r] += AW[a, r, k] * dP[k]
                else:
                    for k in range(5):
                        s = 0.0
                        for j in range(6):
                            s += Wc[c, j, k] * uE[6 * i + j]
                        gam[k] = s
                    for grp in range(3):
                        _contact_prox(P[c], gam, grp, rN[a], rT[a], rV[a], gA[a],
                                      e_N, mu_x, mu_y, mu_V, Pnew[a])
            if kind != 2:  # Jacobi: all contacts from the same velocities
                d_n = 0.0
                d_t = 0.0
                d_v = 0.0
                for a in range(nact):
                    c = idx[a]
                    for k in range(5):
                        dP[k] = Pnew[a, k] - P[c, k]
                        if abs(dP[k]) > abs(P[c, k]) * sol[7] + sol[8]:
                            imp_ok = False
                    res = max(res, abs(dP[0]) / rN[a])
                    for k in range(1, 3):
                        res = max(res, abs(dP[k]) / rT[a])
                    for k in range(3, 5):
                        res = max(res, abs(dP[k]) / rV[a])
                    d_n += dP[0] * dP[0]
                    d_t += dP[1] * dP[1] + dP[2] * dP[2]
                    d_v += dP[3] * dP[3] + dP[4] * dP[4]
                    for r in range(nd):
                        uE[r] += (AW[a, r, 0] * dP[0] + AW[a, r, 1] * dP[1] + AW[a, r, 2] * dP[2]
                                  + AW[a, r, 3] * dP[3] + AW[a, r, 4] * dP[4])
                    for k in range(5):
                        P[c, k] = Pnew[a, k]
                if kind == 0:  # (93)
                    dsum = math.sqrt(d_n) + math.sqrt(d_t) + math.sqrt(d_v)
                    imp_ok = dsum < sol[6]
            # res: the largest violation of a prox equation (61), in velocity
            # units, |P - prox(P - r gamma)| / r, taken at the start of the sweep
            if imp_ok or res <= sol[9]:
                converged = True
                break
    # (83): second half step with u_E, then VII-C
    for i in range(n):
        for k in range(6):
            u[i, k] = uE[6 * i + k]
    _kinematic_update(tmp_q, u, 0.5 * dt, q)
    _normalise_quaternions(q)
    project_joints(q, par[0], int(sol[12]) == 1)
    return iters, converged


@njit(cache=True, error_model="numpy")
def _advance(q, u, P, active, refs, par, sol, n_steps, stats):
    """Run n_steps steps. refs (k, nJ, 4): k == 1 holds one set of references,
    k == n_steps gives one per step. stats (3,) += [iterations, max iterations,
    unconverged steps]. Returns the number of steps taken."""
    n = q.shape[0]
    Rs = np.empty((n, 3, 3))
    nj = max(n - 1, 0)
    WJ = np.empty((nj, 12, 4))
    Ld = np.zeros((nj, 4, 4))
    Ls = np.zeros((nj, 4, 4))
    Wc = np.zeros((2 * n, 6, 5))
    tmp_q = np.empty((n, 7))
    hold = refs.shape[0] == 1
    for s in range(n_steps):
        r = refs[0] if hold else refs[s]
        it, ok = _step(q, u, P, active, r, par, sol, Rs, WJ, Ld, Ls, Wc, tmp_q)
        stats[0] += it
        if it > stats[1]:
            stats[1] = it
        if not ok:
            stats[2] += 1
    return n_steps
