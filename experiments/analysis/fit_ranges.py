"""What a fit's residuals say about its parameters: 95 % ranges from the
curvature at the optimum and from profiles, correlations, identifiability,
and derived quantities (the friction's ratio and mean).

The fit minimises S = sum r^2 over N residuals in the coordinates z of the
bounds' unit box (:mod:`~aiko.experiments.analysis.fit_residuals`). At the
optimum, with J (N, d) the residuals' Jacobian there:

* the residuals' variance, s^2 = S / (N - d) (1 if the model explained the
  data but for the motion capture's noise);
* the residuals of a path are correlated in time, so N samples are worth
  N_eff independent ones (:func:`~aiko.experiments.analysis.fit_residuals.
  effective_samples`) and every variance grows by kappa = N / N_eff;
* the covariance of the parameters, C = kappa s^2 (J^T J)^+, a standard error
  per parameter and the correlations between them (Gauss-Newton's
  curvature, as scipy's curve_fit and lmfit give it);
* the 95 % range of one parameter where its profile, S with the others
  re-fitted, stays within 3.84 kappa s^2 of the least S seen (the
  profile-likelihood range of Raue et al., Bioinformatics 2009, for one
  parameter). A profile costs one simulation a point: the others are
  re-fitted by one Gauss-Newton step from the optimum with its Jacobian, a
  delay exactly (it needs no simulation).

A parameter is identifiable from these trials when its range stays inside
its bounds (a profile that stays under the threshold to a bound, or is flat
over them, is not) and, but for a delay, is narrower than its value; a
derived quantity when its range (the curvature's, through its gradient) is
narrower than its value. Pure: arrays in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np

__all__ = ["CHI2_95", "Range", "Curvature", "curvature", "curvature_range",
           "profile_values", "profile_step", "profile_range", "profile_parabola", "roughness",
           "derived_friction", "derived_values", "widen_by_points", "at_value", "judge_width"]

CHI2_95 = 3.841458820694124
"""The chi-square quantile of one degree of freedom at 95 %."""


@dataclass(frozen=True)
class Range:
    """A value and its 95 % range (the parameter's units)."""

    value: float
    low: float
    high: float
    identifiable: bool
    source: str                   # "profile" or "curvature"
    reason: str = ""              # why not identifiable
    se: float | None = None       # standard error from the curvature

    def to_dict(self) -> dict:
        """For JSON: an infinite standard error as None."""
        out = asdict(self)
        if out["se"] is not None and not math.isfinite(out["se"]):
            out["se"] = None
        return out


@dataclass(frozen=True)
class Curvature:
    """The statistics at the optimum (module docstring): covariance C (d, d)
    in the parameters' units (infinite where a direction the residuals do
    not see has weight), the residuals' s^2, kappa = N / N_eff, N; and, for
    the variance of a combination, the finite part of (J^T J)^+ and the
    unseen directions in unit coordinates, and the unit -> parameter scale."""

    C: np.ndarray
    s2: float
    kappa: float
    n: int
    n_eff: float
    Cz_seen: np.ndarray
    unseen: np.ndarray            # (d, m)
    scale: np.ndarray             # (d,)

    @property
    def threshold(self) -> float:
        """The rise of S that bounds a 95 % range: 3.84 kappa s^2."""
        return CHI2_95 * self.kappa * self.s2

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(np.clip(np.diag(self.C), 0.0, np.inf))

    def correlations(self) -> np.ndarray:
        se = self.se
        with np.errstate(invalid="ignore", divide="ignore"):
            R = self.C / np.outer(se, se)
        return np.where(np.isfinite(R), R, 0.0)

    def variance(self, gz: np.ndarray) -> float:
        """The variance of a quantity with gradient ``gz`` (d,) in unit
        coordinates: infinite if it moves along an unseen direction."""
        gz = np.asarray(gz, float)
        if self.unseen.size and np.any(np.abs(gz @ self.unseen) > 1e-6 * np.linalg.norm(gz)):
            return math.inf
        return float(gz @ self.Cz_seen @ gz) * self.kappa * self.s2


def curvature(J: np.ndarray, r: np.ndarray, n_eff: float, scale: np.ndarray,
              taken: int = 0) -> Curvature:
    """The statistics of the optimum from the Jacobian ``J`` (N, d) in unit
    coordinates, the residuals ``r`` (N,) there, the effective sample count,
    ``scale`` (d,) the bounds' widths (unit -> parameter units) and ``taken``
    the degrees of freedom the residuals lost besides the d parameters (the
    windows' alignments). A direction the residuals do not see gets an
    infinite variance."""
    n, d = J.shape
    S = float(r @ r)
    s2 = S / max(n - d - taken, 1)
    kappa = n / max(n_eff, 1.0)
    w, V = np.linalg.eigh(J.T @ J)
    seen = w > max(float(w.max(initial=0.0)), 1e-300) * 1e-12
    Cz_seen = (V[:, seen] / w[seen]) @ V[:, seen].T
    Cz = Cz_seen.copy()
    for k in np.flatnonzero(~seen):          # unseen: no bound where it has weight
        hit = np.abs(V[:, k]) > 1e-6
        Cz[np.ix_(hit, hit)] = np.inf
    scale = np.asarray(scale, float)
    C = Cz * np.outer(scale, scale) * kappa * s2
    return Curvature(C, s2, kappa, n, n_eff, Cz_seen, V[:, ~seen], scale)


def _reached(low: float, high: float, bounds: tuple[float, float]) -> list[str]:
    """The sides ("lower", "upper") of ``bounds`` a range low..high reaches."""
    return [side for side, out in (("lower", low <= bounds[0]), ("upper", high >= bounds[1]))
            if out]


def curvature_range(value: float, se: float, bounds: tuple[float, float]) -> Range:
    """value +- 1.96 se, clipped to the bounds; not identifiable if clipped."""
    lo, hi = bounds
    if not math.isfinite(se):
        return Range(value, lo, hi, False, "curvature", "the residuals do not see it", se)
    low, high = value - 1.959964 * se, value + 1.959964 * se
    sides = _reached(low, high, bounds)
    reason = f"reaches the {sides[0]} bound" if sides else ""
    return Range(value, max(low, lo), min(high, hi), not reason, "curvature", reason, se)


def profile_values(value: float, se: float, bounds: tuple[float, float],
                   points: int, span_se: float = 4.0, min_span: float = 0.0) -> np.ndarray:
    """Where to profile one parameter: ``points`` values either side of
    ``value`` out to ``span_se`` standard errors or ``min_span``, whichever
    is more (the whole bounds if the curvature sees no such width), shared
    between the sides by the room each has."""
    lo, hi = bounds
    span = max(span_se * se, min_span) if math.isfinite(se) and se > 0 else hi - lo
    left, right = min(span, value - lo), min(span, hi - value)
    if left + right <= 0 or points <= 0:
        return np.zeros(0)
    n_left = int(round(points * left / (left + right)))
    n_left = min(max(n_left, 1 if left > 0 else 0), points - (1 if right > 0 else 0))
    n_right = points - n_left
    out = [value - left * k / n_left for k in range(n_left, 0, -1)] if n_left else []
    out += [value + right * k / n_right for k in range(1, n_right + 1)] if n_right else []
    return np.array(out)


def profile_step(J: np.ndarray, r: np.ndarray, i: int, dz_i: float) -> np.ndarray:
    """The step (d,) in unit coordinates that moves coordinate ``i`` by
    ``dz_i`` and re-fits the others by one Gauss-Newton step with the
    optimum's Jacobian ``J`` and residuals ``r`` (truncated: see below)."""
    d = J.shape[1]
    dz = np.zeros(d)
    dz[i] = dz_i
    others = [k for k in range(d) if k != i]
    if others:
        target = -(r + J[:, i] * dz_i)
        # directions the others barely see (a hundredth of the strongest)
        # are left alone: a step along them is large and not linear
        dz[others] = np.linalg.lstsq(J[:, others], target, rcond=0.01)[0]
    return dz


def _parabola(v: np.ndarray, c: np.ndarray):
    """A parabola through a profile's samples in u = (v - x0) / width: x0,
    width, its coefficients and the samples' scatter about it (RMS, with the
    three coefficients' degrees of freedom taken off)."""
    x0, width = float(v.mean()), float(v[-1] - v[0]) or 1.0
    u = (v - x0) / width
    coef = np.polyfit(u, c, 2)
    rough = float(np.sqrt(np.sum((c - np.polyval(coef, u)) ** 2) / max(v.size - 3, 1)))
    return x0, width, coef, rough


def profile_parabola(values: np.ndarray, costs: np.ndarray):
    """The parabola of a profile (:func:`profile_range`) as a function of
    the parameter, and the samples' scatter about it; None under three."""
    if len(values) < 3:
        return None
    order = np.argsort(values)
    x0, width, coef, rough = _parabola(np.asarray(values, float)[order],
                                       np.asarray(costs, float)[order])
    return (lambda x: np.polyval(coef, (np.asarray(x, float) - x0) / width)), rough


def roughness(values: np.ndarray, costs: np.ndarray) -> float:
    """The scatter of a profile's costs about their parabola (0 under four
    samples)."""
    if len(values) < 4:
        return 0.0
    order = np.argsort(values)
    return _parabola(np.asarray(values, float)[order], np.asarray(costs, float)[order])[3]


def profile_range(values: np.ndarray, costs: np.ndarray, threshold: float,
                  bounds: tuple[float, float], se: float | None = None) -> Range:
    """The 95 % range of a profile sampled at ``values`` (the optimum among
    them) with costs S. The cost of a replay is rough: a step of a tenth of
    a degree of free play can move S by several thresholds, since the
    replay's contacts and free play change their timing. So a parabola is
    fitted to the samples, and the range is where it stays within
    ``threshold`` plus twice the samples' scatter about it of its least
    (to the bounds where it is flat or opens downward). The value is the
    parabola's vertex."""
    order = np.argsort(values)
    v, c = np.asarray(values, float)[order], np.asarray(costs, float)[order]
    lo, hi = bounds
    if v.size < 3:
        return Range(float(v[int(np.argmin(c))]), lo, hi, False, "profile",
                     "too few profile points", se)
    x0, width, (a, b, _), rough = _parabola(v, c)
    level = threshold + 2.0 * rough
    if a <= level * 1e-9:
        return Range(float(v[int(np.argmin(c))]), lo, hi, False, "profile",
                     "flat within the noise over its bounds", se)
    vertex = -b / (2 * a)
    half = math.sqrt(level / a)
    low, high = x0 + width * (vertex - half), x0 + width * (vertex + half)
    sides = _reached(low, high, bounds)
    reason = ("flat within the noise over its bounds" if len(sides) == 2 else
              f"reaches the {sides[0]} bound" if sides else "")
    return Range(min(max(x0 + width * vertex, lo), hi), max(low, lo), min(high, hi),
                 not reason, "profile", reason, se)


def _derived(value: float, gz: np.ndarray, cur: Curvature, widen: float) -> Range:
    var = cur.variance(gz)
    se = widen * math.sqrt(var) if var >= 0 else math.inf
    ok = math.isfinite(se) and 1.959964 * se < 0.5 * abs(value)
    # a friction, its ratio and its mean are positive
    low, high = max(value - 1.959964 * se, 0.0), value + 1.959964 * se
    reason = "" if ok else "its range is wider than its value"
    return Range(value, low, high, ok, "curvature", reason, se)


def derived_values(values: dict) -> dict[str, float]:
    """The friction's derived quantities of a point's values: ratio and mean
    from mu_x and mu_y, mu_x and mu_y from a mean and ratio; none else."""
    if "mu_x" in values and "mu_y" in values:
        return {"mu_y/mu_x": values["mu_y"] / values["mu_x"],
                "mu": 0.5 * (values["mu_x"] + values["mu_y"])}
    if "mu" in values and "ratio" in values:
        mu_x = 2.0 * values["mu"] / (1.0 + values["ratio"])
        return {"mu_x": mu_x, "mu_y": values["ratio"] * mu_x}
    return {}


def derived_friction(values_at: Callable[[np.ndarray], dict], z: np.ndarray, cur: Curvature,
                     step: float, z_value: np.ndarray | None = None,
                     widen: float = 1.0) -> dict[str, Range]:
    """The friction's ratio and mean from mu_x, mu_y, or mu_x and mu_y from
    a mean and ratio, at unit coordinates ``z_value`` (default ``z``;
    ``values_at(z)`` the parameters' values), with their ranges through
    their gradients at ``z`` (the delta method), taken by the same forward
    differences as the Jacobian behind ``cur`` so that a direction it cannot
    see is the same for both; their standard errors times ``widen`` (the
    cost's roughness, as the profiles found it)."""
    base = derived_values(values_at(z))
    if not base:
        return {}
    grads = {k: np.zeros(len(z)) for k in base}
    for i in range(len(z)):
        h = step if z[i] + step <= 1.0 else -step
        zi = np.array(z, float)
        zi[i] += h
        moved = derived_values(values_at(zi))
        for k in base:
            grads[k][i] = (moved[k] - base[k]) / h
    value = base if z_value is None else derived_values(values_at(z_value))
    return {k: _derived(value[k], grads[k], cur, widen) for k in base}


def _stretch(r: Range, low: float, high: float, value: float,
             bounds: tuple[float, float] | None, source: str) -> Range:
    """``r`` with a new value and a range that holds the old one, judged
    again: a parameter's reaching a bound, a derived quantity's (no
    ``bounds``) growing wider than its value (:func:`judge_width`), ends
    identifiability."""
    moved = replace(r, value=value, low=low, high=high, source=source)
    if bounds is None:
        return judge_width(moved)
    sides = _reached(low, high, bounds)
    ok = r.identifiable and not sides
    reason = r.reason or ("" if ok else f"reaches the {sides[0]} bound")
    return replace(moved, identifiable=ok, reason=reason)


def widen_by_points(r: Range, values: np.ndarray, rise: np.ndarray, level: float,
                    bounds: tuple[float, float] | None = None) -> Range:
    """``r`` stretched to hold every value among ``values`` (k,) whose point
    the fit evaluated with a cost ``rise`` (k,) over the least seen no
    higher than ``level``: the profile at such a value (the least cost with
    the others free) is at most that point's, so no 95 % range may leave it
    out. A local profile of a rough cost can miss a second dip that a
    search or the friction's scan has already found. ``bounds``: a
    parameter's (see :func:`_stretch`)."""
    inside = np.asarray(values, float)[np.asarray(rise, float) <= level]
    inside = inside[np.isfinite(inside)]
    if inside.size == 0 or (inside.min() >= r.low and inside.max() <= r.high):
        return r
    return _stretch(r, min(r.low, float(inside.min())), max(r.high, float(inside.max())),
                    r.value, bounds, f"{r.source} and evaluated points")


def judge_width(r: Range) -> Range:
    """``r`` not identifiable if its range is as wide as its value or wider
    (for a magnitude: a friction, a ratio, a free play; not a delay, whose
    zero is no scale), as a derived quantity's already is: a range from a
    tenth to twice the value stays inside the bounds, yet says little."""
    if not r.identifiable or r.high - r.low < abs(r.value):
        return r
    return replace(r, identifiable=False, reason="its range is wider than its value")


def at_value(r: Range, value: float, bounds: tuple[float, float] | None = None) -> Range:
    """``r`` with ``value`` as its value (the fit's point), stretched to
    hold it (see :func:`_stretch`)."""
    if r.value == value:
        return r
    return _stretch(r, min(r.low, value), max(r.high, value), value, bounds, r.source)
