"""Prox operators (61), (77)-(79): membership, idempotence, the normal-cone
inclusion they encode, and the ellipse prox against a brute-force minimiser."""

import math

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from aiko.model.prox import (
    _prox_ellipse_t,
    _prox_ellipse_warm,
    ellipse_newton_iterations,
    prox_disc,
    prox_ellipse,
    prox_normal,
)

coord = st.floats(-1e3, 1e3, allow_nan=False)
axis = st.floats(0.0, 1e2, allow_nan=False)
pos_axis = st.floats(1e-6, 1e2, allow_nan=False)


def in_ellipse(x, a, b, tol=1e-9):
    if a == 0 and b == 0:
        return abs(x[0]) <= tol and abs(x[1]) <= tol
    if a == 0:
        return abs(x[0]) <= tol and abs(x[1]) <= b * (1 + tol) + tol
    if b == 0:
        return abs(x[1]) <= tol and abs(x[0]) <= a * (1 + tol) + tol
    return (x[0] / a) ** 2 + (x[1] / b) ** 2 <= 1 + 1e-9


@given(st.lists(coord, min_size=1, max_size=8))
def test_prox_normal_is_projection_on_R_plus(xs):
    x = np.array(xs)
    p = prox_normal(x)
    assert np.all(p >= 0)
    np.testing.assert_array_equal(prox_normal(p), p)
    # -(x - p) in N_{R+}(p): x - p <= 0 and (x - p) p == 0
    assert np.all(x - p <= 0)
    assert np.all((x - p) * p == 0)


@given(coord, coord, axis, axis)
@example(1.0, 1.0721852027627741e-104, 23.5, 1.0721852027627741e-104)  # Newton to round-off
@example(0.0, 192.0, 1.1415631065163943e-186, 2.2250738585e-313)  # a subnormal axis
def test_prox_ellipse_membership_and_idempotence(zx, zy, a, b):
    p = prox_ellipse([zx, zy], a, b)
    assert in_ellipse(p, a, b)
    q = prox_ellipse(p, a, b)
    np.testing.assert_allclose(q, p, rtol=1e-9, atol=1e-9 * (1 + a + b))


@given(coord, coord, pos_axis, pos_axis, st.floats(0, 2 * math.pi), st.floats(0, 1))
def test_prox_ellipse_variational_inequality(zx, zy, a, b, phi, rho):
    """(z - p) . (y - p) <= 0 for every y of the set: z - p in N_C(p)."""
    z = np.array([zx, zy])
    p = prox_ellipse(z, a, b)
    y = rho * np.array([a * math.cos(phi), b * math.sin(phi)])
    scale = (np.linalg.norm(z) + a + b) ** 2
    assert (z - p) @ (y - p) <= 1e-9 * scale


@given(coord, coord, pos_axis, pos_axis)
def test_prox_ellipse_outside_lands_on_boundary_along_normal(zx, zy, a, b):
    z = np.array([zx, zy])
    assume((zx / a) ** 2 + (zy / b) ** 2 > 1 + 1e-6)
    p = prox_ellipse(z, a, b)
    assert abs((p[0] / a) ** 2 + (p[1] / b) ** 2 - 1) < 1e-8
    # z - p is parallel to the outward normal (p_x / a^2, p_y / b^2)
    nrm = np.array([p[0] / a**2, p[1] / b**2])
    d = z - p
    cross = d[0] * nrm[1] - d[1] * nrm[0]
    # p is exact to a few ulps of z's size: that floor (an absolute error of
    # d's components) bounds the cross product too when d is tiny
    floor = 4 * np.finfo(float).eps * np.linalg.norm(z) * np.linalg.norm(nrm)
    assert abs(cross) <= 1e-7 * np.linalg.norm(d) * np.linalg.norm(nrm) + floor + 1e-12
    assert d @ nrm >= -1e-12


