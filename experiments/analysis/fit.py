"""Identify model parameters from logged trials: minimise the comparison
error of their replays.

The objective is the mean over the trials of the RMS distance (m) between the
experiment's and the replay's link 6 (:func:`~aiko.experiments.analysis.compare.
compare_paths`). Parameters (``FIT_BOUNDS``): floor friction ``mu``
(isotropic) or ``mu_x``/``mu_y``, free play ``backlash`` (degrees; the replay
then runs through the emulated modules' motors) and motion capture's
``delay`` (s; a shift of the experiment's times, which needs no new
simulation). scipy.optimize does the search, bounded and derivative-free, in
coordinates scaled to the unit box: Nelder-Mead (default; the trials of one
evaluation run in parallel on the executor) or differential evolution (many
evaluations in parallel on the executor). The delay is not a coordinate of
that search: every evaluation takes the best delay for its replays (a bounded
scalar search on the cached paths), so it costs nothing and absorbs the
timing of the motion-capture stream instead of biasing the friction.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from aiko.experiments.analysis.bounds import parse_bounds_spec
from aiko.experiments.analysis.compare import ComparisonError, Paths, compare_paths
from aiko.experiments.analysis.replay import ReplayInput
from aiko.experiments.analysis.replay_files import shifted, simulate_replay
from aiko.model.errors import AikoError

__all__ = ["FIT_BOUNDS", "FitError", "FitResult", "fit_trials", "parse_bounds"]

FIT_BOUNDS = {"mu": (0.02, 1.0), "mu_x": (0.02, 1.0), "mu_y": (0.02, 1.0),
              "backlash": (0.0, 10.0), "delay": (-0.3, 0.3)}
"""Default search bounds: friction (-), backlash (deg), delay (s)."""

PENALTY = 10.0
"""Objective (m) of a replay that fails (a diverging step): far worse than any fit."""


class FitError(AikoError):
    pass


def check_names(names: list[str]) -> None:
    unknown = [n for n in names if n not in FIT_BOUNDS]
    if unknown or not names:
        raise FitError(f"--params: unknown {', '.join(unknown) or '(none)'}; choose from "
                       f"{', '.join(FIT_BOUNDS)}")
    if "mu" in names and ("mu_x" in names or "mu_y" in names):
        raise FitError("--params: fit mu, or mu_x and mu_y, not both")


def parse_bounds(spec: str | None, names: list[str]) -> dict[str, tuple[float, float]]:
    """``"mu=0.05:0.6,backlash=0:8"`` over the defaults; FitError for bad input."""
    check_names(names)
    return parse_bounds_spec(spec, {n: FIT_BOUNDS[n] for n in names}, FitError,
                             f"--params {','.join(names)}")


def _physics(values: dict, options: dict) -> dict:
    """simulate_replay's keywords for these values (and fixed options)."""
    mu = values.get("mu")
    backlash = values.get("backlash")
    return {**options, "mu_x": values.get("mu_x", mu), "mu_y": values.get("mu_y", mu),
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
    history: list = field(default_factory=list)   # (values dict, error) per evaluation
    per_trial: list = field(default_factory=list)  # metrics with the fitted values
    options: dict = field(default_factory=dict)   # the fixed replay settings

    def physics(self) -> dict:
        """The fitted values as simulate_replay's keywords (with the options)."""
        return _physics(self.fitted, self.options)

    def to_dict(self) -> dict:
        return {"names": self.names, "bounds": self.bounds, "start": self.start,
                "fitted": self.fitted, "error_before_m": self.error_before,
                "error_after_m": self.error_after, "simulations": self.simulations,
                "evaluations": self.evaluations, "wall_s": self.wall_s,
                "method": self.method, "message": self.message, "per_trial": self.per_trial}


class _Objective:
    """Mean RMS error over the trials for unit-box coordinates; caches the
    replays by their physical parameters (a delay needs no new simulation)."""

    def __init__(self, inputs, names, bounds, fixed, options, executor):
        self.inputs = inputs
        self.profile_delay = "delay" in names
        self.delay_bounds = bounds.get("delay", (0.0, 0.0))
        names = [n for n in names if n != "delay"]
        self.names = names
        self.lo = np.array([bounds[n][0] for n in names])
        self.hi = np.array([bounds[n][1] for n in names])
        self.fixed = fixed
        self.options = options
        self.executor = executor
        self.cache: dict = {}
        self.simulations = 0
        self.history: list = []

    def values(self, z) -> dict:
        x = self.lo + np.clip(np.asarray(z, float), 0.0, 1.0) * (self.hi - self.lo)
        return {**self.fixed, **{n: float(v) for n, v in zip(self.names, x, strict=True)}}

    def unit(self, values: dict) -> np.ndarray:
        x = np.array([values[n] for n in self.names])
        return np.clip((x - self.lo) / (self.hi - self.lo), 0.0, 1.0)

    def _key(self, values: dict):
        return tuple(sorted((k, round(v, 12)) for k, v in values.items() if k != "delay"))

    def paths(self, batch: list[dict]) -> list[list]:
        """Replays of every trial for each set of values (new ones on the executor)."""
        todo: list = []
        for values in batch:
            key = self._key(values)
            if key not in self.cache and key not in [k for k, _ in todo]:
                todo.append((key, _physics(values, self.options)))
        if todo:
            jobs = [(inp, phys) for _, phys in todo for inp in self.inputs]
            mapper = self.executor.map if self.executor is not None else map
            results = list(mapper(_simulate, jobs))
            self.simulations += len(jobs)
            n = len(self.inputs)
            for i, (key, _) in enumerate(todo):
                self.cache[key] = results[i * n:(i + 1) * n]
        return [self.cache[self._key(v)] for v in batch]

    def mean_error(self, paths: list, delay: float) -> float:
        return float(np.mean([_error(inp, p, delay) for inp, p in
                              zip(self.inputs, paths, strict=True)]))

    def error(self, values: dict, paths: list, profile: bool = True) -> float:
        """Mean RMS error; with a profiled delay, at the best delay (set in
        ``values``)."""
        if self.profile_delay and profile:
            from scipy.optimize import minimize_scalar

            lo, hi = self.delay_bounds
            best = minimize_scalar(lambda d: self.mean_error(paths, d), bounds=(lo, hi),
                                   method="bounded", options={"xatol": 1e-3})
            values["delay"] = float(best.x)
        err = self.mean_error(paths, values.get("delay", 0.0))
        self.history.append((dict(values), err))
        return err

    def __call__(self, z) -> float:
        values = self.values(z)
        return self.error(values, self.paths([values])[0])

    def batch(self, zs) -> list[float]:
        """Many evaluations at once (their replays in parallel)."""
        vals = [self.values(z) for z in zs]
        return [self.error(v, p) for v, p in zip(vals, self.paths(vals), strict=True)]


def fit_trials(inputs: list[ReplayInput], names: list[str], *, bounds=None, start=None,
               servo: str | None = None, u_tol: float | None = None,
               max_iter: int | None = None, dt: float | None = None,
               method: str = "nelder-mead", budget: int = 60,
               executor=None, progress=None) -> FitResult:
    """Fit ``names`` (see the module docstring) to the trials ``inputs``.
    ``start``: initial values (default: the trials' own, backlash 2 deg,
    delay 0); ``servo``, ``u_tol``, ``max_iter``, ``dt``: fixed replay settings;
    ``budget``: evaluations at most; ``progress(evaluations, best)``."""
    if not inputs:
        raise FitError("no trials to fit")
    check_names(names)
    bounds = {n: FIT_BOUNDS[n] for n in names} if bounds is None else bounds
    p0 = inputs[0].params
    default = {"mu": 0.5 * (p0.mu_x + p0.mu_y), "mu_x": p0.mu_x, "mu_y": p0.mu_y,
               "backlash": 2.0, "delay": 0.0}
    start = {n: (start or {}).get(n, default[n]) for n in names}
    for n, v in start.items():
        lo, hi = bounds[n]
        start[n] = min(max(v, lo), hi)
    options = {"servo": servo, "u_tol": u_tol, "max_iter": max_iter, "dt": dt}
    obj = _Objective(inputs, names, bounds, {}, options, executor)
    w0 = time.perf_counter()
    e0 = obj.error(dict(start), obj.paths([dict(start)])[0], profile=False)
    best = [e0]

    def track(z=None, *args, **kwargs):
        if progress is not None:
            best[0] = min(err for _, err in obj.history)
            progress(len(obj.history), best[0])

    from scipy import optimize

    d = len(obj.names)
    if d == 0:   # the delay alone: one simulation, a scalar search
        z_best, message = np.zeros(0), "the delay alone: a bounded scalar search"
    elif method == "nelder-mead":
        z0 = obj.unit(start)
        simplex = [z0]
        for i in range(d):
            z = z0.copy()
            z[i] = z[i] + 0.25 if z[i] + 0.25 <= 1.0 else z[i] - 0.25
            simplex.append(z)
        res = optimize.minimize(obj, z0, method="Nelder-Mead", bounds=[(0.0, 1.0)] * d,
                                callback=track,
                                options={"initial_simplex": np.array(simplex),
                                         "maxfev": budget, "xatol": 1e-2, "fatol": 1e-5})
        z_best, message = res.x, str(res.message)
    elif method == "de":
        popsize = max(4, int(math.ceil(8 / d)))

        def mapper(f, zs):
            return obj.batch(list(zs))

        res = optimize.differential_evolution(
            obj, [(0.0, 1.0)] * d, popsize=popsize, maxiter=max(1, budget // (popsize * d) - 1),
            updating="deferred", workers=mapper, polish=False, seed=1, tol=1e-4,
            x0=obj.unit(start), callback=lambda *a, **k: track())
        z_best, message = res.x, str(res.message)
    else:
        raise FitError(f"unknown method {method!r} (nelder-mead, de)")
    fitted = obj.values(z_best)
    paths = obj.paths([fitted])[0]
    e1 = obj.error(fitted, paths)
    fitted = {n: fitted[n] for n in names}
    per_trial = []
    for inp, p in zip(inputs, paths, strict=True):
        try:
            m = compare_paths(shifted(inp, p, fitted.get("delay", 0.0)))
        except (ComparisonError, TypeError, AttributeError):
            m = {"error": p if isinstance(p, str) else "no comparison"}
        per_trial.append({"trial": str(inp.path), **m})
    return FitResult(list(names), bounds, start, fitted, e0, e1, obj.simulations,
                     len(obj.history), time.perf_counter() - w0, method, message,
                     obj.history, per_trial, options)
