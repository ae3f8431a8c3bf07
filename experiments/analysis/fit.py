"""Identify model parameters from logged trials, with a range for each.

The default method (``least-squares``) minimises the residuals of link 6,
experiment against replay at every motion-capture sample in units of the
motion capture's noise, the replay aligned on the experiment in windows
(:data:`WINDOW`; :mod:`~aiko.experiments.analysis.fit_residuals`), with
scipy.optimize.least_squares (trust region, bounded) in coordinates scaled
to the bounds' unit box, twice: from the start on half the budget, then from
the best of a scan of the friction's scale (:data:`SCALES`); its Jacobian by
forward differences whose replays run together on the executor (a delay's
column needs no simulation). ``nelder-mead`` and ``de`` (differential
evolution) minimise the mean over the trials of the RMS distance (after the
windows' alignment) instead, derivative-free, every evaluation taking the
best delay for its replays.

Whichever searched, the fit then reads what the residuals say about the
parameters (:mod:`~aiko.experiments.analysis.fit_ranges`): a 95 % range per
parameter from its profile (or the curvature alone with ``profile_points``
0), correlations, identifiability, and the friction's ratio and mean (or
mu_x and mu_y from a mean and ratio), each range stretched over the points
evaluated within its level and valued at the fit's point. Parameters
(``FIT_BOUNDS``): floor friction ``mu`` (isotropic), ``mu_x``/``mu_y``, or
``mu`` (their mean) and ``ratio`` (mu_y / mu_x); free play ``backlash``
(degrees; the replay then runs through the emulated modules' motors); motion
capture's ``delay`` (s; a shift of the experiment's times, which needs no
new simulation).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from aiko.experiments.analysis.bounds import parse_bounds_spec
from aiko.experiments.analysis.compare import ComparisonError, Paths, compare_paths
from aiko.experiments.analysis.fit_objective import STEP, Objective
from aiko.experiments.analysis.fit_ranges import (
    Curvature,
    Range,
    at_value,
    derived_values,
    judge_width,
)
from aiko.experiments.analysis.fit_residuals import MIN_WINDOW_SAMPLES
from aiko.experiments.analysis.fit_residuals import PENALTY_M as PENALTY
from aiko.experiments.analysis.replay import ReplayInput
from aiko.experiments.analysis.replay_files import shifted, simulate_replay
from aiko.model.errors import AikoError

__all__ = ["FIT_BOUNDS", "METHODS", "NOISE_MM", "PROFILE_POINTS", "FitError", "FitResult",
           "fit_trials", "parse_bounds"]

FIT_BOUNDS = {"mu": (0.02, 1.0), "mu_x": (0.02, 1.0), "mu_y": (0.02, 1.0),
              "ratio": (0.2, 5.0), "backlash": (0.0, 10.0), "delay": (-0.3, 0.3)}
"""Default search bounds: friction and its ratio (-), backlash (deg), delay (s)."""

METHODS = ("least-squares", "nelder-mead", "de")

PROFILE_POINTS = 4
"""A profile's points per parameter besides the optimum (a parabola through
five points leaves two to judge the cost's roughness by)."""

NOISE_MM = 0.5
"""The motion capture's noise (mm, each coordinate) the residuals are
weighed by unless told: Vicon's and the simulated rig's."""

WINDOW = 1.5
"""Windows (s) in which the replay is aligned on the experiment by a rigid
motion before the residuals are taken (:mod:`fit_residuals`): on the
blind fit's trials the cost along a line to the truth falls steadily with
them where sample by sample it wanders; 3 s pinned the friction's ratio a
little better and the free play worse."""


class FitError(AikoError):
    pass


def check_names(names: list[str]) -> None:
    unknown = [n for n in names if n not in FIT_BOUNDS]
    if unknown or not names:
        raise FitError(f"--params: unknown {', '.join(unknown) or '(none)'}; choose from "
                       f"{', '.join(FIT_BOUNDS)}")
    if len(set(names)) != len(names):
        raise FitError(f"--params: {','.join(names)} names one twice")
    if "mu" in names and ("mu_x" in names or "mu_y" in names):
        raise FitError("--params: fit mu (and ratio), or mu_x and mu_y, not both")
    if "ratio" in names and "mu" not in names:
        raise FitError("--params: ratio (mu_y/mu_x) is fitted with mu, their mean")


