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
from .quaternion import from_rotation_matrix

__all__ = ["straight_posture", "posture_from_joint_angles", "STRAIGHT_R"]

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

