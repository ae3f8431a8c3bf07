"""A fit's report: fit.json's document, the table `aiko fit` prints and the
figure of the profiles."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from aiko.experiments.analysis.fit_ranges import CHI2_95, Range, profile_parabola

if TYPE_CHECKING:
    from aiko.experiments.analysis.fit import FitResult

__all__ = ["report_dict", "report_lines", "profiles_figure", "UNITS"]

UNITS = {"mu": "", "mu_x": "", "mu_y": "", "ratio": "", "mu_y/mu_x": "", "backlash": "deg",
         "delay": "s"}


def report_dict(res: FitResult) -> dict:
    """fit.json: the search, and per parameter and derived quantity
    ``{"value", "low", "high", "identifiable", ...}`` (a 95 % range)."""
    doc = {"names": res.names, "bounds": res.bounds, "start": res.start,
           "fitted": res.fitted, "error_before_m": res.error_before,
           "error_after_m": res.error_after, "simulations": res.simulations,
           "evaluations": res.evaluations, "wall_s": res.wall_s,
           "search_wall_s": res.search_wall_s, "method": res.method, "message": res.message,
           "per_trial": res.per_trial,
           "parameters": {n: r.to_dict() for n, r in res.ranges.items()},
           "derived": {n: r.to_dict() for n, r in res.derived.items()},
           "window_s": res.window,
           "noise": {"sigma_mm": res.noise_mm,
                     "floor_rms_m": res.floor_rms_m(),
                     "fit_rms_m": res.error_after,
                     "aligned_rms_m": res.aligned[1] if res.window > 0 else None,
                     "aligned_rms_before_m": res.aligned[0] if res.window > 0 else None}}
    cur = res.curvature
    if cur is not None:
        R = cur.correlations()
        doc["correlations"] = {"names": res.names,
                               "matrix": R.tolist()}          # finite: 0 where unseen
        doc["statistics"] = {"residuals": cur.n, "effective_samples": cur.n_eff,
                             "s2": cur.s2, "kappa": cur.kappa,
                             "threshold": cur.threshold}
    doc["profiles"] = {n: {"values": v.tolist(), "cost": c.tolist()}
                       for n, (v, c) in res.profiles.items()}
    return doc


def _row(name: str, r: Range) -> str:
    unit = UNITS.get(name, "")
    verdict = "identifiable" if r.identifiable else f"not identifiable ({r.reason})"
    return (f"{name:10s} {r.value:9.4f}  95 % {r.low:9.4f} .. {r.high:<9.4f} {unit:3s} "
            f"[{r.source}] {verdict}")


def report_lines(res: FitResult) -> list[str]:
    """The table `aiko fit` prints: start and fitted values, each range, the
    derived quantities, correlations above 0.8 and what is not identifiable."""
    lines = [f"{'':10s} {'start':>9s} -> fitted"]
    lines += [f"{n:10s} {res.start[n]:9.4f} -> {res.fitted[n]:9.4f} {UNITS[n]}"
              for n in res.names]
    lines += ["ranges (95 %):"] + [_row(n, r) for n, r in res.ranges.items()]
    lines += [_row(n, r) for n, r in res.derived.items()]
    if res.curvature is not None:
        R = res.curvature.correlations()
        for i, a in enumerate(res.names):
            for j in range(i + 1, len(res.names)):
                if abs(R[i, j]) >= 0.8:
                    lines.append(f"correlated: {a} and {res.names[j]} ({R[i, j]:+.2f})")
    lost = res.not_identifiable()
    pinned = [n for n, r in res.derived.items() if r.identifiable]
    if lost:
        tail = f"; {', '.join(pinned)} is" if pinned else ""
        lines.append(f"not identifiable from these trials: {', '.join(lost)}{tail}")
    return lines


def profiles_figure(res: FitResult):
    """A matplotlib Figure: each parameter's profile (the rise of S over its
    least, in units of kappa s^2, so 3.84 is the 95 % line of a smooth cost),
    the parabola fitted to it and the level its range is read at (the
    threshold plus twice the profile's roughness), the curvature's parabola,
    the range shaded, the bounds."""
    from matplotlib.figure import Figure

    names = [n for n in res.names if n in res.profiles]
    fig = Figure(figsize=(4.2 * max(1, len(names)), 3.8), layout="constrained")
    cur = res.curvature
    if not names or cur is None:
        fig.text(0.5, 0.5, "no profiles (curvature only)", ha="center")
        return fig
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names, strict=True):
        _profile_panel(ax, res, name, cur.threshold / CHI2_95)
    axes[0].set_ylabel("rise of S / (kappa s^2)")
    axes[0].legend(fontsize=7, loc="upper center")
    return fig


def _profile_panel(ax, res: FitResult, name: str, unit: float) -> None:
    v, c = res.profiles[name]
    order = np.argsort(v)
    v, c = v[order], c[order]
    rng = res.ranges[name]
    xs = np.linspace(min(v[0], rng.low), max(v[-1], rng.high), 200)
    fitted = profile_parabola(v, c)
    floor = c.min()
    top = 5.0 * CHI2_95
    ax.axvspan(rng.low, rng.high, color="#9ecae1", alpha=0.5, label="95 % range")
    if fitted is not None:
        curve, rough = fitted
        floor = min(floor, float(curve(xs).min()))
        level = CHI2_95 + 2.0 * rough / unit
        ax.plot(xs, (curve(xs) - floor) / unit, color="#6a3d9a", lw=1.2, label="its parabola")
        ax.axhline(level, color="#6a3d9a", lw=0.8, ls="--", label="level (with roughness)")
        top = max(top, 1.3 * level)
    ax.plot(v, (c - floor) / unit, "o-", color="#1f4e9c", lw=1.4, label="profile")
    if rng.se is not None and math.isfinite(rng.se) and rng.se > 0:
        ax.plot(xs, ((xs - res.fitted[name]) / rng.se) ** 2, ":", color="#d1495b", lw=1.2,
                label="curvature")
    ax.axhline(CHI2_95, color="k", lw=0.8, ls=":", label="3.84")
    ax.axvline(rng.value, color="#1f4e9c", lw=0.8)
    for b in res.bounds[name]:
        ax.axvline(b, color="0.5", lw=2.0)
    ax.set_ylim(-0.02 * top, top)              # steeper samples leave the top
    ax.set_xlim(xs[0], xs[-1])
    ax.set_xlabel(f"{name} ({UNITS.get(name) or '-'})")
    verdict = "identifiable" if rng.identifiable else "not identifiable"
    ax.set_title(f"{name} = {rng.value:.4g} [{rng.low:.4g}, {rng.high:.4g}]\n{verdict}",
                 fontsize=9)
