"""A fit's ranges from its objective: the Jacobian at the optimum, the
curvature's statistics and every parameter's profile, its points' replays
run together on the executor (:mod:`~aiko.experiments.analysis.fit_ranges`
says what each number is)."""

from __future__ import annotations

import math

import numpy as np

from aiko.experiments.analysis.fit_objective import STEP, Objective
from aiko.experiments.analysis.fit_ranges import (
    Curvature,
    Range,
    curvature,
    curvature_range,
    derived_friction,
    derived_values,
    profile_range,
    profile_step,
    profile_values,
    roughness,
    widen_by_points,
)
from aiko.experiments.analysis.fit_residuals import effective_samples

__all__ = ["parameter_ranges"]

SPAN = 0.05
"""A profile reaches at least this share of the bounds' width either side
(or 4 standard errors of the curvature, if more): the rough cost needs a
span wider than its roughness to show its shape."""


def _profile_points(obj: Objective, z: np.ndarray, J: np.ndarray, r: np.ndarray,
                    cur: Curvature, fitted: dict, points: int) -> list[tuple[int, dict]]:
    """Every profile's points: (parameter's index, values) with the others
    re-fitted by one Gauss-Newton step."""
    out = []
    width = obj.hi - obj.lo
    for i, name in enumerate(obj.names):
        grid = profile_values(fitted[name], float(cur.se[i]), (obj.lo[i], obj.hi[i]), points,
                              min_span=SPAN * width[i])
        for v in grid:
            zp = np.clip(z + profile_step(J, r, i, (v - fitted[name]) / width[i]), 0.0, 1.0)
            values = obj.values(zp)
            values[name] = float(v)
            out.append((i, values))
    return out


def _refit(obj: Objective, values: dict, i: int, iterations: int) -> dict:
    """``values`` with all but parameter ``i`` re-fitted by least squares
    (``iterations`` evaluations at most, each Jacobian's replays together)."""
    from scipy.optimize import least_squares

    others = [k for k in range(len(obj.names)) if k != i]
    if not others or iterations <= 0:
        return values
    names = [obj.names[k] for k in others]
    fixed = {obj.names[i]: values[obj.names[i]]}

    def full(zo) -> dict:
        return {**obj.values(zo, names), **fixed}

    def fun(zo) -> np.ndarray:
        v = full(zo)
        return obj.residuals(v, obj.paths([v])[0])

    def jac(zo) -> np.ndarray:
        return obj.jacobian(obj.unit(full(zo)), step=STEP, columns=others)

    z0 = np.clip(obj.unit(values, names), 1e-6, 1.0 - 1e-6)
    res = least_squares(fun, z0, jac=jac, bounds=(0.0, 1.0), method="trf",
                        max_nfev=iterations, xtol=5e-3, ftol=1e-3)
    return full(res.x)


def _profiles(obj: Objective, z, J, r, cur, fitted, points, refit: int = 0) -> dict[str, tuple]:
    """name -> (values (k,), S (k,)) with the optimum among them; with
    ``refit`` the others re-fitted at each point by that many least-squares
    evaluations after the Gauss-Newton step."""
    todo = _profile_points(obj, z, J, r, cur, fitted, points)
    obj.paths([v for _, v in todo])                   # the steps' replays together
    if refit > 0:
        todo = [(i, _refit(obj, v, i, refit)) for i, v in todo]
    all_paths = obj.paths([v for _, v in todo])
    S_opt = float(r @ r)
    out = {n: ([fitted[n]], [S_opt]) for n in obj.names}
    for (i, values), paths in zip(todo, all_paths, strict=True):
        name = obj.names[i]
        if name != "delay":
            values = obj.best_delay(values, paths)
        out[name][0].append(values[name])
        out[name][1].append(obj.cost(values, paths))
    return {n: (np.array(v), np.array(c)) for n, (v, c) in out.items()}


