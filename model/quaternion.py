"""Euler parameters (unit quaternions) and rotation matrices, (6)-(8).

Plain numpy, for set-up and analysis; the compiled twin of :func:`rotation_matrix`
is ``aiko.model._kernels.rotation``. A quaternion is ``p = [e0, e1, e2, e3]`` with
``e0`` the scalar part; the rotation it encodes maps body to ground coordinates,
``r_I = R^I_B r_B``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["skew", "H", "H_bar", "rotation_matrix", "from_rotation_matrix",
           "multiply", "about_axis"]


def skew(e) -> np.ndarray:
    """The skew-symmetric matrix of a 3-vector (7): skew(a) @ b == cross(a, b)."""
    e = np.asarray(e, dtype=float)
    return np.array([[0.0, -e[2], e[1]], [e[2], 0.0, -e[0]], [-e[1], e[0], 0.0]])


def H(p) -> np.ndarray:
    """H = [-e, skew(e) + e0 I] (3, 4), (6)."""
    p = np.asarray(p, dtype=float)
    return np.hstack([-p[1:, None], skew(p[1:]) + p[0] * np.eye(3)])


def H_bar(p) -> np.ndarray:
    """Hbar = [-e, -skew(e) + e0 I] (3, 4), (6); pdot = 1/2 Hbar^T omega_B (74)."""
    p = np.asarray(p, dtype=float)
    return np.hstack([-p[1:, None], -skew(p[1:]) + p[0] * np.eye(3)])


def rotation_matrix(p) -> np.ndarray:
    """R^I_B = H Hbar^T (3, 3) of a unit quaternion p (4,), (6)."""
    return H(p) @ H_bar(p).T


def multiply(a, b) -> np.ndarray:
    """Quaternion product a (x) b; rotation_matrix(a (x) b) = R(a) R(b)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.concatenate([[a[0] * b[0] - a[1:] @ b[1:]],
                           a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:])])


def about_axis(axis, angle: float) -> np.ndarray:
    """Unit quaternion of a rotation by angle (rad) about a unit axis."""
    axis = np.asarray(axis, dtype=float)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def from_rotation_matrix(R) -> np.ndarray:
    """Unit quaternion (e0 >= 0) of a rotation matrix (Shepperd's method)."""
    R = np.asarray(R, dtype=float)
    tr = np.trace(R)
    cands = np.array([tr, R[0, 0], R[1, 1], R[2, 2]])
    k = int(np.argmax(cands))
    if k == 0:
        s = 2.0 * np.sqrt(1.0 + tr)
        p = np.array([s / 4, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s,
                      (R[1, 0] - R[0, 1]) / s])
    elif k == 1:
        s = 2.0 * np.sqrt(1.0 + 2 * R[0, 0] - tr)
        p = np.array([(R[2, 1] - R[1, 2]) / s, s / 4, (R[0, 1] + R[1, 0]) / s,
                      (R[0, 2] + R[2, 0]) / s])
    elif k == 2:
        s = 2.0 * np.sqrt(1.0 + 2 * R[1, 1] - tr)
        p = np.array([(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, s / 4,
                      (R[1, 2] + R[2, 1]) / s])
    else:
        s = 2.0 * np.sqrt(1.0 + 2 * R[2, 2] - tr)
        p = np.array([(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s,
                      (R[1, 2] + R[2, 1]) / s, s / 4])
    p /= np.linalg.norm(p)
    return p if p[0] >= 0 else -p
