"""The folder of an optimisation run: its settings, its history, its outputs.

``optimize.json`` holds the search's settings and the starting gait's own
evaluation; ``history.csv`` one row per evaluated candidate, appended as they
finish (so a stopped run loses at most the generation in flight). Opening a
folder that holds a run of another search (other gait, parameters, bounds,
objective, frictions, seed ...) is an error; a larger ``budget`` continues it.

Outputs (:func:`write_outputs`): ``best.toml`` (a gait file ``aiko run`` and
``aiko simulate`` take as is), ``convergence.png``, and for the objective
``both`` ``pareto.csv``, ``pareto.png`` and ``front/NN.toml``, one gait per
front point, fastest first.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from aiko.control.gait import Gait
from aiko.experiments.analysis.optimize import (
    HISTORY_KEYS,
    OptimizationResult,
    OptimizeConfig,
    OptimizeError,
    candidate_gait,
    evaluate_point,
    run_optimization,
)

__all__ = ["RunFolder", "write_outputs", "gait_toml", "convergence_figure", "pareto_figure"]

_SETTINGS = "optimize.json"
_HISTORY = "history.csv"


def _columns(config: OptimizeConfig) -> list[str]:
    cols = list(HISTORY_KEYS[:3]) + list(config.vary) + list(HISTORY_KEYS[3:])
    for m in config.mu:
        cols += [f"speed@{m:g}", f"cot@{m:g}"]
    return cols


def _parse_row(raw: dict) -> dict:
    row: dict = {}
    for k, v in raw.items():
        if k == "feasible":
            row[k] = v == "True"
        elif k == "reason":
            row[k] = v
        elif k in ("evaluation", "generation", "index"):
            row[k] = int(v)
        else:
            row[k] = float(v) if v not in ("", None) else math.nan
    return row


@dataclass
class RunFolder:
    path: Path
    gait: Gait
    config: OptimizeConfig
    previous: list[dict]
    start_row: dict

    @classmethod
    def open(cls, path: Path, gait: Gait, config: OptimizeConfig) -> RunFolder:
        """Create the folder, or take up the run it holds (module docstring)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        settings = path / _SETTINGS
        search = {"gait": gait.to_toml_dict(), **config.to_dict()}
        search.pop("budget")
        if search.get("scene") is None:  # as runs from before scenes recorded it
            search.pop("scene", None)
        search = json.loads(json.dumps(search))     # as it reads back from the file
        if settings.exists():
            try:
                doc = json.loads(settings.read_text())
                old = doc["search"]
                start_row = doc["start"]
            except (ValueError, KeyError, TypeError) as exc:
                raise OptimizeError(f"{settings}: not an optimisation run's settings") from exc
            if old != search:
                diff = sorted(k for k in set(old) | set(search) if old.get(k) != search.get(k))
                raise OptimizeError(f"{path} holds another search (differs in "
                                    f"{', '.join(diff)}); use a new --out folder")
            folder = cls(path, gait, config, [], start_row)
            folder.previous = folder.read_history()
            return folder
        start = {k: math.degrees(getattr(gait, k)) for k in config.vary}
        start_row = {**start, **evaluate_point(gait, start, config)}
        settings.write_text(json.dumps({"search": search, "start": start_row}, indent=1,
                                       default=float) + "\n")
        (path / _HISTORY).unlink(missing_ok=True)
        return cls(path, gait, config, [], start_row)

    def read_history(self) -> list[dict]:
        f = self.path / _HISTORY
        if not f.exists():
            return []
        try:
            with open(f, newline="") as fh:
                rows = [_parse_row(r) for r in csv.DictReader(fh)]
        except (ValueError, KeyError, csv.Error) as exc:
            raise OptimizeError(f"{f}: unreadable history ({exc})") from exc
        return rows

    def append(self, row: dict) -> None:
        f = self.path / _HISTORY
        cols = _columns(self.config)
        new = not f.exists()
        with open(f, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
            if new:
                w.writeheader()
            w.writerow({k: row.get(k, "") for k in cols})

    def run(self, executor=None, on_row=None, evaluate=None) -> OptimizationResult:
        def record(row: dict) -> None:
            self.append(row)
            if on_row is not None:
                on_row(row)

        return run_optimization(self.gait, self.config, executor, self.previous, record,
                                evaluate)


def gait_toml(gait: Gait, point: dict, name: str) -> str:
    """A gait file of ``gait`` with ``point`` applied."""
    import tomli_w

    g = replace(candidate_gait(gait, point), name=name)
    return tomli_w.dumps(g.to_toml_dict())


def convergence_figure(result: OptimizationResult, start: dict, title: str):
    from matplotlib.figure import Figure

    hist = result.history
    ev = np.array([r["evaluation"] for r in hist])
    ok = np.array([bool(r["feasible"]) for r in hist])
    speed = np.array([r["speed_m_s"] for r in hist], dtype=float) * 100
    cot = np.array([r["cot"] for r in hist], dtype=float)
    panels = [("speed", "speed of the centre of mass [cm/s]", speed, np.fmax),
              ("cot", "cost of transport", cot, np.fmin)]
    if result.config.objective != "both":
        panels = [p for p in panels if p[0] == result.config.objective]
    fig = Figure(figsize=(8.0, 3.4 * len(panels) + 0.6), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (key, label, y, better) in zip(axes, panels, strict=True):
        yy = np.where(ok & np.isfinite(y), y, np.nan)
        run = better.accumulate(np.where(np.isnan(yy), -np.inf if key == "speed" else np.inf, yy))
        run = np.where(np.isfinite(run), run, np.nan)
        ax.plot(ev, run, "-", color="#1f4e9c", lw=2, label="best so far", zorder=2)
        ax.plot(ev[ok], yy[ok], "o", ms=3.5, color="#e08a2c", label="feasible candidates",
                zorder=3)
        s0 = start.get("speed_m_s" if key == "speed" else "cot")
        if start.get("feasible") and s0 is not None and math.isfinite(s0):
            ax.axhline(s0 * (100 if key == "speed" else 1), color="#c0392b", ls="--", lw=1.2,
                       label="the starting gait")
        if (~ok).any():
            ax.plot([], [], " ", label=f"infeasible: {int((~ok).sum())} of {len(hist)}")
        if key == "cot":
            ax.set_yscale("log")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    axes[-1].set_xlabel("evaluation")
    fig.suptitle(title, fontsize=10)
    return fig


def pareto_figure(result: OptimizationResult, start: dict, title: str):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 5.0), layout="constrained")
    ax = fig.add_subplot()
    feas = [r for r in result.history if r["feasible"] and math.isfinite(r["cot"])]
    ax.plot([100 * r["speed_m_s"] for r in feas], [r["cot"] for r in feas], "o", ms=3,
            color="#b8c2d6", label="feasible candidates")
    front = sorted(result.front, key=lambda r: r["speed_m_s"])
    ax.plot([100 * r["speed_m_s"] for r in front], [r["cot"] for r in front], "o-", ms=5,
            color="#1f4e9c", label=f"Pareto front ({len(front)})")
    if start.get("feasible"):
        ax.plot([100 * start["speed_m_s"]], [start["cot"]], "*", ms=13, color="#c0392b",
                label="the starting gait")
    ax.set_xlabel("speed of the centre of mass [cm/s] (faster: right)")
    ax.set_ylabel("cost of transport (cheaper: down)")
    if feas and min(r["cot"] for r in feas) > 0:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    ax.set_title(title, fontsize=10)
    return fig


