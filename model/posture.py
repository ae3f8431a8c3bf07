"""Start postures: straight, or curved from given joint angles.

The snake lies along the x axis with link 1 at the +x end (the head: with
delta_h < 0 the body wave of (70) runs from link 1 to link n, head to tail). Every
link's body z axis points toward link i + 1, so a straight snake has
e_z^B = -e_x, e_y^B = e_z (the horizontal joint axis vertical) and e_x^B = -e_y.
"""

from __future__ import annotations

import numpy as np

from .errors import StateError
from .params import SnakeParams
from .quaternion import from_rotation_matrix, rotation_matrix

__all__ = ["straight_posture", "posture_from_joint_angles", "STRAIGHT_R", "posture_along",
           "joint_points_on_polyline", "joint_points_on_arc", "planar_joint_angles"]

# R^I_B of a straight link lying flat, body z toward -x (link i + 1)
STRAIGHT_R = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def _rot_y(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rot_x(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def posture_from_joint_angles(params: SnakeParams, alpha_h, alpha_v,
                              height: float = 0.0, align: bool = True) -> np.ndarray:
    """Coordinates q (n, 7) of a snake with the given joint angles (rad).

    alpha_h, alpha_v: (n-1,) joint angles as in (65)-(66), R^{B_i}_{B_i+1} =
    R_y(alpha_h) R_x(alpha_v). Link 1 starts along -x; with ``align`` the whole
    snake is then turned about the vertical so that its centre line (the
    least-squares line through the links' centres of gravity) lies along x with
    link 1 toward +x, and the centre of mass is put on the z axis. The lowest
    sphere point is ``height`` above the ground.
    """
    n = params.n
    alpha_h = np.asarray(alpha_h, dtype=float).reshape(-1)
    alpha_v = np.asarray(alpha_v, dtype=float).reshape(-1)
    if alpha_h.shape != (n - 1,) or alpha_v.shape != (n - 1,):
        raise StateError("joint angles", f"expected {n - 1} angles per axis for {n} links, "
                         f"got {alpha_h.size} and {alpha_v.size}")
    if not (np.all(np.isfinite(alpha_h)) and np.all(np.isfinite(alpha_v))):
        raise StateError("joint angles", "non-finite values")
    if not (np.isfinite(height) and height >= 0.0):
        raise StateError("height", f"must be a finite number >= 0, got {height}")
    Rs = [STRAIGHT_R.copy()]
    for i in range(n - 1):
        Rs.append(Rs[-1] @ _rot_y(alpha_h[i]) @ _rot_x(alpha_v[i]))
    r = np.zeros((n, 3))
    for i in range(n - 1):
        r[i + 1] = r[i] + 0.5 * params.L * (Rs[i][:, 2] + Rs[i + 1][:, 2])
    if align and n > 1:
        xy = r[:, :2] - r[:, :2].mean(axis=0)
        _, vecs = np.linalg.eigh(xy.T @ xy)
        d = vecs[:, -1]  # principal axis
        if d @ (xy[0] - xy[-1]) < 0:
            d = -d
        heading = np.arctan2(d[1], d[0])
        Rz = _rot_z(-heading)
        r = r @ Rz.T
        Rs = [Rz @ R for R in Rs]
    r[:, :2] -= r[:, :2].mean(axis=0)
    # lowest point of every end sphere
    lows = [r[i, 2] + s * params.L_GS * Rs[i][2, 2] - params.L_SC
            for i in range(n) for s in (1.0, -1.0)]
    r[:, 2] += height - min(lows)
    q = np.empty((n, 7))
    q[:, :3] = r
    for i, R in enumerate(Rs):
        q[i, 3:] = from_rotation_matrix(R)
    return q


def straight_posture(params: SnakeParams, height: float = 0.0) -> np.ndarray:
    """Coordinates q (n, 7) of the straight snake along x, link 1 at +x."""
    zeros = np.zeros(params.n - 1)
    return posture_from_joint_angles(params, zeros, zeros, height, align=False)



# --------------------------------------------------------------------------
# the snake laid along a planar curve
def planar_joint_angles(points) -> np.ndarray:
    """Horizontal joint angles alpha_h (n-1,) rad of the chain whose joint
    points (n + 1, 2) run from the head's front end to the tail's end: the
    turn from each link's direction to the next's about the vertical, as
    R_y(alpha_h) of (65) turns it (counterclockwise seen from above)."""
    P = np.asarray(points, dtype=float)[:, :2]
    d = np.diff(P, axis=0)
    cross = d[:-1, 0] * d[1:, 1] - d[:-1, 1] * d[1:, 0]
    dot = np.sum(d[:-1] * d[1:], axis=1)
    return np.arctan2(cross, dot)


def posture_along(params: SnakeParams, points) -> np.ndarray:
    """Coordinates q (n, 7) of the snake resting flat on the ground with its
    joints on the points (n + 1, 2): point 0 the head's front end, point k the
    joint of links k and k + 1, point n the tail's end, consecutive points
    ``params.L`` apart (see :func:`joint_points_on_polyline`,
    :func:`joint_points_on_arc`)."""
    P = np.asarray(points, dtype=float)
    if P.shape != (params.n + 1, 2):
        raise StateError("curve points", f"expected ({params.n + 1}, 2), got {P.shape}")
    chords = np.hypot(*np.diff(P, axis=0).T)
    if not np.allclose(chords, params.L, rtol=0.0, atol=1e-9):
        raise StateError("curve points", f"consecutive points must be L = {params.L} m "
                         f"apart, found {chords.min():.6f} to {chords.max():.6f} m")
    ah = planar_joint_angles(P)
    q = posture_from_joint_angles(params, ah, np.zeros(params.n - 1), align=False)
    # link 1 lies along -x from the origin: turn and shift it onto the curve
    d0 = (P[1] - P[0]) / params.L
    Rz = _rot_z(float(np.arctan2(d0[1], d0[0])) - np.pi)
    q_r = q[:, :3] @ Rz.T
    shift = 0.5 * (P[0] + P[1]) - q_r[0, :2]
    q[:, :2] = q_r[:, :2] + shift
    q[:, 2] = q_r[:, 2]
    for i in range(params.n):
        q[i, 3:] = from_rotation_matrix(Rz @ rotation_matrix(q[i, 3:]))
    return q


def joint_points_on_polyline(polyline, L: float, n: int) -> np.ndarray:
    """n + 1 points on the polyline (k, 2), the first at its first vertex,
    each the first point of the polyline further on at distance L from the
    one before (every point on the polyline, every chord L). StateError if the
    polyline ends first."""
    W = np.asarray(polyline, dtype=float)
    pts = [W[0]]
    seg, t = 0, 0.0                   # position: W[seg] + t (W[seg+1] - W[seg])
    for _ in range(n):
        c = pts[-1]
        found = False
        while seg < len(W) - 1:
            a, b = W[seg], W[seg + 1]
            d = b - a
            # |a + s d - c| = L, s in [t, 1]: the larger root is the one further on
            A = d @ d
            B = 2.0 * d @ (a - c)
            C = (a - c) @ (a - c) - L * L
            disc = B * B - 4.0 * A * C
            if A > 0.0 and disc >= 0.0:
                s = (-B + np.sqrt(disc)) / (2.0 * A)
                if t - 1e-12 <= s <= 1.0:
                    pts.append(a + s * d)
                    t = s
                    found = True
                    break
            seg, t = seg + 1, 0.0
        if not found:
            raise StateError("curve", f"the polyline ends before the snake does: it holds "
                             f"{len(pts) - 1} of {n} links of {L} m")
    return np.array(pts)


def joint_points_on_arc(center, radius: float, start_deg: float, ccw: bool, L: float,
                        n: int) -> np.ndarray:
    """n + 1 points on the circle (center (2,), radius m), the first at angle
    start_deg from +x, the body running counterclockwise (``ccw``) or
    clockwise from the head, chords L."""
    if not radius > L / 2.0:
        raise StateError("arc", f"radius {radius} m is too small for links of {L} m")
    step = 2.0 * np.arcsin(L / (2.0 * radius)) * (1.0 if ccw else -1.0)
    if abs(step) * n >= 2.0 * np.pi:
        raise StateError("arc", f"a circle of radius {radius} m is too short for the snake "
                         f"({n} links of {L} m): it would overlap itself")
    a = np.radians(start_deg) + step * np.arange(n + 1)
    c = np.asarray(center, dtype=float)
    return np.column_stack([c[0] + radius * np.cos(a), c[1] + radius * np.sin(a)])