def check_options(method: str, noise_mm: float, profile_points: int,
                  profile_refit: int, window: float = 0.0) -> None:
    """FitError for a method, noise, profile or window setting a fit cannot take."""
    if method not in METHODS:
        raise FitError(f"unknown method {method!r} ({', '.join(METHODS)})")
    if profile_refit < 0 or profile_points < 0:
        raise FitError("--profile-points and --profile-refit: 0 or more")
    if not noise_mm > 0:
        raise FitError(f"--noise-mm {noise_mm}: must be above 0")
    if not (window >= 0 and math.isfinite(window)):
        raise FitError(f"--window {window}: 0 (sample by sample) or a length in s")


def check_windows(inputs: list[ReplayInput], window: float) -> None:
    """FitError if windows are asked for on a trial with obstacles (moving
    the snake in the plane changes what it meets there), or are shorter
    than MIN_WINDOW_SAMPLES of a trial's motion capture (a rigid motion
    fitted to so few points leaves them little to say)."""
    if window <= 0:
        return
    for inp in inputs:
        if inp.scene.pegs or inp.scene.steps:
            raise FitError(f"{inp.path}: the trial has obstacles, where aligning the "
                           f"replay in windows is not sound; fit with --window 0")
        t = np.asarray(inp.experiment.t_experiment, float).reshape(-1)
        step = float(np.median(np.diff(t))) if t.size > 1 else 0.0
        if window < MIN_WINDOW_SAMPLES * step:
            raise FitError(f"--window {window:g}: shorter than {MIN_WINDOW_SAMPLES} motion "
                           f"capture samples of {inp.path} ({MIN_WINDOW_SAMPLES * step:g} s)")


def parse_bounds(spec: str | None, names: list[str]) -> dict[str, tuple[float, float]]:
    """``"mu=0.05:0.6,backlash=0:8"`` over the defaults; FitError for bad input."""
    check_names(names)
    return parse_bounds_spec(spec, {n: FIT_BOUNDS[n] for n in names}, FitError,
                             f"--params {','.join(names)}")


def _physics(values: dict, options: dict) -> dict:
    """simulate_replay's keywords for these values (and fixed options)."""
    mu = values.get("mu")
    mu_x, mu_y = values.get("mu_x", mu), values.get("mu_y", mu)
    if "ratio" in values and mu is not None:
        mu_x = 2.0 * mu / (1.0 + values["ratio"])
        mu_y = values["ratio"] * mu_x
    backlash = values.get("backlash")
    return {**options, "mu_x": mu_x, "mu_y": mu_y,
            "backlash": None if backlash is None else math.radians(backlash)}


