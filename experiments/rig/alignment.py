"""Start alignment: the model starts from the posture and place the robot has.

Pure. The posture comes from the joint angles the modules report (the first
STATE replies of the gait) or, without them, from the gait's own start; the
place from motion capture: with two or more links seen, the posture is turned
about the vertical and moved to fit them in the least-squares sense (2D
Kabsch); with one, it is moved onto it and keeps the gait's heading (centre
line along x, link 1 toward +x); with none, it stays centred at the origin.
"""

from __future__ import annotations

import numpy as np

from aiko.model import SnakeParams
from aiko.model.posture import posture_from_joint_angles
from aiko.model.quaternion import about_axis, multiply

__all__ = ["start_posture", "fit_plane_transform"]


def fit_plane_transform(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray]:
    """Rotation angle about z (rad) and translation (2,) that best map the
    points src (k, 2) onto dst (k, 2), k >= 2 (least squares)."""
    cs, cd = src.mean(axis=0), dst.mean(axis=0)
    a, b = src - cs, dst - cd
    # maximise sum of b . R a over the angle: atan2(cross, dot)
    angle = float(np.arctan2(np.sum(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]),
                             np.sum(a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1])))
    c, s = np.cos(angle), np.sin(angle)
    R = np.array([[c, -s], [s, c]])
    return angle, cd - R @ cs


def start_posture(params: SnakeParams, alpha_h, alpha_v,
                  markers: dict[int, tuple[float, float, float]] | None = None) -> np.ndarray:
    """Coordinates q (n, 7) for the model's start: the posture of the joint
    angles (n-1,) each (rad), resting on the ground, placed on the links seen
    by motion capture (``markers``: link number 1..n -> (x, y, z) m)."""
    q = posture_from_joint_angles(params, alpha_h, alpha_v)
    seen = {i: p for i, p in (markers or {}).items() if 1 <= i <= params.n
            and np.all(np.isfinite(p))}
    if not seen:
        return q
    idx = sorted(seen)
    src = q[[i - 1 for i in idx], :2]
    dst = np.array([seen[i][:2] for i in idx], dtype=float)
    if len(idx) == 1:
        q[:, :2] += dst[0] - src[0]
        return q
    angle, shift = fit_plane_transform(src, dst)
    c, s = np.cos(angle), np.sin(angle)
    R = np.array([[c, -s], [s, c]])
    q[:, :2] = q[:, :2] @ R.T + shift
    turn = about_axis(np.array([0.0, 0.0, 1.0]), angle)
    for i in range(params.n):
        qi = multiply(turn, q[i, 3:])
        q[i, 3:] = qi / np.linalg.norm(qi)
    return q
