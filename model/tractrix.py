"""The tractrix: a chain dragged by its head (Sreenivasan, Goel and Ghosal,
"A real-time algorithm for simulation of flexible objects and hyper-redundant
manipulators", seeds/003, sections 2-4).

A link whose head moves along a straight line while its tail's velocity stays
along the link has its tail on a tractrix, in closed form (3):
x(p) = p - L tanh(p/L), y(p) = L sech(p/L). TRACTRIX3D (section 3.1, (13)-(14))
solves it in the plane of the head's path and the link; RESOLUTION-TRACTRIX
(section 4.1) applies it link by link from the head to the tail, each tail
the next link's head: O(n), every length kept, and the displacements shrink
from head to tail ((7): |dr| <= |dp| for every link).

The chain is given by its joint points (n + 1, 3): point 0 the head's front
end, point k the joint between links k and k + 1, point n the tail's end.
Pure functions; no state.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["tractrix_tail", "resolve_tractrix", "drag_along", "chain_points",
           "resample_polyline"]


def tractrix_tail(head, target, tail) -> np.ndarray:
    """TRACTRIX3D: the tail's new position (3,) when the head of a link moves
    in a straight line from ``head`` to ``target`` (all (3,) m); the link's
    length |tail - head| is kept. A link lying along the head's path moves
    rigidly along it."""
    hx, hy, hz = head
    S = (target[0] - hx, target[1] - hy, target[2] - hz)
    T = (tail[0] - hx, tail[1] - hy, tail[2] - hz)
    s = math.hypot(*S)
    L = math.hypot(*T)
    if s == 0.0:
        return np.array(tail, dtype=float)
    # step 3: X_r along S (a subnormal S scaled up by a power of two first,
    # exactly, so that X is a unit vector to rounding)
    k = 2.0 ** 600 if s < 1e-150 else 1.0
    sk = math.hypot(S[0] * k, S[1] * k, S[2] * k)
    X = (S[0] * k / sk, S[1] * k / sk, S[2] * k / sk)
    x0 = X[0] * T[0] + X[1] * T[1] + X[2] * T[2]
    # step 4-5: Y_r = Z_r x X_r is T's component normal to S, normalised
    ny = (T[0] - x0 * X[0], T[1] - x0 * X[1], T[2] - x0 * X[2])
    y0 = math.hypot(*ny)
    if y0 <= 1e-12 * L:          # along the path: the tractrix degenerates to a translation
        return np.array((tail[0] + S[0], tail[1] + S[1], tail[2] + S[2]))
    Y = (ny[0] / y0, ny[1] / y0, ny[2] / y0)
    # step 6: the tractrix parameter of the tail now, (3) with the head at the origin:
    # tail - head = (-L tanh(p/L), L sech(p/L)); p > 0 where the tail trails the head
    r = min(y0 / L, 1.0)
    p0 = L * math.acosh(1.0 / r)
    if x0 > 0.0:
        p0 = -p0
    p1 = p0 + s                                                # the head moved by s
    # step 7-8, (13)-(14): relative to the new head, written in the global frame
    xr = -L * math.tanh(p1 / L)
    yr = L / math.cosh(p1 / L)
    return np.array((target[0] + xr * X[0] + yr * Y[0], target[1] + xr * X[1] + yr * Y[1],
                     target[2] + xr * X[2] + yr * Y[2]))


def resolve_tractrix(points: np.ndarray, target) -> np.ndarray:
    """RESOLUTION-TRACTRIX: the chain's joint points (n + 1, 3) after its head
    (point 0) moves straight to ``target`` (3,): each following point on the
    tractrix of its link, head to tail. O(n); every segment length kept to
    rounding."""
    P = np.asarray(points, dtype=float)
    if P.ndim != 2 or P.shape[1] != 3 or P.shape[0] < 2:
        raise ValueError(f"points must be (n + 1, 3) with n >= 1, got {P.shape}")
    out = np.empty_like(P)
    out[0] = target
    for k in range(1, P.shape[0]):
        out[k] = tractrix_tail(P[k - 1], out[k - 1], P[k])
    return out


def resample_polyline(path, step: float) -> np.ndarray:
    """Points (m, d) along a polyline (k, d) every ``step`` m of arc length,
    both ends included."""
    w = np.asarray(path, dtype=float)
    seg = np.hypot.reduce(np.diff(w, axis=0), axis=1) if w.shape[1] else np.zeros(0)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    if s[-1] == 0.0:
        raise ValueError("the path has no length")
    m = max(1, int(math.ceil(s[-1] / step)))
    si = np.linspace(0.0, s[-1], m + 1)
    return np.stack([np.interp(si, s, w[:, j]) for j in range(w.shape[1])], axis=1)


def drag_along(points: np.ndarray, path, step: float = 0.01) -> np.ndarray:
    """The chain (n + 1, 3) with its head dragged along ``path`` ((k, 2) or
    (k, 3) m; z = the head's own height where 2D) in straight moves of at
    most ``step`` m: postures (m + 1, n + 1, 3), the first the given one.
    The head's first move goes to the path's first point."""
    P = np.asarray(points, dtype=float)
    w = np.asarray(path, dtype=float)
    if w.ndim != 2 or w.shape[1] not in (2, 3) or w.shape[0] < 1:
        raise ValueError(f"path must be (k, 2) or (k, 3), got {w.shape}")
    if w.shape[1] == 2:
        w = np.column_stack([w, np.full(len(w), P[0, 2])])
    w = np.vstack([P[:1], w])
    if not step > 0:
        raise ValueError("step must be > 0")
    targets = resample_polyline(w, step)[1:]
    out = np.empty((len(targets) + 1,) + P.shape)
    out[0] = P
    for i, t in enumerate(targets):
        out[i + 1] = resolve_tractrix(out[i], t)
    return out


def chain_points(centres: np.ndarray, axes: np.ndarray, lengths) -> np.ndarray:
    """Joint points (n + 1, 3) of links with centres (n, 3), unit axes (n, 3)
    pointing from each link toward the next and lengths (n,): the head's front
    end, the joints (midway between the two links' ends), the tail's end."""
    c = np.asarray(centres, dtype=float)
    a = np.asarray(axes, dtype=float)
    half = 0.5 * np.asarray(lengths, dtype=float)[:, None]
    front, back = c - half * a, c + half * a
    return np.vstack([front[:1], 0.5 * (back[:-1] + front[1:]), back[-1:]])