def parameter_ranges(obj: Objective, z: np.ndarray, fitted: dict, J: np.ndarray | None,
                     r: np.ndarray | None, points: int, refit: int = 0):
    """(ranges, derived, curvature, profiles) of a fit whose optimum is at
    unit coordinates ``z`` (values ``fitted``); ``J`` and ``r`` there if the
    search has them (else computed: one replay per parameter); ``refit``:
    see :func:`_profiles`."""
    if r is None:
        r = obj.residuals(fitted, obj.paths([fitted])[0])
    if J is None:
        J = obj.jacobian(z, r, STEP)
    cur = curvature(J, r, effective_samples(obj.series(r)), obj.hi - obj.lo, obj.aligned_dof)
    profiles = _profiles(obj, z, J, r, cur, fitted, points, refit) if points > 0 else {}
    ranges: dict[str, Range] = {}
    for i, name in enumerate(obj.names):
        bounds = (float(obj.lo[i]), float(obj.hi[i]))
        curv = curvature_range(fitted[name], float(cur.se[i]), bounds)
        if name in profiles and len(profiles[name][0]) > 1:
            values, costs = profiles[name]
            ranges[name] = _wider(profile_range(values, costs, cur.threshold, bounds), curv,
                                  fitted[name])
        else:
            ranges[name] = curv
    # the derived quantities where one Gauss-Newton step from the search's
    # point leads (the search stops once its steps are small, not at the
    # least of the linearised residuals), along the directions it sees
    z_gn = np.clip(z + np.linalg.lstsq(J, -r, rcond=0.01)[0], 0.0, 1.0)
    # the cost's roughness, where a profile is local (an identifiable
    # parameter's: over a whole bound's width a parabola does not fit, rough
    # or not), widens the derived ranges as it widened the parameters'
    widen = max([math.sqrt(1.0 + 2.0 * roughness(v, c) / cur.threshold)
                 for n, (v, c) in profiles.items() if ranges[n].identifiable], default=1.0)
    derived = derived_friction(obj.values, z, cur, STEP, z_gn, widen)
    ranges, derived = _widened(obj, ranges, derived, profiles, cur, float(r @ r), widen)
    return ranges, derived, cur, profiles


def _widened(obj: Objective, ranges: dict[str, Range], derived: dict[str, Range],
             profiles: dict, cur: Curvature, S_opt: float, widen: float):
    """The ranges stretched over every point the fit evaluated within their
    level (:func:`widen_by_points`): the threshold plus twice the profile's
    roughness, for a derived quantity the threshold times ``widen``
    squared. Its replays are cached: no simulation."""
    points = [values for values, _ in obj.history]
    if not points:
        return ranges, derived
    S = np.array([obj.cost(v) for v in points])
    least = min([S_opt, float(S.min())] + [float(np.min(c)) for _, c in profiles.values()])
    rise = S - least
    out = {}
    for i, (name, rng) in enumerate(ranges.items()):
        rough = roughness(*profiles[name]) if name in profiles else 0.0
        out[name] = widen_by_points(rng, np.array([v[name] for v in points]), rise,
                                    cur.threshold + 2.0 * rough,
                                    (float(obj.lo[i]), float(obj.hi[i])))
    friction = [derived_values(v) for v in points]
    out_derived = {k: widen_by_points(rng, np.array([f[k] for f in friction]), rise,
                                      cur.threshold * widen ** 2)
                   for k, rng in derived.items()}
    return out, out_derived


def _wider(prof: Range, curv: Range, fitted: float) -> Range:
    """The profile's value (its parabola's vertex: a rough cost's dips
    averaged out) with the wider of its range and the curvature's, and the
    search's point. A one-step re-fit can only overstate the cost away from
    the optimum, so its profile may widen a range where the cost is flatter
    than quadratic (near a bound, a second valley) but is not trusted to
    narrow it."""
    low, high = min(prof.low, curv.low, fitted), max(prof.high, curv.high, fitted)
    reasons = [r.reason for r in (prof, curv) if r.reason]
    source = "profile" if (low, high) == (prof.low, prof.high) else "profile and curvature"
    return Range(prof.value, low, high, not reasons, source,
                 "; ".join(dict.fromkeys(reasons)), curv.se)