@settings(max_examples=40, deadline=None)
@given(st.floats(-10, 10), st.floats(-10, 10), st.floats(0.05, 5), st.floats(0.05, 5))
def test_prox_ellipse_matches_brute_force(zx, zy, a, b):
    """The exact prox is the nearest of many boundary samples (or z itself)."""
    z = np.array([zx, zy])
    p = prox_ellipse(z, a, b)
    phi = np.linspace(0, 2 * np.pi, 20001)
    pts = np.column_stack([a * np.cos(phi), b * np.sin(phi)])
    best = np.min(np.linalg.norm(pts - z, axis=1))
    if (zx / a) ** 2 + (zy / b) ** 2 <= 1:
        np.testing.assert_array_equal(p, z)
    else:
        assert np.linalg.norm(p - z) <= best + 1e-9
        assert np.linalg.norm(p - z) >= best - 2e-3 * (a + b)


@given(coord, coord, st.just(0.0) | st.floats(1e-9, 1e2))
def test_prox_disc(zx, zy, r):
    z = np.array([zx, zy])
    p = prox_disc(z, r)
    assert np.linalg.norm(p) <= r * (1 + 1e-12) + 1e-300
    np.testing.assert_allclose(prox_disc(p, r), p, rtol=1e-12, atol=1e-300)
    if np.linalg.norm(z) > r and r > 0:
        # nearest point is on the ray through z
        np.testing.assert_allclose(p, z * r / np.linalg.norm(z), rtol=1e-12, atol=1e-15 * r)


def test_degenerate_ellipses_are_segments_or_the_origin():
    np.testing.assert_array_equal(prox_ellipse([3.0, 4.0], 0.0, 0.0), [0.0, 0.0])
    np.testing.assert_array_equal(prox_ellipse([3.0, 4.0], 0.0, 1.0), [0.0, 1.0])
    np.testing.assert_array_equal(prox_ellipse([3.0, -4.0], 2.0, 0.0), [2.0, 0.0])


def test_newton_converges_fast_even_for_flat_ellipses():
    assert ellipse_newton_iterations([10.0, 10.0], 1.0, 1e-4) < 60
    assert ellipse_newton_iterations([1e3, -1e-3], 0.1, 0.5) < 60


@given(coord, coord, pos_axis, pos_axis, st.just(0.0) | st.floats(0.0, 1e6))
def test_warm_started_ellipse_prox_finds_the_cold_point(zx, zy, a, b, guess):
    """Any start t >= 0 (below, at or beyond the root) ends at the cold start's
    point: the time-stepping starts each contact's prox from its last
    multiplier."""
    cold = prox_ellipse([zx, zy], a, b)
    x, y, t = _prox_ellipse_warm(zx, zy, a, b, guess)
    scale = max(a, b, abs(zx), abs(zy), 1e-300)
    assert abs(x - cold[0]) <= 1e-12 * scale and abs(y - cold[1]) <= 1e-12 * scale
    assert t >= 0.0


def test_warm_start_from_a_nearby_point_takes_few_newton_steps():
    """The multiplier of a sliding contact's last pass starts the next root's
    Newton iteration about four steps from its end (the seeded sample: 3.9),
    against five from the lower bound (5.2)."""
    rng = np.random.default_rng(3)
    a, b = 0.2, 1.0  # the orthotropic preset's mu_x / mu_y, scaled
    cold, warm = [], []
    for _ in range(200):
        phi = rng.uniform(0, 2 * math.pi)
        z = np.array([a * math.cos(phi), b * math.sin(phi)]) * rng.uniform(1.05, 2.0)
        t_last, _ = _prox_ellipse_t(z[0], z[1], a, b)
        z2 = z * (1 + rng.normal(0, 1e-3, 2))
        cold.append(_prox_ellipse_t(z2[0], z2[1], a, b)[1])
        warm.append(_prox_ellipse_t(z2[0], z2[1], a, b, t_last)[1])
        np.testing.assert_allclose(_prox_ellipse_t(z2[0], z2[1], a, b, t_last)[0],
                                   _prox_ellipse_t(z2[0], z2[1], a, b)[0], rtol=1e-12)
    assert np.mean(warm) <= 4.1 and np.mean(cold) >= 5.0


def test_bad_input_is_rejected():
    with pytest.raises(ValueError):
        prox_ellipse([1.0, 2.0], -1.0, 1.0)
    with pytest.raises(ValueError):
        prox_ellipse([np.nan, 2.0], 1.0, 1.0)
    with pytest.raises(ValueError):
        prox_disc([1.0], 1.0)
