"""Sweep the model over a grid of gait and model parameters.

A grid is ``NAME=LO:HI:N`` (N values, both ends included) or ``NAME=V``,
comma-separated; names are the gait's keys of (70)-(71) and its steering
``offset``, in the gait file's units (degrees, degrees per second), and the
floor's friction ``mu`` (isotropic), ``mu_x``, ``mu_y``. Every point simulates the gait for the
given duration from its own start posture and reports link 6's displacement
(start to end, m), its mean speed, the heading of travel (deg) and the path
length; a point whose simulation fails (a diverging step) is a row with its
error. Points run on an executor (:mod:`aiko.experiments.analysis.executor`), local or
Dask, and come back in grid order, so the table does not depend on where they
ran.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from aiko.control.gait import Gait
from aiko.experiments.analysis.simulate import (
    LINK_OF_INTEREST,
    initial_state_for_gait,
    simulate_gait,
)
from aiko.experiments.files.scene_file import check_clear
from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams
from aiko.model.errors import AikoError
from aiko.model.scene import Scene

__all__ = ["SweepError", "parse_grid", "grid_points", "sweep_point", "run_sweep",
           "sweep_figure", "METRICS", "GRID_KEYS", "ROW_KEYS"]

GAIT_KEYS = ("A_h", "omega_h", "delta_h", "psi_h", "A_v", "omega_v", "delta_v", "delta_0",
             "psi_v", "offset")
MODEL_KEYS = ("mu", "mu_x", "mu_y")
GRID_KEYS = GAIT_KEYS + MODEL_KEYS
METRICS = {"distance": "distance_m", "speed": "speed_m_s", "heading": "heading_deg",
           "path": "path_m"}
ROW_KEYS = ("distance_m", "speed_m_s", "heading_deg", "path_m", "steps", "unconverged",
            "mean_iterations", "wall_s", "error")


class SweepError(AikoError):
    pass


def parse_grid(spec: str) -> dict[str, np.ndarray]:
    """``"mu=0.1:0.5:9,A_h=20:40:5"`` -> {name: values}; SweepError names the bad item."""
    grid: dict[str, np.ndarray] = {}
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        name, sep, rng = item.partition("=")
        name = name.strip()
        if not sep or name not in GRID_KEYS:
            raise SweepError(f"--grid {item!r}: expected NAME=LO:HI:N or NAME=V with NAME one "
                             f"of {', '.join(GRID_KEYS)}")
        if name in grid:
            raise SweepError(f"--grid {item!r}: {name} given twice")
        parts = rng.split(":")
        try:
            if len(parts) == 1:
                values = np.array([float(parts[0])])
            elif len(parts) == 3:
                lo, hi, n = float(parts[0]), float(parts[1]), int(parts[2])
                if n < 1:
                    raise ValueError
                # 12 significant digits: 0.3, not linspace's 0.30000000000000004
                values = np.array([float(f"{v:.12g}") for v in np.linspace(lo, hi, n)])
            else:
                raise ValueError
        except ValueError:
            raise SweepError(f"--grid {item!r}: expected LO:HI:N (N >= 1) or one value") from None
        if not np.all(np.isfinite(values)):
            raise SweepError(f"--grid {item!r}: values must be finite")
        if name in MODEL_KEYS and np.any(values < 0):
            raise SweepError(f"--grid {item!r}: friction must be >= 0")
        grid[name] = values
    if not grid:
        raise SweepError("--grid: no parameters")
    if "mu" in grid and ("mu_x" in grid or "mu_y" in grid):
        raise SweepError("--grid: vary mu, or mu_x/mu_y, not both")
    return grid


def grid_points(grid: dict[str, np.ndarray]) -> list[dict[str, float]]:
    """Every combination, the last name varying fastest."""
    names = list(grid)
    return [dict(zip(names, (float(v) for v in combo), strict=True))
            for combo in itertools.product(*(grid[n] for n in names))]


def _setup(gait: Gait, point: dict, n: int) -> tuple[Gait, SnakeParams]:
    gait_changes: dict[str, Any] = {k: math.radians(v) for k, v in point.items() if k in GAIT_KEYS}
    g = replace(gait, **gait_changes) if gait_changes else gait
    kw: dict[str, Any] = {"n": n}
    for key in ("mu_x", "mu_y"):
        v = getattr(gait, key)
        if v is not None:
            kw[key] = v
    if "mu" in point:
        kw["mu_x"] = kw["mu_y"] = point["mu"]
    for key in ("mu_x", "mu_y"):
        if key in point:
            kw[key] = point[key]
    return g, SnakeParams(**kw)


def sweep_point(gait: Gait, point: dict, duration: float, n: int = 11,
                solver: SolverParams | None = None, scene: Scene | None = None) -> dict:
    """One point of a sweep: the row of the table (see the module docstring),
    among ``scene``'s obstacles (a start posture inside one is the row's
    error)."""
    row = {**point, **{k: math.nan for k in ROW_KEYS}, "error": ""}
    w0 = time.perf_counter()
    try:
        g, params = _setup(gait, point, n)
        model = SnakeModel(params, solver or SolverParams(), scene or Scene())
        start = initial_state_for_gait(model, g)
        check_clear(model, start, "the start posture")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # counted in the row
            res = simulate_gait(model, g, duration, rate=20.0, state=start)
        p = res.link(min(LINK_OF_INTEREST, n))
        if not np.all(np.isfinite(p)):
            raise FloatingPointError("the simulation diverged (non-finite positions)")
    except (AikoError, FloatingPointError, ValueError, ZeroDivisionError) as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["wall_s"] = time.perf_counter() - w0
        return row
    d = p[-1, :2] - p[0, :2]
    dist = float(np.hypot(*d))
    row.update(distance_m=dist, speed_m_s=dist / duration if duration > 0 else 0.0,
               heading_deg=math.degrees(math.atan2(d[1], d[0])),
               path_m=float(np.hypot(*np.diff(p[:, :2], axis=0).T).sum()),
               steps=res.stats.steps, unconverged=res.stats.unconverged,
               mean_iterations=res.stats.iterations / max(res.stats.steps, 1),
               wall_s=time.perf_counter() - w0)
    return row


def run_sweep(gait: Gait, grid: dict[str, np.ndarray], duration: float, executor=None,
              n: int = 11, progress=None, scene: Scene | None = None) -> list[dict]:
    """Every grid point on ``executor`` (in this process when None); rows in
    grid order. ``progress()`` is called once per finished point."""
    points = grid_points(grid)
    if executor is None:
        rows = []
        for p in points:
            rows.append(sweep_point(gait, p, duration, n, scene=scene))
            if progress is not None:
                progress()
        return rows
    futures = [executor.submit(sweep_point, gait, p, duration, n, None, scene)
               for p in points]
    if progress is not None:
        import concurrent.futures as cf

        for _ in cf.as_completed(futures):
            progress()
    return [f.result() for f in futures]


def sweep_figure(rows: list[dict], grid: dict[str, np.ndarray], metric: str, title: str):
    """A heat map over two varied parameters, a line over one (others fixed:
    their first value); NaN (failed) points blank."""
    from matplotlib.figure import Figure

    key = METRICS[metric]
    varied = [k for k, v in grid.items() if len(v) > 1]
    fig = Figure(figsize=(7.5, 5.4), layout="constrained")
    ax = fig.add_subplot()
    label = {"distance_m": "link 6 displacement [m]", "speed_m_s": "link 6 speed [m/s]",
             "heading_deg": "heading of travel [deg]", "path_m": "link 6 path length [m]"}[key]
    if len(varied) == 1:
        name = varied[0]
        xs = [r[name] for r in rows]
        ys = [r[key] for r in rows]
        ax.plot(xs, ys, "o-", color="#1f4e9c")
        ax.set_xlabel(name)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    elif len(varied) >= 2:
        a, b = varied[0], varied[1]
        fixed = {k: grid[k][0] for k in varied[2:]}
        sel = [r for r in rows if all(r[k] == v for k, v in fixed.items())]
        za = grid[a]
        zb = grid[b]
        z = np.full((len(za), len(zb)), np.nan)
        for r in sel:
            i = int(np.argmin(np.abs(za - r[a])))
            j = int(np.argmin(np.abs(zb - r[b])))
            z[i, j] = r[key]
        mesh = ax.pcolormesh(_edges(zb), _edges(za), z, cmap="viridis", shading="flat")
        fig.colorbar(mesh, ax=ax, label=label)
        for i in range(len(za)):
            for j in range(len(zb)):
                if np.isfinite(z[i, j]) and z.size <= 100:
                    ax.text(zb[j], za[i], f"{z[i, j]:.3g}", ha="center", va="center",
                            fontsize=7, color="white")
        ax.set_xlabel(b)
        ax.set_ylabel(a)
        if fixed:
            title += " (" + ", ".join(f"{k} = {v:g}" for k, v in fixed.items()) + ")"
    else:
        ax.text(0.5, 0.5, f"{rows[0][key]:.4g}" if rows else "no points", ha="center",
                transform=ax.transAxes)
    ax.set_title(title, fontsize=10)
    return fig


def _edges(v: np.ndarray) -> np.ndarray:
    if len(v) == 1:
        return np.array([v[0] - 0.5, v[0] + 0.5])
    mid = 0.5 * (v[1:] + v[:-1])
    return np.concatenate([[2 * v[0] - mid[0]], mid, [2 * v[-1] - mid[-1]]])
