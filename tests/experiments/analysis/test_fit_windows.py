"""The fit's windowed residuals: the replay aligned on the experiment by a
rigid motion in each window before the differences are taken."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.experiments.analysis.compare import Paths
from aiko.experiments.analysis.fit import FitError, check_options, check_windows
from aiko.experiments.analysis.fit_residuals import (
    MIN_WINDOW_SAMPLES,
    align_windows,
    residuals,
    trial_samples,
    window_index,
)
from aiko.model.scene import Peg, Scene

T = np.arange(0.0, 6.0, 0.05)          # 120 samples at 20 Hz
SIGMA = 0.0005


def _rotate(p: np.ndarray, th: float) -> np.ndarray:
    c, s = math.cos(th), math.sin(th)
    return np.column_stack([c * p[:, 0] - s * p[:, 1], s * p[:, 0] + c * p[:, 1]])


def _path(t: np.ndarray) -> np.ndarray:
    """A snake-like path of link 6 (m): forward 5 cm/s, swaying 2 cm."""
    return np.column_stack([0.05 * t, 0.02 * np.sin(2.0 * t)])


def _trial(t: np.ndarray, xy: np.ndarray, scene: Scene | None = None):
    p = np.column_stack([xy, np.zeros(len(t))])
    return SimpleNamespace(experiment=Paths(t, p, t, p), t0=0.0, path="fake",
                           scene=scene or Scene())


def _paths(t: np.ndarray, xy: np.ndarray) -> Paths:
    p = np.column_stack([xy, np.zeros(len(t))])
    return Paths(t, p, t, p)


def test_windows_are_consecutive_and_a_short_last_one_joins_the_one_before():
    w = window_index(T, 1.5)
    assert np.array_equal(np.bincount(w), [30, 30, 30, 30])
    # 6.0-6.1 s: two more samples, too few for a window of their own
    t = np.arange(0.0, 6.1, 0.05)
    assert np.array_equal(np.bincount(window_index(t, 1.5)), [30, 30, 30, 32])
    # a window with no sample at all (occluded) takes no number
    gap = T[(T < 1.5) | (T >= 3.0)]
    assert np.array_equal(np.bincount(window_index(gap, 1.5)), [30, 30, 30])
    # fewer samples than a window needs: one window
    assert np.array_equal(window_index(T[:MIN_WINDOW_SAMPLES - 1], 1.5), [0, 0, 0, 0])
    assert window_index(np.zeros(0), 1.5).size == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-math.pi, math.pi), st.floats(-2.0, 2.0),
                          st.floats(-2.0, 2.0)), min_size=4, max_size=4))
def test_a_replay_moved_rigidly_in_each_window_leaves_no_residual(motions):
    m = _path(T)
    w = window_index(T, 1.5)
    e = np.empty_like(m)
    for j, (th, cx, cy) in enumerate(motions):
        s = w == j
        e[s] = _rotate(m[s], th) + [cx, cy]
    assert np.abs(align_windows(e, m, w)).max() < 1e-9


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(-math.pi, math.pi), st.floats(-1.0, 1.0))
def test_the_alignment_is_the_least_squares_rigid_motion(seed, th, cx):
    """No other rotation (about the best point) leaves less: the residuals'
    sum of squares against a fine sweep of angles, and they sum to zero."""
    rng = np.random.default_rng(seed)
    m = _path(T[:30])
    e = _rotate(m, th) + [cx, 0.3] + rng.normal(0.0, 0.003, m.shape)
    w = np.zeros(30, dtype=np.int64)
    r = align_windows(e, m, w)
    assert np.allclose(r.sum(axis=0), 0.0, atol=1e-12)
    best = float(np.sum(r ** 2))
    b = e - e.mean(axis=0)
    a = m - m.mean(axis=0)
    for phi in np.linspace(-math.pi, math.pi, 721):
        assert np.sum((b - _rotate(a, phi)) ** 2) >= best - 1e-12


def test_a_drift_before_a_window_costs_nothing_in_it():
    """The replay slips once at 2.0 s (turned 10 degrees, moved 3 cm): sample
    by sample every later residual pays for it; windowed, only the window of
    the slip does, and its rigid motions take 3 degrees of freedom each."""
    xy = _path(T)
    model = xy.copy()
    later = T >= 2.0
    model[later] = _rotate(model[later] - model[later][0], math.radians(10.0)) \
        + model[later][0] + [0.03, 0.0]
    inp = _trial(T, xy)
    plain = residuals(trial_samples(inp), _paths(T, model), 0.0, SIGMA).reshape(-1, 2)
    s = trial_samples(inp, window=1.5)
    assert s.aligned_dof == 3 * 4
    windowed = residuals(s, _paths(T, model), 0.0, SIGMA).reshape(-1, 2)
    assert windowed.shape == plain.shape
    assert np.all(np.hypot(*plain[later].T) > 50.0)       # more than 2.5 cm everywhere after
    slip = s.w == s.w[np.argmax(later)]
    assert np.abs(windowed[~slip]).max() < 1e-6
    assert np.abs(windowed[slip]).max() > 1.0


def test_a_failed_replay_costs_the_penalty_windowed_too():
    s = trial_samples(_trial(T, _path(T)), window=1.5)
    r = residuals(s, "FloatingPointError: diverged", 0.0, SIGMA)
    assert r.shape == (2 * T.size,) and np.all(r == r[0]) and r[0] > 1e4


def test_windows_are_refused_among_obstacles_and_bad_lengths():
    pegs = Scene(pegs=(Peg(0.5, 0.0, 0.05),))
    trials = [_trial(T, _path(T)), _trial(T, _path(T), pegs)]
    check_windows(trials[:1], 1.5)
    check_windows(trials, 0.0)
    with pytest.raises(FitError, match="obstacles.*--window 0"):
        check_windows(trials, 1.5)
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(FitError, match="--window"):
            check_options("least-squares", 0.5, 4, 0, bad)
    # at 20 Hz a window holds 5 samples from 0.25 s on
    check_windows(trials[:1], 0.25)
    with pytest.raises(FitError, match=r"--window 0.2: shorter than 5 .*\(0.25 s\)"):
        check_windows(trials[:1], 0.2)
