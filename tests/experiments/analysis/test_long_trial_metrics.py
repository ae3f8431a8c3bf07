"""Comparisons that stay true over long trials: the path length (not only the
net displacement), the speed along the path, the turning rate and the
paper's 15 s windows, on paths whose answers are known."""

import math

import numpy as np
import pytest

from aiko.experiments.analysis.compare import (
    WINDOW_S,
    Paths,
    compare_paths,
    comparison_figure,
    path_length,
    turning_rate,
)


def _circle(t, radius, omega, phase=0.0):
    """A point going round a circle of ``radius`` at ``omega`` rad/s."""
    a = phase + omega * t
    return np.column_stack([radius * np.cos(a), radius * np.sin(a), 0.05 + 0 * t])


def test_a_robot_going_round_a_circle():
    """The 10-minute case: one turn in 300 s on a 4.7 m radius. The net
    displacement is small; the path length, the speed along it and the
    turning rate say what happened."""
    t = np.arange(0.0, 300.0, 0.05)
    p = _circle(t, 4.7, 2 * math.pi / 300.0)
    m = compare_paths(Paths(t, p, t, p))
    true_path = 4.7 * 2 * math.pi * (t[-1] / 300.0)
    assert m["path_experiment_m"] == pytest.approx(true_path, rel=1e-3)
    assert m["path_speed_experiment_m_s"] == pytest.approx(true_path / t[-1], rel=1e-3)
    assert m["distance_experiment_m"] < 0.01 * true_path          # nearly back at the start
    assert m["turning_rate_experiment_deg_s"] == pytest.approx(360.0 / 300.0, rel=1e-3)
    assert len(m["windows"]) == 20                                # 299.95 s: the last 14.95 s
    assert m["window_summary"]["rms_error_m"]["mean"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("speed, sway, raw_excess", [(0.08, 0.02, 1.005), (0.01, 0.0, 1.3)])
def test_noise_does_not_lengthen_the_path(speed, sway, raw_excess):
    """Motion capture's 0.5 mm at 20 Hz: the path length stays within 1 % of
    the true one; summed over every sample it would be longer by a fraction
    that grows as the robot slows (about 1 % at 8 cm/s, over 30 % at 1 cm/s).
    The resampling also smooths sways faster than a second: a 2 cm sway of
    3 s period is kept to 1 %."""
    rng = np.random.default_rng(1)
    t = np.arange(0.0, 15.0, 0.05)
    clean = np.column_stack([speed * t, sway * np.sin(2 * math.pi * t / 3.0), 0 * t])
    noisy = clean + rng.normal(0.0, 0.0005, clean.shape)
    true = path_length(t, clean[:, :2], step=0.001)
    assert path_length(t, noisy[:, :2]) == pytest.approx(true, rel=0.01)
    raw = float(np.hypot(*np.diff(noisy[:, :2], axis=0).T).sum())
    assert raw > raw_excess * true


def test_turning_rate_needs_two_chords_and_sees_the_sign():
    t = np.arange(0.0, 9.0, 0.1)
    assert turning_rate(t, _circle(t, 1.0, 0.1)[:, :2]) is None
    t = np.arange(0.0, 30.0, 0.1)
    assert turning_rate(t, _circle(t, 1.0, -0.1)[:, :2]) == pytest.approx(
        -math.degrees(0.1), rel=1e-3)


def test_windows_are_aligned_at_their_starts():
    """A model that goes as the experiment but drifts sideways 1 cm/s: over
    the whole trial the error grows to 60 cm; in each window it is the drift
    of that window only."""
    t = np.arange(0.0, 60.0, 0.05)
    e = np.column_stack([0.1 * t, 0 * t, 0 * t])
    mo = e + np.column_stack([0 * t, 0.01 * t, 0 * t])
    m = compare_paths(Paths(t, e, t, mo))
    assert m["final_error_m"] == pytest.approx(0.01 * t[-1], rel=1e-6)
    assert len(m["windows"]) == 4
    for w in m["windows"]:
        assert w["final_error_m"] == pytest.approx(0.01 * WINDOW_S, rel=0.01)
        assert w["duration_s"] == pytest.approx(WINDOW_S, abs=0.06)
    s = m["window_summary"]
    assert s["windows"] == 4 and s["final_error_m"]["sd"] < 1e-3
    assert s["heading_difference_deg"]["mean"] == pytest.approx(math.degrees(math.atan(0.1)),
                                                                rel=1e-3)


def test_short_trial_has_one_window_and_no_panel():
    t = np.arange(0.0, 15.0, 0.05)
    e = np.column_stack([0.1 * t, 0 * t, 0 * t])
    m = compare_paths(Paths(t, e, t, 1.05 * e))
    assert len(m["windows"]) == 1
    fig = comparison_figure(Paths(t, e, t, 1.05 * e), "short", m)
    assert len(fig.axes) == 3


def test_long_trial_figure_has_the_windows_panel(tmp_path):
    t = np.arange(0.0, 120.0, 0.05)
    e = _circle(t, 3.0, 2 * math.pi / 240.0)
    mo = _circle(t, 3.3, 2 * math.pi / 260.0)
    m = compare_paths(Paths(t, e, t, mo))
    fig = comparison_figure(Paths(t, e, t, mo), "circle", m)
    assert len(fig.axes) == 5                    # x, y, path, windows and their twin
    fig.savefig(tmp_path / "windows.png", dpi=80)
    assert (tmp_path / "windows.png").stat().st_size > 10_000