def write_outputs(out: Path, gait: Gait, result: OptimizationResult, start: dict) -> list[Path]:
    """best.toml, convergence.png and, for ``both``, pareto.csv, pareto.png
    and front/NN.toml (module docstring); the paths written."""
    out = Path(out)
    cfg = result.config
    files = [out / _HISTORY]
    what = {"speed": "speed", "cot": "cost of transport", "both": "speed and CoT"}[cfg.objective]
    mu = f"mu {','.join(f'{m:g}' for m in cfg.mu)} ({cfg.robust})" if cfg.mu else "its own mu"
    title = (f"{gait.name}: {what}, {result.evaluations} evaluations\n"
             f"over {', '.join(cfg.vary)}; {cfg.duration:g} s on {mu}")
    if result.best is not None:
        b = result.best
        f = out / "best.toml"
        f.write_text(gait_toml(gait, {k: b[k] for k in cfg.vary}, "best"))
        files.append(f)
    fig = convergence_figure(result, start, title)
    f = out / "convergence.png"
    fig.savefig(f, dpi=110)
    files.append(f)
    if cfg.objective == "both":
        f = out / "pareto.csv"
        cols = list(cfg.vary) + ["speed_m_s", "cot", "work_J", "distance_m", "evaluation"]
        with open(f, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            w.writerows(result.front)
        files.append(f)
        fig = pareto_figure(result, start, title)
        f = out / "pareto.png"
        fig.savefig(f, dpi=110)
        files.append(f)
        front_dir = out / "front"
        front_dir.mkdir(exist_ok=True)
        for old in front_dir.glob("*.toml"):
            old.unlink()
        for i, r in enumerate(result.front):
            g = front_dir / f"{i:02d}.toml"
            g.write_text(gait_toml(gait, {k: r[k] for k in cfg.vary}, f"front-{i:02d}"))
        files.append(front_dir)
    return files
