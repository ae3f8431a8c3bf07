"""The tractrix of seeds/003: TRACTRIX3D against the tractrix's differential
equation, RESOLUTION-TRACTRIX's properties (lengths, the head's target,
displacements that die out toward the tail, O(n)), and `aiko preview`."""

import math
import time

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiko.model.tractrix import chain_points, drag_along, resolve_tractrix, tractrix_tail
from tests.conftest import aiko

finite = st.floats(-1.0, 1.0)


def random_chain(seed, n, L=0.122):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    d[:, 2] *= 0.2
    d /= np.linalg.norm(d, axis=1)[:, None]
    return np.vstack([np.zeros(3), -np.cumsum(L * d, axis=0)])


def test_tractrix_tail_solves_the_tractrix_equation():
    """The tail's velocity stays along the link (1): integrate that law in
    small steps while the head moves in a straight line, in 3D."""
    head, tail = np.array([0.1, -0.2, 0.05]), np.array([0.02, 0.1, 0.0])
    target = np.array([0.6, 0.25, 0.15])
    L = np.linalg.norm(tail - head)

    def integrate(n):
        h, t = head.copy(), tail.copy()
        dp = (target - head) / n
        for _ in range(n):
            h += dp
            e = (h - t) / np.linalg.norm(h - t)
            t += e * (e @ dp)          # the component of the head's step along the link
        return t

    closed = tractrix_tail(head, target, tail)
    assert np.linalg.norm(closed - target) == pytest.approx(L, abs=1e-15)
    # explicit steps converge to the closed form at first order
    e1 = np.linalg.norm(closed - integrate(20000))
    e2 = np.linalg.norm(closed - integrate(200000))
    assert e2 < 5e-6 and 8.0 < e1 / e2 < 12.0, (e1, e2)


def test_a_link_along_the_path_translates_and_a_still_head_moves_nothing():
    head, tail = np.zeros(3), np.array([-0.122, 0.0, 0.0])
    np.testing.assert_allclose(tractrix_tail(head, [0.05, 0, 0], tail), [-0.072, 0, 0])
    np.testing.assert_allclose(tractrix_tail(head, [-0.05, 0, 0], tail), [-0.172, 0, 0])
    np.testing.assert_array_equal(tractrix_tail(head, head, tail), tail)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), finite, finite, st.floats(-0.2, 0.2))
@example(seed=0, n=1, dx=0.0, dy=0.0, dz=3.646324177184393e-162)   # |S|^2 underflows
@example(seed=1, n=1, dx=0.0, dy=2.2250738585e-313, dz=2.2250738585e-313)   # subnormal S
def test_resolution_keeps_lengths_hits_the_target_and_dies_out_toward_the_tail(
        seed, n, dx, dy, dz):
    P = random_chain(seed, n)
    target = P[0] + np.array([dx, dy, dz])
    Q = resolve_tractrix(P, target)
    np.testing.assert_array_equal(Q[0], target)
    seg_p = np.linalg.norm(np.diff(P, axis=0), axis=1)
    seg_q = np.linalg.norm(np.diff(Q, axis=0), axis=1)
    assert np.max(np.abs(seg_q - seg_p)) < 1e-14
    # property 4, (7): each point moves no further than the one before it
    d = np.linalg.norm(Q - P, axis=1)
    assert np.all(np.diff(d) <= 1e-12)


def test_resolution_costs_o_n():
    def cost(n):
        P = random_chain(1, n, 0.01)
        best = math.inf
        for _ in range(9):
            t0 = time.perf_counter()
            resolve_tractrix(P, P[0] + [0.004, 0.003, 0.0])
            best = min(best, time.perf_counter() - t0)
        return best
    cost(100)                                     # warm up
    ratio = cost(1000) / cost(100)
    # about 10: linear (quadratic would be 100); a fixed cost per call makes
    # it less (4.9 once on a loaded machine), never more
    assert 2.0 < ratio < 30.0, ratio


def test_dragging_along_a_circle_keeps_the_chain_and_follows_the_head():
    R = 0.5
    ang = np.linspace(0, 1.5 * np.pi, 200)
    path = np.column_stack([R * np.sin(ang), R - R * np.cos(ang)])
    start = np.column_stack([-0.122 * np.arange(12), np.zeros(12), np.zeros(12)])
    post = drag_along(start, path, 0.005)
    seg = np.linalg.norm(np.diff(post, axis=1), axis=2)
    assert np.max(np.abs(seg - 0.122)) < 1e-13
    np.testing.assert_allclose(post[-1, 0, :2], path[-1], atol=1e-12)
    # the links follow the head inside its circle (a tractrix cuts corners)
    r = np.hypot(post[-1, :, 0], post[-1, :, 1] - R)
    assert r[0] == pytest.approx(R) and np.all(r[1:] < R) and np.all(r > 0.25)


def test_chain_points_of_straight_links():
    c = np.column_stack([-0.061 - 0.122 * np.arange(3), np.zeros(3), np.zeros(3)])
    a = np.tile([-1.0, 0.0, 0.0], (3, 1))
    P = chain_points(c, a, [0.122] * 3)
    np.testing.assert_allclose(P[:, 0], [0.0, -0.122, -0.244, -0.366], atol=1e-15)


def test_aiko_preview_draws_a_path_in_well_under_a_second(tmp_path):
    path = tmp_path / "ell.toml"
    path.write_text("[path]\nwaypoints = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n")
    r = aiko("preview", path)
    assert r.returncode == 0, r.stderr
    png = tmp_path / "ell-preview.png"
    assert png.stat().st_size > 20000
    # "head moved 2.000 m in 200 steps, tail ... m; X ms; lengths kept to ... m"
    words = r.stdout.splitlines()[0].split()
    assert words[2] == "2.000" and words[5] == "200"
    ms = float(words[words.index("ms;") - 1])
    assert ms < 1000.0
    assert float(words[-2]) < 1e-12
    bad = tmp_path / "bad.toml"
    bad.write_text("[path]\nwaypoints = [[0.0, 0.0]]\n")
    r = aiko("preview", bad)
    assert r.returncode == 2 and "needs at least two waypoints" in r.stderr
    assert "Traceback" not in r.stderr
