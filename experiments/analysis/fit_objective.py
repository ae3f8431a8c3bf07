"""A fit's objective: replays of every trial for a set of parameter values
(cached, new ones together on the executor), their residuals (sample by
sample, or with the replay aligned in windows of ``window`` s), their mean
RMS error and the residuals' Jacobian.

Coordinates ``z`` are the parameters scaled to the bounds' unit box, in the
order of ``names``. A delay changes no replay: the cache is keyed by the
other values, so a delay's Jacobian column and its searches cost no
simulation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from aiko.experiments.analysis.fit_residuals import residuals, trial_samples

__all__ = ["Objective", "STEP"]

STEP = 0.05
"""Forward-difference step of the Jacobian in the unit box (5 % of a bound's
width: a replay's cost is rough below about that, and a step of 2 % left a
fit of three trials at 2.8 deg of free play where 3.4 explains them better)."""


class Objective:
    """See the module docstring. ``simulate((input, physics))`` runs one
    replay (paths, or a failed one's message); ``physics(values)`` gives its
    keywords; ``error(input, paths, delay)`` the RMS error (m) of one."""

    def __init__(self, inputs, names: list[str], bounds: dict, sigma: float,
                 physics: Callable, simulate: Callable, error: Callable, executor,
                 window: float = 0.0) -> None:
        self.inputs = inputs
        self.names = list(names)
        self.lo = np.array([bounds[n][0] for n in names], float)
        self.hi = np.array([bounds[n][1] for n in names], float)
        self.delay_bounds = bounds.get("delay", (0.0, 0.0))
        self.sigma = sigma
        self.window = float(window)
        self.samples = [trial_samples(inp, max(0.0, self.delay_bounds[1]), self.window)
                        for inp in inputs]
        self._physics = physics
        self._simulate = simulate
        self._error = error
        self.executor = executor
        self.cache: dict = {}
        self.simulations = 0
        self.history: list = []

    # ------------------------------------------------------------ coordinates
    def values(self, z, names: list[str] | None = None) -> dict:
        """Parameter values of unit coordinates ``z`` of ``names`` (default:
        all), the others absent."""
        names = self.names if names is None else names
        idx = [self.names.index(n) for n in names]
        x = self.lo[idx] + np.clip(np.asarray(z, float), 0.0, 1.0) * (self.hi - self.lo)[idx]
        return {n: float(v) for n, v in zip(names, x, strict=True)}

    def unit(self, values: dict, names: list[str] | None = None) -> np.ndarray:
        names = self.names if names is None else names
        idx = [self.names.index(n) for n in names]
        x = np.array([values[n] for n in names], float)
        return np.clip((x - self.lo[idx]) / (self.hi - self.lo)[idx], 0.0, 1.0)

    # ----------------------------------------------------------------- replays
    def _key(self, values: dict):
        return tuple(sorted((k, round(v, 12)) for k, v in values.items() if k != "delay"))

    def paths(self, batch: list[dict]) -> list[list]:
        """Replays of every trial for each set of values (new ones on the executor)."""
        todo: list = []
        for values in batch:
            key = self._key(values)
            if key not in self.cache and key not in [k for k, _ in todo]:
                todo.append((key, self._physics(values)))
        if todo:
            jobs = [(inp, phys) for _, phys in todo for inp in self.inputs]
            mapper = self.executor.map if self.executor is not None else map
            results = list(mapper(self._simulate, jobs))
            self.simulations += len(jobs)
            n = len(self.inputs)
            for i, (key, _) in enumerate(todo):
                self.cache[key] = results[i * n:(i + 1) * n]
        return [self.cache[self._key(v)] for v in batch]

    # ------------------------------------------------------------------ errors
    def mean_error(self, paths: list, delay: float) -> float:
        """Mean over the trials of the RMS error (m)."""
        return float(np.mean([self._error(inp, p, delay) for inp, p in
                              zip(self.inputs, paths, strict=True)]))

    def aligned_error(self, values: dict, paths: list) -> float:
        """Mean over the trials of the RMS distance (m) left after each
        window's alignment (the residuals' own measure)."""
        s = self.series(self.residuals(values, paths))
        per = [math.sqrt(float(np.mean(x ** 2 + y ** 2))) * self.sigma
               for x, y in zip(s[0::2], s[1::2], strict=True)]
        return float(np.mean(per))

    def error(self, values: dict, paths: list) -> float:
        """The scalar a derivative-free search minimises: the mean RMS
        error, after alignment if the residuals are windowed."""
        if self.window > 0:
            return self.aligned_error(values, paths)
        return self.mean_error(paths, values.get("delay", 0.0))

    def record(self, values: dict, paths: list) -> float:
        """:meth:`error` of an evaluation, kept in the history."""
        err = self.error(values, paths)
        self.history.append((dict(values), err))
        return err

    def residuals(self, values: dict, paths: list) -> np.ndarray:
        """All trials' residuals (N,) for these values (the delay's, or 0)."""
        delay = values.get("delay", 0.0)
        return np.concatenate([residuals(s, p, delay, self.sigma)
                               for s, p in zip(self.samples, paths, strict=True)])

    def cost(self, values: dict, paths: list | None = None) -> float:
        """S, the sum of the squared residuals, for these values (their
        replays: ``paths``, or the cache's, run if new)."""
        if paths is None:
            paths = self.paths([values])[0]
        return float(np.sum(self.residuals(values, paths) ** 2))

    @property
    def aligned_dof(self) -> int:
        """Degrees of freedom the windows' rigid motions take from the
        residuals (0 without windows)."""
        return sum(s.aligned_dof for s in self.samples)

    def series(self, r: np.ndarray) -> list[np.ndarray]:
        """``r`` cut into its series: per trial, x and y."""
        out, k = [], 0
        for s in self.samples:
            block = r[k:k + 2 * len(s)].reshape(-1, 2)
            out += [block[:, 0], block[:, 1]]
            k += 2 * len(s)
        return out

    def best_delay(self, values: dict, paths: list) -> dict:
        """``values`` with the delay that minimises the residuals of these
        replays (a bounded scalar search: no simulation)."""
        if "delay" not in self.names:
            return values
        from scipy.optimize import minimize_scalar

        lo, hi = self.delay_bounds
        res = minimize_scalar(lambda d: self.cost({**values, "delay": d}, paths),
                              bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
        return {**values, "delay": float(res.x)}

    # -------------------------------------------------------------- Jacobian
    def jacobian(self, z: np.ndarray, r0: np.ndarray | None = None,
                 step: float = STEP, columns: list[int] | None = None) -> np.ndarray:
        """(N, d) forward differences of the residuals in unit coordinates, a
        ``step`` toward the box's inside (only ``columns``, if given); the
        replays together."""
        z = np.asarray(z, float)
        base = self.values(z)
        points, steps = [], []
        for i in (range(len(z)) if columns is None else columns):
            h = step if z[i] + step <= 1.0 else -step
            zi = z.copy()
            zi[i] += h
            points.append(self.values(zi))
            steps.append(h)
        all_paths = self.paths([base, *points])
        if r0 is None:
            r0 = self.residuals(base, all_paths[0])
        cols = [(self.residuals(v, p) - r0) / h
                for v, p, h in zip(points, all_paths[1:], steps, strict=True)]
        return np.column_stack(cols) if cols else np.zeros((r0.size, 0))
