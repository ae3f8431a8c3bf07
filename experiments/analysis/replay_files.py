"""Replays of trial files as ``aiko replay`` runs them: one comparison (figure
and JSON, the same as at the end of a trial) per trial, and a summary table.

:func:`replay_trial` is one trial (the unit a worker runs);
:func:`replay_trials` runs several, in parallel on an executor when there are
more than one. A file that cannot be replayed gives a result with ``error``
(one line), never an exception out of the batch.
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from aiko.experiments.analysis.compare import (
    ComparisonError,
    Paths,
    compare_paths,
    comparison_figure,
)
from aiko.experiments.analysis.delay import DelayEstimate, estimate_delay
from aiko.experiments.analysis.replay import (
    ReplayError,
    ReplayInput,
    load_replay,
    plant_solver,
    replay_model,
    replay_plant,
    shifted,
)
from aiko.experiments.files.scene_file import load_scene
from aiko.model import SolverParams
from aiko.model.scene import SceneError

__all__ = ["ReplayResult", "replay_trial", "replay_trials", "simulate_replay", "summary_rows",
           "write_summary", "SUMMARY_KEYS"]


@dataclass
class ReplayResult:
    path: Path
    error: str | None = None
    gait: str = ""
    duration: float = 0.0
    kind: str = "model"            # "model" (ideal robot) or "plant" (free play, servo)
    start: str = ""
    truncated: bool = False
    delay: float = 0.0
    delay_estimate: DelayEstimate | None = None
    metrics: dict = field(default_factory=dict)
    against_logged: dict | None = None
    figure: Path | None = None
    json: Path | None = None
    wall_s: float = 0.0
    stats: dict = field(default_factory=dict)


def simulate_replay(inp: ReplayInput, *, mu_x=None, mu_y=None, backlash=None, servo=None,
                    dt=None, u_tol=None, max_iter=None, scene=None,
                    delay: float = 0.0) -> tuple[Paths, dict, str]:
    """The replay of one loaded trial with these parameters (None: the
    trial's; ``scene`` a :class:`aiko.model.scene.Scene`): (paths, solver
    statistics, kind)."""
    params = inp.params
    obstacles = inp.scene if scene is None else scene
    changes = {k: v for k, v in (("mu_x", mu_x), ("mu_y", mu_y)) if v is not None}
    if changes:
        params = replace(params, **changes)
    plant = (backlash or 0.0) > 0 or servo == "module"
    solver = plant_solver(inp) if plant else SolverParams()
    if dt is not None:
        solver = replace(solver, dt=dt)
    if u_tol is not None:
        solver = replace(solver, u_tol=u_tol)
    if max_iter is not None:
        solver = replace(solver, max_iter=int(max_iter))
    if plant:
        paths, stats = replay_plant(inp, params, solver, backlash=backlash or 0.0,
                                    servo=servo or "ideal", delay=delay, scene=obstacles)
        return paths, stats, "plant"
    paths, stats = replay_model(inp, params, solver, delay=delay, scene=obstacles)
    return paths, stats, "model"


def replay_trial(path: str | Path, out: str | Path = ".", delay: float | str = 0.0,
                 tag: str | None = None, **params) -> ReplayResult:
    """Replay one trial file and write ``TRIAL-replay[-TAG].png`` and ``.json``
    into ``out``; ``delay`` in s or ``"auto"`` (estimated, then used)."""
    path = Path(path)
    res = ReplayResult(path)
    w0 = time.perf_counter()
    try:
        inp = load_replay(path)
    except ReplayError as exc:
        res.error = str(exc)
        return res
    res.gait, res.duration, res.start, res.truncated = (inp.gait, inp.duration,
                                                        inp.start_source, inp.truncated)
    # params["scene"]: a preset name or a scene file, or None for the trial's own
    try:
        scene = inp.scene if params.get("scene") is None else load_scene(params["scene"])
    except SceneError as exc:
        res.error = f"{path}: scene {exc}"
        return res
    physics = {**params, "scene": scene}
    try:
        if delay == "auto":
            paths, res.stats, res.kind = simulate_replay(inp, **physics)
            res.delay_estimate = estimate_delay(paths)
            res.delay = res.delay_estimate.delay
            paths = shifted(inp, paths, res.delay)
        else:
            res.delay = float(delay)
            paths, res.stats, res.kind = simulate_replay(inp, delay=res.delay, **physics)
        res.metrics = compare_paths(paths)
    except ComparisonError as exc:
        res.error = f"{path}: {exc}"
        return res
    logged = inp.experiment
    if logged.t_model.size >= 2:
        try:
            res.against_logged = compare_paths(Paths(logged.t_model, logged.p_model,
                                                     paths.t_model, paths.p_model))
        except ComparisonError:
            res.against_logged = None
    out = Path(out)
    stem = f"{path.stem}-replay" + (f"-{tag}" if tag else "")
    title = (f"{inp.gait}: experiment and {res.kind} replay, link 6 ({path.stem}"
             + (f", delay {1e3 * res.delay:.0f} ms" if res.delay else "") + ")")
    res.figure = out / f"{stem}.png"
    res.json = out / f"{stem}.json"
    comparison_figure(paths, title, res.metrics, scene=scene).savefig(res.figure, dpi=110)
    res.wall_s = time.perf_counter() - w0
    doc = {"trial": str(path), "kind": res.kind, "start": res.start, "delay_s": res.delay,
           "delay_estimate": None if res.delay_estimate is None else
           res.delay_estimate.to_dict(), "parameters": _jsonable(params),
           "metrics": res.metrics, "against_logged_model": res.against_logged,
           "truncated": res.truncated, "solver": res.stats, "wall_s": res.wall_s}
    res.json.write_text(json.dumps(doc, indent=2) + "\n")
    return res


def _jsonable(params: dict) -> dict:
    return {k: v for k, v in params.items() if v is None or isinstance(v, (int, float, str))}


def replay_trials(paths, out: str | Path = ".", delay: float | str = 0.0, executor=None,
                  tag: str | None = None, **params) -> list[ReplayResult]:
    """Replay several trials (on ``executor``, or a local pool when there is
    more than one and none is given), in the order given."""
    paths = [Path(p) for p in paths]
    if len(paths) == 1 and executor is None:
        return [replay_trial(paths[0], out, delay, tag, **params)]
    if executor is None:
        from aiko.experiments.analysis.executor import open_executor

        with open_executor(workers=min(len(paths), _cores())) as ex:
            return replay_trials(paths, out, delay, executor=ex, tag=tag, **params)
    futures = [executor.submit(replay_trial, p, out, delay, tag, **params) for p in paths]
    return [f.result() for f in futures]


def _cores() -> int:
    import os

    return os.cpu_count() or 1


SUMMARY_KEYS = ("trial", "gait", "kind", "duration_s", "final_error_cm", "rms_error_cm",
                "distance_experiment_m", "distance_model_m", "distance_ratio",
                "path_experiment_m", "path_model_m", "path_ratio",
                "heading_difference_deg", "delay_ms", "delay_uncertainty_ms")


def summary_rows(results: list[ReplayResult]) -> list[dict]:
    rows = []
    for r in results:
        m = r.metrics
        unc = r.delay_estimate.uncertainty if r.delay_estimate is not None else math.nan
        rows.append({"trial": r.path.name, "gait": r.gait, "kind": r.kind,
                     "duration_s": r.duration, "final_error_cm": 100 * m["final_error_m"],
                     "rms_error_cm": 100 * m["rms_error_m"],
                     "distance_experiment_m": m["distance_experiment_m"],
                     "distance_model_m": m["distance_model_m"],
                     "distance_ratio": m["distance_ratio"],
                     "path_experiment_m": m["path_experiment_m"],
                     "path_model_m": m["path_model_m"], "path_ratio": m["path_ratio"],
                     "heading_difference_deg": m["heading_difference_deg"],
                     "delay_ms": 1e3 * r.delay, "delay_uncertainty_ms": 1e3 * unc})
    return rows


def write_summary(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(SUMMARY_KEYS))
        w.writeheader()
        w.writerows(rows)
    return path
