"""A fit's ranges: the pure statistics (profiles, curvature, the effective
sample count, the derived friction) against closed forms, and the whole
machinery (objective, least squares, profiles) on a fake replay whose path
depends on the friction's ratio alone, as sidewinding nearly does."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiko.experiments.analysis.compare import Paths
from aiko.experiments.analysis.fit import _error, _physics, _search_least_squares
from aiko.experiments.analysis.fit_objective import Objective
from aiko.experiments.analysis.fit_ranges import (
    CHI2_95,
    Range,
    at_value,
    curvature,
    derived_friction,
    judge_width,
    profile_range,
    profile_step,
    profile_values,
    widen_by_points,
)
from aiko.experiments.analysis.fit_residuals import (
    PENALTY_M,
    effective_samples,
    residuals,
    trial_samples,
)
from aiko.experiments.analysis.fit_uncertainty import parameter_ranges


# ------------------------------------------------------------- pure pieces
@given(st.floats(0.1, 0.9), st.floats(0.005, 0.05), st.floats(0.0, 100.0))
def test_a_quadratic_profile_gives_the_curvatures_range(v0, se, s0):
    values = np.linspace(v0 - 4 * se, v0 + 4 * se, 401)
    cost = s0 + ((values - v0) / se) ** 2
    r = profile_range(values, cost, CHI2_95, (0.0, 1.0))
    half = 1.959964 * se
    assert r.identifiable and r.reason == ""
    assert r.low == pytest.approx(v0 - half, abs=1e-3 * se)
    assert r.high == pytest.approx(v0 + half, abs=1e-3 * se)


def test_a_flat_profile_is_not_identifiable():
    values = np.linspace(0.02, 1.0, 7)
    r = profile_range(values, np.full(7, 50.0) + np.arange(7) * 0.1, CHI2_95, (0.02, 1.0))
    assert not r.identifiable and "flat" in r.reason
    assert (r.low, r.high) == (0.02, 1.0)


def test_a_profile_under_the_threshold_at_one_bound_reaches_it():
    values = np.linspace(0.0, 0.5, 11)
    cost = 10.0 + (values / 0.2) ** 2 * 10
    r = profile_range(values, cost, CHI2_95, (0.0, 1.0))
    assert not r.identifiable and r.low == 0.0 and "lower bound" in r.reason
    assert r.high == pytest.approx(0.2 * math.sqrt(CHI2_95 / 10), rel=1e-6)


def test_a_rough_profile_widens_its_range_by_its_roughness():
    """Costs that scatter about a parabola by more than the threshold (a
    replay's contacts change their timing with the parameter): the range is
    the parabola's within the threshold plus twice the scatter."""
    values = np.linspace(2.5, 4.5, 9)
    wiggle = np.array([1, -1, 1, -1, 1, -1, 1, -1, 1]) * 5.0
    cost = 100 + ((values - 3.5) / 0.1) ** 2 + wiggle
    r = profile_range(values, cost, CHI2_95, (0.0, 10.0))
    a, b, c = np.polyfit((values - 3.5) / 2.0, cost, 2)
    rough = math.sqrt(np.sum((cost - np.polyval([a, b, c], (values - 3.5) / 2.0)) ** 2) / 6)
    assert rough > 4.0 and r.identifiable and r.value == pytest.approx(3.5, abs=1e-3)
    assert r.high - r.value == pytest.approx(2.0 * math.sqrt((CHI2_95 + 2 * rough) / a),
                                             rel=1e-9)
    smooth = profile_range(values, cost - wiggle, CHI2_95, (0.0, 10.0))
    assert smooth.high - smooth.low < r.high - r.low


def test_profile_values_share_the_points_by_the_room_each_side_has():
    v = profile_values(0.5, 0.01, (0.0, 1.0), 6)
    assert v.tolist() == pytest.approx([0.46, 0.4733333, 0.4866667, 0.5133333, 0.5266667, 0.54])
    wide = profile_values(0.5, 0.01, (0.0, 1.0), 2, min_span=0.1)
    assert wide.tolist() == pytest.approx([0.4, 0.6])
    at_bound = profile_values(0.0, 0.01, (0.0, 1.0), 6)
    assert len(at_bound) == 6 and at_bound.min() > 0 and at_bound.max() == pytest.approx(0.04)
    unseen = profile_values(0.3, math.inf, (0.0, 1.0), 4)
    assert unseen.min() == pytest.approx(0.0) and unseen.max() == pytest.approx(1.0)


def test_the_curvature_of_a_linear_model_is_its_covariance():
    rng = np.random.default_rng(3)
    J = rng.normal(size=(200, 3))
    r = rng.normal(size=200)
    cur = curvature(J, r, 200.0, np.array([1.0, 2.0, 0.5]))
    s2 = float(r @ r) / 197
    C = np.linalg.inv(J.T @ J) * s2 * np.outer([1.0, 2.0, 0.5], [1.0, 2.0, 0.5])
    assert np.allclose(cur.C, C) and cur.kappa == 1.0
    assert cur.threshold == pytest.approx(CHI2_95 * s2)
    half = curvature(J, r, 50.0, np.ones(3))          # correlated: a quarter the samples
    assert half.kappa == 4.0 and np.allclose(half.se, 2 * curvature(J, r, 200.0, np.ones(3)).se)


def test_a_direction_the_residuals_do_not_see_has_no_bound():
    J = np.column_stack([np.ones(50), np.ones(50), np.arange(50.0)])   # 0 and 1: one column
    cur = curvature(J, np.ones(50) * 0.1, 50.0, np.ones(3))
    assert np.isinf(cur.se[0]) and np.isinf(cur.se[1]) and np.isfinite(cur.se[2])


@settings(max_examples=50)
@given(st.integers(0, 2), st.floats(-0.2, 0.2), st.integers(0, 10_000))
def test_the_profile_step_refits_a_linear_model_exactly(i, dz, seed):
    rng = np.random.default_rng(seed)
    J = rng.normal(size=(40, 3))
    r = rng.normal(size=40)
    r = r - J @ np.linalg.lstsq(J, r, rcond=None)[0]     # r at the optimum: J^T r = 0
    step = profile_step(J, r, i, dz)
    assert step[i] == dz
    others = [k for k in range(3) if k != i]
    assert np.allclose(J[:, others].T @ (r + J @ step), 0.0, atol=1e-9)


def test_the_derived_friction_and_its_range():
    J = np.diag([1 / 0.01, 1 / 0.02, 1 / 0.1])          # C = diag(0.01, 0.02, 0.1)^2
    cur = curvature(J, np.full(3, 3 ** -0.5), 3.0, np.ones(3))
    assert np.allclose(cur.C, np.diag([0.01 ** 2, 0.02 ** 2, 0.1 ** 2]))
    names = ["mu_x", "mu_y", "backlash"]

    def values_at(z):
        return dict(zip(names, z, strict=True))

    out = derived_friction(values_at, np.array([0.2, 0.4, 3.0]), cur, 1e-7)
    ratio = out["mu_y/mu_x"]
    se = math.hypot(0.4 / 0.2 ** 2 * 0.01, 0.02 / 0.2)
    assert ratio.value == 2.0 and ratio.se == pytest.approx(se, rel=1e-5)
    assert ratio.identifiable and out["mu"].value == pytest.approx(0.3)
    back = derived_friction(lambda z: {"mu": z[0], "ratio": z[1]}, np.array([0.3, 2.0]),
                            curvature(np.eye(2) * 1e3, np.ones(2), 2.0, np.ones(2)), 1e-7)
    assert back["mu_x"].value == pytest.approx(0.2) and back["mu_y"].value == pytest.approx(0.4)
    loose = derived_friction(values_at, np.array([0.2, 0.4, 3.0]),
                             curvature(np.eye(3) * 5.0, np.full(3, 3 ** -0.5), 3.0, np.ones(3)),
                             1e-7)["mu_y/mu_x"]
    assert not loose.identifiable and loose.low == 0.0 and loose.high > 4.0   # never below 0


def test_effective_samples_of_white_and_correlated_residuals():
    rng = np.random.default_rng(1)
    white = rng.normal(size=20_000)
    assert effective_samples([white]) == pytest.approx(20_000, rel=0.03)
    ar = np.zeros(20_000)
    for k in range(1, ar.size):
        ar[k] = 0.9 * ar[k - 1] + rng.normal()
    assert effective_samples([ar]) == pytest.approx(20_000 * 0.1 / 1.9, rel=0.1)
    drift = np.linspace(0, 1, 300)
    assert effective_samples([drift]) == pytest.approx(300 * 0.01 / 1.99)


def _trial(t, xy):
    p = np.column_stack([xy, np.zeros(len(t))])
    return SimpleNamespace(experiment=Paths(t, p, t, p), t0=0.0, path="fake")


def test_residuals_keep_their_length_whatever_the_delay():
    t = np.arange(0.0, 5.0, 0.05)
    xy = np.column_stack([0.1 * t, 0.02 * np.sin(t)])
    xy[10] = np.nan                                     # occluded: left out
    inp = _trial(t, xy)
    s = trial_samples(inp, max_delay=0.3)
    assert len(s) == np.sum(t >= 0.3) - 1
    model = Paths(t, np.column_stack([0.1 * t, 0.02 * np.sin(t), 0 * t]), t,
                  np.column_stack([0.1 * t, 0.02 * np.sin(t), 0 * t]))
    r0 = residuals(s, model, 0.0, 0.0005)
    assert r0.shape == (2 * len(s),) and np.allclose(r0, 0.0)
    r1 = residuals(s, model, 0.2, 0.0005)
    assert r1.shape == r0.shape and r1[0] == pytest.approx(0.1 * 0.2 / 0.0005)
    failed = residuals(s, "FloatingPointError: diverged", 0.0, 0.0005)
    assert np.all(failed == PENALTY_M / 0.0005)


# ------------------------------------------------- the machinery, on a fake
TRUTH = {"mu_x": 0.17, "mu_y": 0.34, "backlash": 3.5}
T = np.arange(0.0, 15.0, 0.05)


def _path(mu_x, mu_y, backlash, t=T):
    """A fake replay: the path depends on the friction's ratio and the free
    play only (scaling both frictions changes nothing)."""
    ratio = mu_y / mu_x
    return np.column_stack([0.02 * t * ratio, 0.01 * np.sin(3 * t) * (1 + backlash / 4),
                            0 * t])


def _fake_simulate(args):
    inp, physics = args
    p = _path(physics["mu_x"], physics["mu_y"], math.degrees(physics["backlash"]))
    return Paths(T, p, T, p)


@pytest.fixture(scope="module")
def fake_trials():
    rng = np.random.default_rng(11)
    out = []
    for _ in range(2):
        xy = _path(**TRUTH)[:, :2] + rng.normal(0, 0.0005, (T.size, 2))
        out.append(_trial(T, xy))
    return out


def _fit(trials, names, bounds, start):
    obj = Objective(trials, names, bounds, 0.0005, lambda v: _physics(v, {}), _fake_simulate,
                    _error, None)
    z, _, J, r = _search_least_squares(obj, start, 60, lambda: None)
    fitted = obj.values(z)
    return fitted, parameter_ranges(obj, z, fitted, J, r, 6)


def test_ranges_of_a_fit_that_cannot_see_the_frictions_scale(fake_trials):
    bounds = {"mu_x": (0.02, 1.0), "mu_y": (0.02, 1.0), "backlash": (0.0, 10.0)}
    fitted, (ranges, derived, cur, profiles) = _fit(
        fake_trials, ["mu_x", "mu_y", "backlash"], bounds,
        {"mu_x": 0.2, "mu_y": 0.2, "backlash": 2.0})
    back = ranges["backlash"]
    assert back.identifiable and back.low <= 3.5 <= back.high and back.high - back.low < 0.2
    ratio = derived["mu_y/mu_x"]
    assert ratio.identifiable and ratio.low <= 2.0 <= ratio.high
    assert ratio.value == pytest.approx(2.0, rel=0.01)
    for name in ("mu_x", "mu_y"):
        assert not ranges[name].identifiable, ranges[name]
        assert ranges[name].low <= TRUTH[name] <= ranges[name].high
    assert cur.unseen.shape[1] == 1          # scaling both: a direction the data cannot see
    assert all(len(v) == 7 for v, _ in profiles.values())   # 6 points and the optimum


def test_the_mean_and_ratio_parametrisation_pins_the_ratio(fake_trials):
    bounds = {"mu": (0.02, 1.0), "ratio": (0.2, 5.0), "backlash": (0.0, 10.0)}
    fitted, (ranges, derived, _, _) = _fit(fake_trials, ["mu", "ratio", "backlash"], bounds,
                                           {"mu": 0.2, "ratio": 1.0, "backlash": 2.0})
    assert ranges["ratio"].identifiable and ranges["ratio"].low <= 2.0 <= ranges["ratio"].high
    assert not ranges["mu"].identifiable and "flat" in ranges["mu"].reason
    assert set(derived) == {"mu_x", "mu_y"} and not derived["mu_x"].identifiable


def test_profiles_that_refit_the_others_are_never_above_the_one_step_ones(fake_trials):
    """On the fake (the scale unseen, the ratio's nonlinearity there): the
    one-step profile overstates the cost away from the optimum, re-fitting
    the others by least squares at each point only lowers it."""
    from aiko.experiments.analysis.fit_ranges import curvature as curv
    from aiko.experiments.analysis.fit_residuals import effective_samples as n_eff
    from aiko.experiments.analysis.fit_uncertainty import _profiles

    bounds = {"mu_x": (0.02, 1.0), "mu_y": (0.02, 1.0), "backlash": (0.0, 10.0)}
    names = ["mu_x", "mu_y", "backlash"]
    obj = Objective(fake_trials, names, bounds, 0.0005, lambda v: _physics(v, {}),
                    _fake_simulate, _error, None)
    z, _, J, r = _search_least_squares(obj, {"mu_x": 0.2, "mu_y": 0.2, "backlash": 2.0}, 60,
                                       lambda: None)
    fitted = obj.values(z)
    cur = curv(J, r, n_eff(obj.series(r)), obj.hi - obj.lo)
    one = _profiles(obj, z, J, r, cur, fitted, 4)
    refit = _profiles(obj, z, J, r, cur, fitted, 4, refit=4)
    for name in names:
        assert np.array_equal(one[name][0], refit[name][0])         # the same points
        # (a re-fit starts a millionth inside a bound the step reached)
        assert np.all(refit[name][1] <= one[name][1] * (1 + 1e-6)), name
    # along mu_x the one step loses the ratio, the re-fit keeps it where
    # mu_y can follow (not beyond mu_x 0.5, where mu_y would pass its bound)
    assert np.sum(refit["mu_x"][1] < one["mu_x"][1] / 10) >= 2


def test_a_range_holds_every_evaluated_point_within_its_level():
    """A profile that saw one dip: the search had found another as low; the
    range must reach it, and reaching a bound ends identifiability."""
    r = Range(0.5, 0.45, 0.55, True, "profile", "", 0.02)
    values = np.array([0.2, 0.5, 0.8, 0.05])
    rise = np.array([3.0, 0.0, 9.0, 2.0])
    wide = widen_by_points(r, values, rise, 4.0, (0.0, 1.0))
    assert (wide.low, wide.high) == (0.05, 0.55) and wide.identifiable
    assert wide.value == 0.5 and wide.source == "profile and evaluated points"
    assert widen_by_points(r, values, rise, 1.0, (0.0, 1.0)) is r      # none within
    edge = widen_by_points(r, np.array([0.0]), np.array([1.0]), 4.0, (0.0, 1.0))
    assert not edge.identifiable and edge.reason == "reaches the lower bound"
    # a derived quantity (no bounds): identifiable while narrower than its value
    ratio = Range(2.0, 1.9, 2.1, True, "curvature", "", 0.05)
    assert widen_by_points(ratio, np.array([1.2]), np.array([0.0]), 1.0).identifiable
    far = widen_by_points(ratio, np.array([0.5, 3.0]), np.array([0.0, 0.5]), 1.0)
    assert (far.low, far.high) == (0.5, 3.0) and not far.identifiable
    assert far.reason == "its range is wider than its value"


def test_a_range_takes_the_fits_value_and_holds_it():
    r = Range(0.5, 0.45, 0.55, True, "profile", "", 0.02)
    assert at_value(r, 0.5) is r
    moved = at_value(r, 0.6, (0.0, 1.0))
    assert (moved.value, moved.low, moved.high, moved.identifiable) == (0.6, 0.45, 0.6, True)
    assert not at_value(r, 1.0, (0.0, 1.0)).identifiable
    ratio = Range(2.0, 1.5, 2.5, True, "curvature", "", 0.25)
    assert at_value(ratio, 1.4).low == 1.4 and at_value(ratio, 1.4).identifiable
    assert not at_value(ratio, 0.9).identifiable          # 0.9-2.5 is wider than 0.9


def test_a_range_as_wide_as_its_value_is_not_identifiable():
    narrow = Range(0.15, 0.10, 0.20, True, "profile", "", 0.02)
    assert judge_width(narrow) is narrow
    wide = judge_width(Range(0.33, 0.06, 0.60, True, "profile", "", 0.06))
    assert not wide.identifiable and wide.reason == "its range is wider than its value"
    assert (wide.value, wide.low, wide.high) == (0.33, 0.06, 0.60)
    at_bound = Range(0.1, 0.02, 0.5, False, "profile", "reaches the lower bound", None)
    assert judge_width(at_bound) is at_bound          # the first reason stands
