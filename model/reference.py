"""Readable dense twin of the compiled time step, for tests and diagnostics.

Every matrix is built whole, as printed in the paper: W_N (6n, 2n) (18)-(20),
W_T (6n, 4n) (22)-(32), W_V (6n, 4n) (36)-(37), W_J (6n, 4(n-1)) (39)-(43), the
diagonal M (47)-(48), h, tau_C (62)-(64). The step follows (72)-(93) with the
known corrections: the first half step (72) is explicit in q_A; the bilateral
impulses solve gamma_JE = W_J^T u_E = 0,
P_J = -G_J^-1 W_J^T [u_A + M^-1 (h dt + S + tau_C dt)] with
G_J = W_J^T M^-1 W_J (the sign of (84) corrected); (24) uses r_GiCRi. With
implicit drives (the default) tau_C leaves the free velocity and the drives'
rows W_D (:func:`reference_drive_rows`) join W_J, with their compliance on
G_J's diagonal and their offset beside W_J^T [...]. Obstacles (a scene's
pegs and steps, :func:`obstacle_contacts`) add contacts with their own
normal and two friction directions, found without a broad phase.

Slow (dense linear algebra in Python); never used by the simulator itself.
"""

from __future__ import annotations

import math

import numpy as np

from ._kernels import EXTRAPOLATION_GAIN
from .prox import prox_disc, prox_ellipse
from .quaternion import H_bar, rotation_matrix, skew

__all__ = ["reference_step", "dense_matrices", "reference_torques", "reference_joint_angles",
           "reference_drive_power", "reference_drive_rows", "obstacle_contacts"]

E = np.eye(3)


def _pars(par):
    keys = ("L", "L_SC", "L_GS", "m", "Theta1", "Theta3", "g_x", "g_y", "g_z",
            "K_hp", "K_hd", "K_vp", "K_vd", "mu_x", "mu_y", "mu_V", "e_N", "contact", "k_pc",
            "k_vc", "k_N", "d_N", "v_N")
    return dict(zip(keys, (float(v) for v in par), strict=True))


def _F(q: np.ndarray) -> np.ndarray:
    """F(q) (7n, 6n) of (73)-(74)."""
    n = q.shape[0]
    F = np.zeros((7 * n, 6 * n))
    for i in range(n):
        F[7 * i:7 * i + 3, 6 * i:6 * i + 3] = E
        F[7 * i + 3:7 * i + 7, 6 * i + 3:6 * i + 6] = 0.5 * H_bar(q[i, 3:]).T
    return F


def dense_matrices(q: np.ndarray, p: dict) -> dict:
    """g_N (2n,), W_N, W_T, W_V, W_J at q, following (9)-(43) literally."""
    n = q.shape[0]
    Rs = [rotation_matrix(qi[3:] / np.linalg.norm(qi[3:])) for qi in q]
    ez = E[:, 2]
    D = np.array([[1.0, 0, 0], [0, 1.0, 0]]).T  # (29): 3 x 2
    g_N = np.zeros(2 * n)
    W_N = np.zeros((6 * n, 2 * n))
    W_T = np.zeros((6 * n, 4 * n))
    W_V = np.zeros((6 * n, 4 * n))
    for side_idx, side in enumerate((1.0, -1.0)):  # F then R
        for i in range(n):
            R = Rs[i]
            a = side_idx * n + i
            zB = R[:, 2]
            r_GS = side * p["L_GS"] * zB
            g_N[a] = (q[i, :3] + r_GS) @ ez - p["L_SC"]  # (9)
            r_GC = r_GS - p["L_SC"] * ez  # (14)-(16)
            rt = skew(r_GC)
            W_N[6 * i:6 * i + 6, a] = np.concatenate([ez, -(ez @ rt @ R)])  # (18)
            Wp = np.column_stack([np.concatenate([E[:, k], -(E[:, k] @ rt @ R)])
                                  for k in (0, 1)])  # (22), (24), (26)
            Axy = np.diag([1.0, 1.0, 0.0])
            nx = Axy @ zB
            nx = nx / np.linalg.norm(nx) if np.linalg.norm(nx) > 1e-12 else E[:, 0]
            ny = np.cross(ez, nx)
            ny /= np.linalg.norm(ny)
            R_IPi = np.column_stack([nx, ny, ez])  # (27)-(28)
            Rbar = D.T @ R_IPi @ D  # (29)
            W_T[6 * i:6 * i + 6, 2 * a:2 * a + 2] = Wp @ Rbar  # (30)
            r_CS = p["L_SC"] * ez
            WVt = np.hstack([np.zeros((2, 3)), D.T @ skew(r_CS) @ R])  # (36)
            W_V[6 * i:6 * i + 6, 2 * a:2 * a + 2] = WVt.T
    W_J = np.zeros((6 * n, 4 * max(n - 1, 0)))
    for i in range(n - 1):
        Ra, Rb = Rs[i], Rs[i + 1]
        ezB = E[:, 2]
        for chi in range(3):
            e = E[:, chi]
            col = np.concatenate([
                e, -((p["L"] / 2) * e @ Ra @ skew(ezB)),
                -e, -((p["L"] / 2) * e @ Rb @ skew(ezB))])  # (39)
            W_J[6 * i:6 * i + 12, 4 * i + chi] = col
        ya = Ra @ E[:, 1]
        xb = Rb @ E[:, 0]
        W_J[6 * i:6 * i + 12, 4 * i + 3] = np.concatenate([
            np.zeros(3), -((Ra @ skew(E[:, 1])).T @ xb), np.zeros(3),
            -((Rb @ skew(E[:, 0])).T @ ya)])  # (41)
    return {"Rs": np.array(Rs), "g_N": g_N, "W_N": W_N, "W_T": W_T, "W_V": W_V, "W_J": W_J}


