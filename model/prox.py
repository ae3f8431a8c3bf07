"""Proximal points of the admissible force sets, section V-B4 (61).

``prox_C(x)`` is the point of the closed convex set C nearest to x (Euclidean).
With it each force law ``-gamma in N_C(lambda)`` becomes the equality
``lambda = prox_C(lambda - r gamma)``, r > 0 (61), (77)-(79).

* C_N = R+ (53): unilateral normal contact.
* C_T, the ellipse (58) with semi-axes a = mu_x lambda_N, b = mu_y lambda_N:
  anisotropic Coulomb friction. Its Euclidean prox is not closed-form: the point
  is a^2 z_x / (a^2 + t), b^2 z_y / (b^2 + t) with the multiplier t >= 0 the root of
  F(t) = (a z_x / (a^2 + t))^2 + (b z_y / (b^2 + t))^2 - 1. F is convex and
  decreasing on t >= t0 = max(0, a|z_x| - a^2, b|z_y| - b^2) with F(t0) >= 0, so
  Newton's method from t0 converges monotonically; solved to round-off. The
  time-stepping starts it from the multiplier of the contact's last prox
  (``_prox_ellipse_warm``): in a sliding contact's later passes the point moves
  little, and about four steps reach the root instead of five.
* C_V, the disc (60) of radius mu_V lambda_N: isotropic rolling friction.

The ``_``-prefixed functions are the compiled kernels used by the time-stepping;
the public functions check and vectorise them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["prox_normal", "prox_ellipse", "prox_disc", "ellipse_newton_iterations"]

_ELLIPSE_MAX_ITER = 60


@njit(cache=True, error_model="numpy")
def _prox_ellipse_t(zx, zy, a, b, t=0.0):
    """Multiplier t and Newton iterations of the ellipse prox (z outside),
    started from the guess t (any t >= 0; 0: from the lower bound t0).

    A guess above t0 where F >= 0 is itself a lower bound; one where F < 0 lies
    beyond the root, and since F is convex one Newton step from it lands at or
    below the root (kept >= t0): either way the iteration then rises
    monotonically to the root."""
    a2 = a * a
    b2 = b * b
    t0 = max(0.0, a * abs(zx) - a2, b * abs(zy) - b2)
    it = 0
    if t > t0:
        fx = a * zx / (a2 + t)
        fy = b * zy / (b2 + t)
        F = fx * fx + fy * fy - 1.0
        if F < 0.0:
            dF = -2.0 * (fx * fx / (a2 + t) + fy * fy / (b2 + t))
            it = 1
            t = max(t0, t - F / dF)
    else:
        t = t0
    while it < _ELLIPSE_MAX_ITER:
        it += 1
        fx = a * zx / (a2 + t)
        fy = b * zy / (b2 + t)
        F = fx * fx + fy * fy - 1.0
        dF = -2.0 * (fx * fx / (a2 + t) + fy * fy / (b2 + t))
        if F <= 0.0 or dF == 0.0:
            break
        step = -F / dF
        t_new = t + step
        if t_new <= t:  # no progress left in floating point
            break
        t = t_new
        if step <= 1e-15 * t:
            break
    return t, it


@njit(cache=True, error_model="numpy")
def _prox_ellipse(zx, zy, a, b):
    """Nearest point of {x^2/a^2 + y^2/b^2 <= 1} to (zx, zy); a, b >= 0.

    Solved in coordinates scaled by max(a, b) so that no square underflows; an
    axis below 1e-150 of the other or below 1e-290 is taken as zero (a
    segment), and an ellipse smaller than 1e-290 as the origin (the answer is
    off by less than that; a smaller axis would put the point's coordinate in
    the subnormal numbers, whose few digits can leave it outside by 1e-9).
    """
    x, y, _ = _prox_ellipse_warm(zx, zy, a, b, 0.0)
    return x, y


@njit(cache=True, error_model="numpy")
def _prox_ellipse_warm(zx, zy, a, b, t):
    """:func:`_prox_ellipse` with the multiplier's Newton iteration started
    from t (in the coordinates scaled by max(a, b); any t >= 0, e.g. the one
    this returned for a nearby point). Returns (x, y, t of this point, or the
    guess unchanged when no root was solved for)."""
    s = max(a, b)
    if s <= 1e-290:
        return 0.0, 0.0, t
    if a == b:  # isotropic friction: the disc, in closed form
        x, y = _prox_disc(zx, zy, a)
        return x, y, t
    a1 = a / s
    b1 = b / s
    x = zx / s
    y = zy / s
    if a1 < 1e-150 or a <= 1e-290:  # degenerate: segment on the y axis
        return 0.0, s * min(b1, max(-b1, y)), t
    if b1 < 1e-150 or b <= 1e-290:
        return s * min(a1, max(-a1, x)), 0.0, t
    if (x / a1) ** 2 + (y / b1) ** 2 <= 1.0:
        return zx, zy, t
    t, _ = _prox_ellipse_t(x, y, a1, b1, t)
    a2 = a1 * a1
    b2 = b1 * b1
    # the ratios first: b2 * y underflows to a subnormal (7 digits) for a
    # flat enough ellipse, and the point would leave the ellipse by 1e-9
    return s * x * (a2 / (a2 + t)), s * y * (b2 / (b2 + t)), t


@njit(cache=True, error_model="numpy")
def _prox_disc(zx, zy, radius):
    """Nearest point of the disc of the given radius (>= 0) to (zx, zy)."""
    if radius <= 0.0:
        return 0.0, 0.0
    s2 = zx * zx + zy * zy
    # the squares neither underflow nor overflow: sqrt; else the slower hypot
    nz = math.sqrt(s2) if 1e-280 < s2 < 1e280 else math.hypot(zx, zy)
    if nz <= radius:
        return zx, zy
    s = radius / nz
    return zx * s, zy * s


def prox_normal(x):
    """prox onto C_N = R+ (53), (77): max(x, 0), elementwise."""
    return np.maximum(np.asarray(x, dtype=float), 0.0)


def _check_point(z) -> tuple[float, float]:
    z = np.asarray(z, dtype=float)
    if z.shape != (2,) or not np.all(np.isfinite(z)):
        raise ValueError(f"expected a finite point of shape (2,), got {z!r}")
    return float(z[0]), float(z[1])


def prox_ellipse(z, a: float, b: float) -> np.ndarray:
    """prox onto the friction ellipse (58) with semi-axes a, b >= 0, (78).

    z: (2,) point. Returns the nearest point of the ellipse (2,).
    """
    if not (a >= 0 and b >= 0 and math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"semi-axes must be finite and >= 0, got a={a}, b={b}")
    return np.array(_prox_ellipse(*_check_point(z), float(a), float(b)))


def ellipse_newton_iterations(z, a: float, b: float) -> int:
    """Newton iterations the ellipse prox needs for a point z outside (diagnostics)."""
    zx, zy = _check_point(z)
    s = max(a, b)
    return int(_prox_ellipse_t(zx / s, zy / s, a / s, b / s)[1])


def prox_disc(z, radius: float) -> np.ndarray:
    """prox onto the rolling-friction disc (60) of the given radius >= 0, (79)."""
    if not (radius >= 0 and math.isfinite(radius)):
        raise ValueError(f"radius must be finite and >= 0, got {radius}")
    return np.array(_prox_disc(*_check_point(z), float(radius)))