def _simulate(args) -> Paths | str:
    """One trial's replay (a task of the executor): paths, or the error."""
    inp, physics = args
    try:
        paths, _, _ = simulate_replay(inp, **physics)
    except (AikoError, FloatingPointError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return paths


def _error(inp: ReplayInput, paths, delay: float) -> float:
    if isinstance(paths, str):
        return PENALTY
    try:
        return compare_paths(shifted(inp, paths, delay))["rms_error_m"]
    except ComparisonError:
        return PENALTY


@dataclass
class FitResult:
    names: list[str]
    bounds: dict
    start: dict
    fitted: dict
    error_before: float           # m, mean RMS over the trials
    error_after: float
    simulations: int              # replays run (one per trial per evaluation)
    evaluations: int
    wall_s: float
    method: str
    message: str
    history: list = field(default_factory=list)   # (values dict, Objective.error) per evaluation
    per_trial: list = field(default_factory=list)  # metrics with the fitted values
    options: dict = field(default_factory=dict)   # the fixed replay settings
    ranges: dict[str, Range] = field(default_factory=dict)    # per parameter, 95 %
    derived: dict[str, Range] = field(default_factory=dict)   # the friction's ratio, mean
    curvature: Curvature | None = None
    profiles: dict = field(default_factory=dict)   # name -> (values, S) with the optimum
    noise_mm: float = NOISE_MM
    window: float = 0.0          # s, the residuals' windows (0: sample by sample)
    aligned: tuple[float, float] = (math.nan, math.nan)   # m, the residuals' mean RMS before, after
    search_wall_s: float = 0.0    # the search alone, before the ranges
    paths: list = field(default_factory=list)      # each trial's replay at the fit

    def physics(self) -> dict:
        """The fitted values as simulate_replay's keywords (with the options)."""
        return _physics(self.fitted, self.options)

    def floor_rms_m(self) -> float:
        """The RMS distance (m) the motion capture's noise alone leaves
        between experiment and a perfect model (x and y each ``noise_mm``)."""
        return math.sqrt(2.0) * self.noise_mm / 1000.0

    def not_identifiable(self) -> list[str]:
        return [n for n, r in self.ranges.items() if not r.identifiable]

    def to_dict(self) -> dict:
        from aiko.experiments.analysis.fit_report import report_dict

        return report_dict(self)


# ------------------------------------------------------------------ searches
SCALES = (0.4, 0.5, 0.63, 0.8, 0.9, 1.1, 1.25, 1.6, 2.0)
"""Factors of the friction's scale the least-squares search tries between
its two runs (friction's ratio and the rest held)."""

FRICTION = ("mu", "mu_x", "mu_y")
"""The parameters the scale's scan multiplies (a ratio it leaves)."""


def _least_squares(obj: Objective, z0: np.ndarray, evaluations: int, track):
    """One run of scipy's least_squares from ``z0`` (unit coordinates),
    ``evaluations`` at most (a Jacobian counting one a parameter): its result."""
    from scipy.optimize import least_squares

    sims_per_iteration = 1 + sum(n != "delay" for n in obj.names)

    def fun(z):
        values = obj.values(z)
        paths = obj.paths([values])[0]
        obj.record(values, paths)
        track()
        return obj.residuals(values, paths)

    return least_squares(fun, np.clip(z0, 1e-6, 1.0 - 1e-6),
                         jac=lambda z: obj.jacobian(z, step=STEP), bounds=(0.0, 1.0),
                         method="trf", x_scale=np.ones(len(z0)),
                         max_nfev=max(2, evaluations // sims_per_iteration),
                         xtol=5e-3, ftol=1e-3, gtol=1e-10)


def _scale_scan(obj: Objective, z: np.ndarray, track) -> np.ndarray:
    """The point of :data:`SCALES` times the friction at ``z`` (every
    friction parameter multiplied, the rest held) with the least cost, or
    ``z`` if none is lower: the friction's scale is the direction the
    residuals see least (slow motion is nearly independent of it), where a
    local search on a rough cost stalls. One replay of every trial per
    factor, all together."""
    here = obj.values(z)
    names = [n for n in FRICTION if n in obj.names]
    points = []
    for f in SCALES:
        v = {**here, **{n: here[n] * f for n in names}}
        if all(obj.lo[obj.names.index(n)] <= v[n] <= obj.hi[obj.names.index(n)] for n in names):
            points.append(v)
    if not names or not points:
        return z
    for v, paths in zip(points, obj.paths(points), strict=True):
        obj.record(v, paths)
    track()
    costs = [obj.cost(v) for v in points]
    k = int(np.argmin(costs))
    return obj.unit(points[k]) if costs[k] < obj.cost(here) else z


def _search_least_squares(obj: Objective, start: dict, budget: int, track):
    """scipy's least_squares from ``start`` in unit coordinates on half the
    budget, the friction's scale scanned (:func:`_scale_scan`), least
    squares again from the best on the rest: (z, message, J and residuals
    at z)."""
    n = len(obj.inputs)
    res = _least_squares(obj, obj.unit(start), budget // 2, track)
    if not any(name in obj.names for name in FRICTION):
        return res.x, str(res.message), res.jac, res.fun
    z = _scale_scan(obj, res.x, track)
    left = budget - obj.simulations // n
    res = _least_squares(obj, z, max(left, 0), track)
    return res.x, str(res.message), res.jac, res.fun


def _search_derivative_free(obj: Objective, start: dict, method: str, budget: int, track):
    """Nelder-Mead or differential evolution on the mean RMS error, the
    delay (if fitted) the best for each evaluation's replays: z (all
    coordinates) and the message."""
    from scipy import optimize

    search = [n for n in obj.names if n != "delay"]

    def evaluate(z) -> float:
        values = obj.values(z, search)
        paths = obj.paths([values])[0]
        values = obj.best_delay(values, paths)
        err = obj.record(values, paths)
        track()
        return err

    def full(z) -> np.ndarray:
        values = obj.values(z, search)
        values = obj.best_delay(values, obj.paths([values])[0])
        return obj.unit(values)

    d = len(search)
    if d == 0:   # the delay alone: one simulation, a scalar search
        return full(np.zeros(0)), "the delay alone: a bounded scalar search"
    z0 = obj.unit(start, search)
    if method == "nelder-mead":
        simplex = [z0]
        for i in range(d):
            z = z0.copy()
            z[i] = z[i] + 0.25 if z[i] + 0.25 <= 1.0 else z[i] - 0.25
            simplex.append(z)
        res = optimize.minimize(evaluate, z0, method="Nelder-Mead", bounds=[(0.0, 1.0)] * d,
                                options={"initial_simplex": np.array(simplex),
                                         "maxfev": budget, "xatol": 1e-2, "fatol": 1e-5})
        return full(res.x), str(res.message)
    popsize = max(4, int(math.ceil(8 / d)))

    def mapper(f, zs):
        zs = list(zs)
        obj.paths([obj.values(z, search) for z in zs])      # the generation together
        return [evaluate(z) for z in zs]

    res = optimize.differential_evolution(
        evaluate, [(0.0, 1.0)] * d, popsize=popsize, maxiter=max(1, budget // (popsize * d) - 1),
        updating="deferred", workers=mapper, polish=False, seed=1, tol=1e-4, x0=z0)
    return full(res.x), str(res.message)


# ---------------------------------------------------------------------- fit
def _start(inputs, names, bounds, start) -> dict:
    """The search's start: ``start``'s values, else the friction the trials
    were run with (each coefficient's median over the trials, so the order
    they are given in does not matter), 2 degrees of free play, no delay;
    within the bounds."""
    mu_x = float(np.median([inp.params.mu_x for inp in inputs]))
    mu_y = float(np.median([inp.params.mu_y for inp in inputs]))
    default = {"mu": 0.5 * (mu_x + mu_y), "mu_x": mu_x, "mu_y": mu_y,
               "ratio": mu_y / mu_x, "backlash": 2.0, "delay": 0.0}
    out = {n: (start or {}).get(n, default[n]) for n in names}
    return {n: min(max(v, bounds[n][0]), bounds[n][1]) for n, v in out.items()}


def _per_trial(inputs, paths, delay: float) -> list[dict]:
    out = []
    for inp, p in zip(inputs, paths, strict=True):
        try:
            m = compare_paths(shifted(inp, p, delay))
        except (ComparisonError, TypeError, AttributeError):
            m = {"error": p if isinstance(p, str) else "no comparison"}
        out.append({"trial": str(inp.path), **m})
    return out


def _centre(obj: Objective, fitted: dict, paths: list, ranges: dict, message: str):
    """The profiles' centre (each parameter's parabola's vertex) in place of
    the search's point if it explains the trials better: a search on a rough
    cost stops in one of its dips. (fitted, paths, message)."""
    centre = {n: ranges[n].value for n in obj.names}
    if all(abs(centre[n] - fitted[n]) <= 1e-12 for n in obj.names):
        return fitted, paths, message
    at = obj.paths([centre])[0]
    centre = obj.best_delay(centre, at)
    obj.record(centre, at)
    if obj.cost(centre, at) < obj.cost(fitted, paths):
        return centre, at, message + "; the profiles' centre fits better than the search's end"
    return fitted, paths, message


def _at_fit(obj: Objective, ranges: dict, derived: dict, fitted: dict):
    """Every range's value the fit's (a parameter's, and a derived quantity
    of the fitted values): one point that explains the trials, where the
    profiles' vertices, each found on its own, need not be one. Each range
    stretched to hold it; a parameter's judged by its width too
    (:func:`~aiko.experiments.analysis.fit_ranges.judge_width`)."""
    ranges = {n: at_value(r, fitted[n], (float(obj.lo[i]), float(obj.hi[i])))
              for i, (n, r) in enumerate(ranges.items())}
    ranges = {n: r if n == "delay" else judge_width(r) for n, r in ranges.items()}
    at = derived_values(fitted)
    return ranges, {k: at_value(r, at[k]) for k, r in derived.items()}


def fit_trials(inputs: list[ReplayInput], names: list[str], *, bounds=None, start=None,
               servo: str | None = None, u_tol: float | None = None,
               max_iter: int | None = None, dt: float | None = None,
               method: str = "least-squares", budget: int = 60, noise_mm: float = NOISE_MM,
               profile_points: int = PROFILE_POINTS, profile_refit: int = 0,
               window: float = WINDOW, executor=None, progress=None) -> FitResult:
    """Fit ``names`` (see the module docstring) to the trials ``inputs``
    (taken in the order of their paths, so that the order they are given in
    changes nothing; the trials' results come back in the order given).
    ``start``: initial values (default: the trials' median friction, backlash 2
    deg, delay 0); ``servo``, ``u_tol``, ``max_iter``, ``dt``: fixed replay
    settings; ``budget``: evaluations of the search at most; ``noise_mm``:
    the motion capture's noise the residuals are weighed by; ``window``:
    the windows (s) the replay is aligned in (0: sample by sample);
    ``profile_points``: a profile's points per parameter (0: the ranges from
    the curvature alone); ``profile_refit``: least-squares evaluations that
    re-fit the others at each profile point (0: one Gauss-Newton step);
    ``progress(evaluations, best)``."""
    from aiko.experiments.analysis.fit_uncertainty import parameter_ranges

    if not inputs:
        raise FitError("no trials to fit")
    check_options(method, noise_mm, profile_points, profile_refit, window)
    check_names(names)
    check_windows(inputs, window)
    bounds = {n: FIT_BOUNDS[n] for n in names} if bounds is None else bounds
    given = list(inputs)
    order = sorted(range(len(given)), key=lambda k: str(given[k].path))
    inputs = [given[k] for k in order]   # the same fit whatever the order given
    start = _start(inputs, names, bounds, start)
    options = {"servo": servo, "u_tol": u_tol, "max_iter": max_iter, "dt": dt}
    obj = Objective(inputs, names, bounds, noise_mm / 1000.0, lambda v: _physics(v, options),
                    _simulate, _error, executor, window)

    def track() -> None:
        if progress is not None:
            progress(len(obj.history), min(err for _, err in obj.history))

    w0 = time.perf_counter()
    at_start = obj.paths([dict(start)])[0]
    obj.record(dict(start), at_start)
    e0 = obj.mean_error(at_start, start.get("delay", 0.0))
    a0 = obj.aligned_error(start, at_start)
    if method == "least-squares":
        z, message, J, r = _search_least_squares(obj, start, budget, track)
    else:
        z, message = _search_derivative_free(obj, start, method, budget, track)
        J, r = None, None
    fitted = obj.values(z)
    paths = obj.paths([fitted])[0]
    search_s = time.perf_counter() - w0
    evaluations = len(obj.history)
    ranges, derived, cur, profiles = parameter_ranges(obj, z, fitted, J, r, profile_points,
                                                      profile_refit)
    if profiles:
        fitted, paths, message = _centre(obj, fitted, paths, ranges, message)
    ranges, derived = _at_fit(obj, ranges, derived, fitted)
    e1 = obj.mean_error(paths, fitted.get("delay", 0.0))
    a1 = obj.aligned_error(fitted, paths)
    paths = [paths[order.index(k)] for k in range(len(given))]   # in the order given
    return FitResult(list(names), bounds, start, fitted, e0, e1, obj.simulations,
                     evaluations, time.perf_counter() - w0, method, message, obj.history,
                     _per_trial(given, paths, fitted.get("delay", 0.0)), options, ranges,
                     derived, cur, profiles, noise_mm, window, (a0, a1), search_s, paths)