def reference_joint_angles(Rs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(65)-(67): (n-1, 4) = [alpha_h, alpha_v, omega_h, omega_v]."""
    n = Rs.shape[0]
    out = np.zeros((n - 1, 4))
    for i in range(n - 1):
        Rr = Rs[i].T @ Rs[i + 1]  # (63)
        out[i, 1] = math.atan2(Rr[2, 1], Rr[2, 2])
        out[i, 0] = -math.asin(np.clip(Rr[2, 0], -1, 1))
        wJ = u[i + 1, 3:] - Rr.T @ u[i, 3:]
        out[i, 2] = wJ[1]
        out[i, 3] = wJ[0]
    return out


def reference_torques(Rs: np.ndarray, u: np.ndarray, refs: np.ndarray, p: dict) -> np.ndarray:
    """tau_C (6n,) of (62)-(64) with the PD laws (68)-(69)."""
    n = Rs.shape[0]
    ang = reference_joint_angles(Rs, u) if n > 1 else np.zeros((0, 4))
    th = np.zeros(n + 1)  # tau_h0 = tau_hn = 0
    tv = np.zeros(n + 1)
    for i in range(n - 1):
        th[i + 1] = p["K_hp"] * (ang[i, 0] - refs[i, 0]) + p["K_hd"] * (ang[i, 2] - refs[i, 2])
        tv[i + 1] = p["K_vp"] * (ang[i, 1] - refs[i, 1]) + p["K_vd"] * (ang[i, 3] - refs[i, 3])
    tau = np.zeros(6 * n)
    for i in range(n):  # paper index i + 1
        t = np.array([0.0, th[i + 1], 0.0]) - np.array([tv[i], 0.0, 0.0])
        if i > 0:
            t -= (Rs[i].T @ Rs[i - 1]) @ np.array([0.0, th[i], 0.0])
        if i < n - 1:
            t += (Rs[i].T @ Rs[i + 1]) @ np.array([tv[i + 1], 0.0, 0.0])
        tau[6 * i + 3:6 * i + 6] = t
    return tau


def reference_drive_power(Rs: np.ndarray, u: np.ndarray, refs: np.ndarray,
                          p: dict) -> np.ndarray:
    """Each motor's mechanical power (n-1, 2), W, in the world frame: the
    torque pair of (62)-(64) about the cardan axis y_i (horizontal motor) or
    x_{i+1} (vertical motor), dotted with the two links' angular velocities."""
    n = Rs.shape[0]
    ang = reference_joint_angles(Rs, u) if n > 1 else np.zeros((0, 4))
    out = np.zeros((max(n - 1, 0), 2))
    for i in range(n - 1):
        t_h = p["K_hp"] * (ang[i, 0] - refs[i, 0]) + p["K_hd"] * (ang[i, 2] - refs[i, 2])
        t_v = p["K_vp"] * (ang[i, 1] - refs[i, 1]) + p["K_vd"] * (ang[i, 3] - refs[i, 3])
        w_a = Rs[i] @ u[i, 3:]
        w_b = Rs[i + 1] @ u[i + 1, 3:]
        # link i gets +t_h y_i and +t_v x_{i+1}, link i+1 the opposite
        out[i, 0] = t_h * Rs[i][:, 1] @ (w_a - w_b)
        out[i, 1] = t_v * Rs[i + 1][:, 0] @ (w_a - w_b)
    return out


def reference_drive_rows(Rs: np.ndarray, u: np.ndarray, refs: np.ndarray, p: dict,
                         dt: float, sigma: float):
    """The implicit drives as compliant bilateral constraints (see the
    compiled ``drive_rows``): W_D (6n, 2(n-1)), the generalised force
    directions of the torque pairs of (62)-(64) (columns: joint i's horizontal
    drive about y_i, then its vertical drive about x_{i+1}, so that
    tau_C = -W_D [t_h1, t_v1, ...] and W_D^T u = the joint rates), their
    compliance 1/gamma and their offset c/gamma (2(n-1),) each:
    gamma = sigma dt (K_d + dt K_p / 2), c = dt (K_p (alpha_M - (1 - sigma) dt/2
    alphadot_A - alpha_r) + K_d ((1 - sigma) alphadot_A - alphadot_r)), the
    impulse lambda = -gamma W_D^T u_E - c."""
    n = Rs.shape[0]
    nj = max(n - 1, 0)
    W_D = np.zeros((6 * n, 2 * nj))
    comp = np.ones(2 * nj)
    offset = np.zeros(2 * nj)
    ang = reference_joint_angles(Rs, u) if n > 1 else np.zeros((0, 4))
    uA = u.reshape(-1)
    for i in range(nj):
        axes = (Rs[i][:, 1], Rs[i + 1][:, 0])  # y_i, x_{i+1}
        gains = ((p["K_hp"], p["K_hd"]), (p["K_vp"], p["K_vd"]))
        for k in range(2):
            K_p, K_d = gains[k]
            gamma = sigma * dt * (K_d + 0.5 * dt * K_p)
            if gamma <= 0.0:
                continue
            col = np.zeros(6 * n)
            col[6 * i + 3:6 * i + 6] = -(Rs[i].T @ axes[k])
            col[6 * i + 9:6 * i + 12] = Rs[i + 1].T @ axes[k]
            rate = col @ uA
            c = dt * (K_p * (ang[i, k] - (1 - sigma) * 0.5 * dt * rate - refs[i, k])
                      + K_d * ((1 - sigma) * rate - refs[i, 2 + k]))
            W_D[:, 2 * i + k] = col
            comp[2 * i + k] = 1.0 / gamma
            offset[2 * i + k] = c / gamma
    return W_D, comp, offset


def _level(steps: np.ndarray, x: float) -> float:
    """The ground's height at x: the level above the last step with x0 <= x."""
    behind = steps[steps[:, 0] <= x]
    return float(behind[-1, 2]) if len(behind) else 0.0


def _column(R: np.ndarray, r: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Generalised force direction of a force along d at r from G (world
    frame) on one link, (17)-(18): [d; R^T (r x d)] (6,)."""
    return np.concatenate([d, R.T @ np.cross(r, d)])


def obstacle_contacts(q: np.ndarray, p: dict, pegs: np.ndarray, steps: np.ndarray) -> dict:
    """Every obstacle contact's slot -> (gap, link, W (6, 5), mu, r), r (3,)
    the contact point from the link's G in the world frame, from
    every pair (no broad phase): link bodies against pegs, spheres against
    step risers and edges (see the compiled ``_obstacle_contacts`` for the
    geometry and the slot numbers). q: coordinates (n, 7); pegs (np, 4),
    steps (ns, 4) as :meth:`aiko.model.scene.Scene.peg_array`, ``step_array``."""
    n = q.shape[0]
    npg, ns = pegs.shape[0], steps.shape[0]
    ez = E[:, 2]
    out = {}
    for i in range(n):
        R = rotation_matrix(q[i, 3:] / np.linalg.norm(q[i, 3:]))
        zB = R[:, 2]
        G = q[i, :3]
        for k in range(npg):
            axis = np.array([pegs[k, 0], pegs[k, 1], 0.0])
            zh = np.array([zB[0], zB[1], 0.0])
            dh = np.array([G[0], G[1], 0.0]) - axis
            s = 0.0
            if zh @ zh > 1e-24:
                s = float(np.clip(-(dh @ zh) / (zh @ zh), -p["L_GS"], p["L_GS"]))
            h = dh + s * zh
            d = np.linalg.norm(h)
            nrm = h / d if d > 0 else E[:, 0]
            r = s * zB - p["L_SC"] * nrm  # the contact point on the link's surface
            W = np.zeros((6, 5))
            for col, direction in enumerate((nrm, np.cross(ez, nrm), ez)):
                W[:, col] = _column(R, r, direction)
            out[2 * n + i * npg + k] = (d - p["L_SC"] - pegs[k, 2], i, W, pegs[k, 3], r)
        for side_idx, side in enumerate((1.0, -1.0)):
            o = G + side * p["L_GS"] * zB
            for k in range(ns):
                x0, lo, hi, mu = steps[k]
                if o[0] >= x0:  # its top face is the ground under the sphere
                    continue
                Q = np.array([x0, o[1], np.clip(o[2], lo, hi)])  # riser or edge
                d = np.linalg.norm(o - Q)
                nrm = (o - Q) / d
                r = side * p["L_GS"] * zB - p["L_SC"] * nrm
                W = np.zeros((6, 5))
                for col, direction in enumerate((nrm, E[:, 1], np.cross(nrm, E[:, 1]))):
                    W[:, col] = _column(R, r, direction)
                slot = 2 * n + n * npg + (side_idx * n + i) * ns + k
                out[slot] = (d - p["L_SC"], i, W, mu, r)
    return out


def _project(q: np.ndarray, L: float, keep_com: bool) -> np.ndarray:
    """VII-C with rotation matrices, then back to quaternions."""
    from .quaternion import from_rotation_matrix

    q = q.copy()
    n = q.shape[0]
    com = q[:, :3].mean(axis=0)
    Rs = [rotation_matrix(qi[3:]) for qi in q]
    for i in range(n - 1):
        Ra, Rb = Rs[i], Rs[i + 1]
        x = np.cross(Ra[:, 1], Rb[:, 2])
        if np.linalg.norm(x) > 1e-12:
            x /= np.linalg.norm(x)
            if x @ Rb[:, 0] < 0:
                x = -x
            Rb = np.column_stack([x, np.cross(Rb[:, 2], x), Rb[:, 2]])
            Rs[i + 1] = Rb
            p_new = from_rotation_matrix(Rb)
            q[i + 1, 3:] = p_new if p_new @ q[i + 1, 3:] >= 0 else -p_new
        q[i + 1, :3] = q[i, :3] + 0.5 * L * (Ra[:, 2] + Rb[:, 2])
    if keep_com:
        q[:, :3] += com - q[:, :3].mean(axis=0)
    return q


def reference_step(q, u, P, active, refs, par, sol, history: list | None = None,
                   scene: tuple | None = None, dP=None):
    """One time step; same arguments and results as the compiled ``_step``
    (but returns new arrays): (q_E, u_E, P, active, dP, iterations, converged).
    ``scene``: (pegs, steps) arrays as the model's ``_pegs``, ``_steps``; P and
    active then hold the obstacle slots after the 2n ground rows. dP (2n, 5):
    the ground contacts' last change of impulses (None: zero); a contact closed
    in the last step and in this one starts from P + EXTRAPOLATION_GAIN dP,
    in each group whose change exceeds u_tol r, when sol says
    ``extrapolate``.

    ``history``, if given, receives every sweep's largest prox-equation residual
    |P - prox(P - r gamma)| / r (velocity units).
    """
    p = _pars(par)
    dt, kind, alpha = float(sol[0]), int(sol[1]), float(sol[2])
    r_fixed = (float(sol[3]), float(sol[4]), float(sol[5]))
    eps, T_rel, T_abs, u_tol = (float(s) for s in sol[6:10])
    max_iter, active_tol = int(sol[10]), float(sol[11])
    keep_com, warm = int(sol[12]) == 1, float(sol[13]) > 0.5
    extrapolate = warm and float(sol[17]) > 0.5
    link_passes = int(sol[14])
    implicit = int(sol[15]) == 1
    q = np.array(q, dtype=float)
    u = np.array(u, dtype=float)
    P = np.array(P, dtype=float)
    active = np.array(active, dtype=bool)
    n = q.shape[0]
    dP = np.zeros((2 * n, 5)) if dP is None else np.array(dP, dtype=float)
    uA = u.reshape(-1)
    # (72) explicit midpoint
    qM = (q.reshape(-1) + 0.5 * dt * _F(q) @ uA).reshape(n, 7)
    qM[:, 3:] /= np.linalg.norm(qM[:, 3:], axis=1, keepdims=True)
    mats = dense_matrices(qM, p)
    Rs = mats["Rs"]
    mdiag = np.tile([p["m"]] * 3 + [p["Theta1"], p["Theta1"], p["Theta3"]], n)
    Minv = np.diag(1.0 / mdiag)
    h = np.zeros(6 * n)
    theta = np.diag([p["Theta1"], p["Theta1"], p["Theta3"]])
    for i in range(n):
        w = u[i, 3:]
        h[6 * i:6 * i + 3] = p["m"] * np.array([p["g_x"], p["g_y"], p["g_z"]])
        h[6 * i + 3:6 * i + 6] = -np.cross(w, theta @ w)
    # the bilateral rows: the joints' (84), with implicit drives also the
    # drives' compliant rows (zero compliance and offset on the joints' rows)
    W_J = mats["W_J"]
    nJ = W_J.shape[1]
    comp = np.zeros(nJ)
    offset = np.zeros(nJ)
    if implicit:
        tau = np.zeros(6 * n)
        W_D, c_D, o_D = reference_drive_rows(Rs, u, refs, p, dt, float(sol[16]))
        W_J = np.hstack([W_J, W_D])
        comp = np.concatenate([comp, c_D])
        offset = np.concatenate([offset, o_D])
    else:
        tau = reference_torques(Rs, u, refs, p)
    if n > 1:
        G_J = W_J.T @ Minv @ W_J + np.diag(comp)
        A = Minv - Minv @ W_J @ np.linalg.solve(G_J, W_J.T @ Minv)
    else:
        A = Minv.copy()
    compliant = p["contact"] > 0.5
    pegs, steps = scene if scene is not None else (np.zeros((0, 4)), np.zeros((0, 4)))
    g_N = mats["g_N"].copy()
    if len(steps):  # the level under each sphere's centre
        for c in range(2 * n):
            i = c % n
            g_N[c] -= _level(steps, qM[i, 0] + (1 if c < n else -1) * p["L_GS"] * Rs[i][0, 2])
    # (49); the compliant law: the spheres at or below the ground
    closed = np.zeros(P.shape[0], dtype=bool)
    closed[:2 * n] = g_N <= (0.0 if compliant else active_tol)
    obstacles = obstacle_contacts(qM, p, pegs, steps)
    for slot, (gap, *_) in obstacles.items():
        closed[slot] = gap <= active_tol
    idx = np.flatnonzero(closed)
    contacts = [int(c) for c in idx]   # the closed contacts as Python ints (dict keys)
    if not warm:
        P[idx] = 0.0
    # ground contacts closed in the last step and in this one: extrapolated
    # below, once their r is known
    ext = closed[:2 * n] & active[:2 * n] & (extrapolate and not compliant)
    before = P[:2 * n].copy()
    active[:] = closed
    # per-contact generalised force directions [w_N, W_T, W_V] (6n, 5) (an
    # obstacle's: normal, two friction directions, no rolling) and friction
    # coefficients (mu_a, mu_b, mu_V), and the link each acts on
    Wc = {}
    mus = {}
    link_of = {}
    for c in contacts:
        if c < 2 * n:
            Wc[c] = np.column_stack([mats["W_N"][:, c], mats["W_T"][:, 2 * c:2 * c + 2],
                                     mats["W_V"][:, 2 * c:2 * c + 2]])
            mus[c] = (p["mu_x"], p["mu_y"], p["mu_V"])
            link_of[c] = c % n
        else:
            _, i, W, mu, _ = obstacles[c]
            Wc[c] = np.zeros((6 * n, 5))
            Wc[c][6 * i:6 * i + 6] = W
            mus[c] = (mu, mu, 0.0)
            link_of[c] = i

    def velocity(Pc):
        # (86) with the bilateral impulses solved directly
        S = sum((Wc[c] @ Pc[c] for c in contacts), np.zeros(6 * n))
        rhs = uA + Minv @ (h * dt + S + tau * dt)
        if n > 1:
            P_J = -np.linalg.solve(G_J, W_J.T @ rhs + offset)
            return rhs + Minv @ W_J @ P_J
        return rhs

    if compliant:  # seeds/001 (17)-(20), see CONTACT_LAWS and _compliant_impulses
        keep = P.copy()
        P[:] = 0.0
        it = 0
        converged = True
        if idx.size:
            W = np.column_stack([Wc[c][:, k] for c in contacts for k in range(3)])
            v0 = velocity(P)
            now = W.T @ uA
            acc = np.empty_like(now)
            acc[0::3] = -p["k_pc"] * g_N[idx] - p["k_vc"] * np.minimum(0.0, now[0::3])
            acc[1::3] = -p["k_vc"] * now[1::3]
            acc[2::3] = -p["k_vc"] * now[2::3]
            G = W.T @ A @ W
            b = now + dt * acc - W.T @ v0
            x = (keep[idx, :3] if warm else np.zeros((idx.size, 3))).reshape(-1)
            converged = False
            while it < max_iter and not converged:
                it += 1
                res = 0.0
                imp_ok = True
                for k in range(idx.size):
                    a = 3 * k
                    rN = 1.0 / G[a, a]
                    new = max(0.0, x[a] - rN * (G[a] @ x - b[a]))
                    res = max(res, abs(new - x[a]) / rN)
                    imp_ok &= abs(new - x[a]) <= abs(x[a]) * T_rel + T_abs
                    x[a] = new
                    rT = 1.0 / max(G[a + 1, a + 1], G[a + 2, a + 2])
                    z = x[a + 1:a + 3] - rT * (G[a + 1:a + 3] @ x - b[a + 1:a + 3])
                    new = prox_ellipse(z, p["mu_x"] * x[a], p["mu_y"] * x[a])
                    res = max(res, float(np.max(np.abs(new - x[a + 1:a + 3]))) / rT)
                    imp_ok &= bool(np.all(np.abs(new - x[a + 1:a + 3])
                                          <= np.abs(x[a + 1:a + 3]) * T_rel + T_abs))
                    x[a + 1:a + 3] = new
                converged = imp_ok or res <= u_tol
            for k, c in enumerate(contacts):
                P[c, :3] = x[3 * k:3 * k + 3]
        uE = velocity(P)
        return _second_half(qM, uE, dt, p["L"], keep_com) + (P, active, dP, it, converged)
    # the contacts' springs (SnakeParams k_N, d_N, v_N): P_N = -gamma gamma_N^E
    # - dt k_N g_M, gamma = dt d_N + dt^2 k_N / 2, the spring's part capped at
    # gamma v_N, P_N >= 0: phi = gamma_N^E + e_N gamma_N^A + c_N P_N
    # + max(k_g g_M, -v_N) in the prox below; the hard law (77) when k_N is infinite
    if np.isfinite(p["k_N"]):
        gamma = dt * p["d_N"] + 0.5 * dt * dt * p["k_N"]
        c_N, k_g = 1.0 / gamma, dt * p["k_N"] / gamma
    else:
        c_N = k_g = 0.0
    gap = {c: (g_N[c] if c < 2 * n else obstacles[c][0]) for c in contacts}
    it = 0
    converged = idx.size == 0
    r = {}
    groups = (slice(0, 1), slice(1, 3), slice(3, 5))
    for c in contacts:
        G = Wc[c].T @ A @ Wc[c]
        d = np.diag(G)
        if kind == 0:
            r[c] = r_fixed
        else:
            r[c] = (alpha / max(d[0] + c_N, 1e-300), alpha / max(d[1], d[2], 1e-300),
                    alpha / max(d[3], d[4], 1e-300))
        if c < 2 * n and ext[c]:
            # the extrapolation, per group where the change exceeds
            # what the solver calls converged (|dP| / r > u_tol)
            for grp, sl in enumerate(groups):
                if np.any(np.abs(dP[c, sl]) > u_tol * r[c][grp]):
                    P[c, sl] += EXTRAPOLATION_GAIN * dP[c, sl]
            P[c, 0] = max(P[c, 0], 0.0)
    uE = velocity(P)
    gA = {c: Wc[c][:, 0] @ uA for c in contacts}

    def prox_group(c, gam, grp, pn):
        rN, rT, rV = r[c]
        mu_a, mu_b, mu_V = mus[c]
        if grp == 0:
            phi = gam[0] + p["e_N"] * gA[c] + c_N * P[c, 0] + max(k_g * gap[c], -p["v_N"])
            return np.array([max(0.0, P[c, 0] - rN * phi)])
        if grp == 1:
            return prox_ellipse(P[c, 1:3] - rT * gam[1:3], mu_a * pn, mu_b * pn)
        return prox_disc(P[c, 3:5] - rV * gam[3:5], mu_V * pn)

    def prox_all(c, gam):
        pn = prox_group(c, gam, 0, 0.0)[0]
        return np.concatenate([[pn], prox_group(c, gam, 1, pn), prox_group(c, gam, 2, pn)])

    while not converged and it < max_iter:
        it += 1
        ok = True
        res = 0.0
        if kind == 2:  # normal, friction, rolling; velocities follow each
            closed_set = set(contacts)
            for link in sorted({link_of[c] for c in contacts}):  # along the chain
                # its spheres on the ground, then its obstacle contacts by slot
                mine = [c for c in (link, link + n) if c in closed_set] + sorted(
                    c for c in contacts if c >= 2 * n and link_of[c] == link)
                for pass_ in range(link_passes):  # a link's contacts, until settled
                    local = 0.0
                    for c in mine:
                        for grp, sl in enumerate(groups):
                            new = prox_group(c, Wc[c].T @ uE, grp, P[c, 0])
                            dP = new - P[c, sl]
                            local = max(local, float(np.max(np.abs(dP))) / r[c][grp])
                            uE = uE + A @ Wc[c][:, sl] @ dP
                            if pass_ == 0:
                                ok &= bool(np.all(np.abs(dP) <= np.abs(P[c, sl]) * T_rel
                                                  + T_abs))
                            P[c, sl] = new
                    if pass_ == 0:
                        res = max(res, local)
                    if local <= u_tol:
                        break
        else:
            new = {c: prox_all(c, Wc[c].T @ uE) for c in contacts}
            dP = np.array([new[c] - P[c] for c in contacts])
            ok = bool(np.all(np.abs(dP) <= np.abs(P[idx]) * T_rel + T_abs))
            rr = np.array([[r[c][0], r[c][1], r[c][1], r[c][2], r[c][2]] for c in contacts])
            res = float(np.max(np.abs(dP) / rr))
            for c in contacts:
                P[c] = new[c]
            uE = velocity(P)
            if kind == 0:  # (93)
                ok = bool((np.linalg.norm(dP[:, 0]) + np.linalg.norm(dP[:, 1:3])
                           + np.linalg.norm(dP[:, 3:5])) < eps)
        if history is not None:
            history.append(res)
        converged = ok or res <= u_tol
    change = np.where(ext[:, None], P[:2 * n] - before, 0.0)
    return _second_half(qM, uE, dt, p["L"], keep_com) + (P, active, change, it, converged)


def _second_half(qM, uE, dt, L, keep_com):
    """(83), the second half step with u_E, then VII-C: (q_E, u_E (n, 6))."""
    n = qM.shape[0]
    qE = (qM.reshape(-1) + 0.5 * dt * _F(qM) @ uE).reshape(n, 7)
    qE[:, 3:] /= np.linalg.norm(qE[:, 3:], axis=1, keepdims=True)
    return _project(qE, L, keep_com), uE.reshape(n, 6)
