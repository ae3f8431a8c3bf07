"""Replay a logged trial against the model: the references actually sent, at
the times they were sent, from the posture the trial started in.

* :func:`load_replay` reads what a replay needs from a trial log (JSON and MCAP
  records only; nothing in the file is executed): the gait periods'
  references and send times (/references, phase ``gait``), the start (the
  parallel model's ``model_started`` event: t0 and, from this version on, its
  coordinates q0; for older logs rebuilt from the first gait period's STATE
  replies placed on link 6's first motion-capture sample), the ramp's
  references before the gait and the posture at the ramp's start (its first
  period's STATE replies on link 6's motion capture), link 6 from motion
  capture, the parallel model's own output if there was one, and the snake
  and gait of the trial's metadata.
* :func:`replay_model` simulates it as the parallel model does
  (:class:`~aiko.experiments.rig.parallel_model.ParallelModel`): the ideal robot.
* :func:`replay_plant` simulates it through the simulated Aiko's physics
  (:class:`~aiko.experiments.rig.plant.SimulatedAiko`): the logged REF and SYNC
  frames go to emulated joint modules in virtual time, whose motors drive the
  links through free play; for backlash and the modules' servo. It starts
  where the trial's ramp started and plays the ramp too: where the ramp
  left the free play and the servos decides the gait's first seconds.

Both return :class:`~aiko.experiments.analysis.compare.Paths` (the experiment's link 6
shifted by ``delay``: motion-capture times are taken as ``delay`` s late).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from aiko.experiments.analysis.compare import Paths, paths_from_trial
from aiko.experiments.files.scene_file import scene_from_json
from aiko.experiments.files.triallog import TrialLogError, read_trial
from aiko.experiments.rig.alignment import start_posture
from aiko.experiments.rig.parallel_model import ParallelModel
from aiko.model import SnakeModel, SnakeParams, SolverParams
from aiko.model.errors import AikoError
from aiko.model.scene import Scene, SceneError

__all__ = ["ReplayError", "ReplayInput", "load_replay", "replay_model", "replay_plant",
           "plant_solver", "snake_params_of", "shifted", "experiment_from"]

LINK = 6
SAMPLE_RATE = 20.0


class ReplayError(AikoError):
    """A file that cannot be replayed: not a trial, or lacking what a replay needs."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class ReplayInput:
    """What a replay needs from one trial (times on the trial clock, s)."""

    path: Path
    name: str
    gait: str
    nodes: int
    period: float
    t_refs: np.ndarray          # (k,) send times of the gait periods
    refs: np.ndarray            # (k, nodes, 4) rad, rad/s
    t0: float                   # the gait's t = 0 (the model's start)
    q0: np.ndarray              # (nodes + 1, 7) start coordinates
    start_source: str           # where q0 came from
    t_end: float                # the end of the last gait period
    experiment: Paths           # link 6 of motion capture (and of the parallel model)
    params: SnakeParams         # the trial's snake (friction of the gait)
    truncated: bool
    metadata: dict
    scene: Scene = field(default_factory=Scene)   # the trial's obstacles (flat floor: empty)
    ramp_t: np.ndarray = field(default_factory=lambda: np.zeros(0))   # (r,) send times
    ramp_refs: np.ndarray | None = None     # (r, nodes, 4) the ramp's references
    q_ramp: np.ndarray | None = None        # (nodes + 1, 7) at the ramp's start

    @property
    def duration(self) -> float:
        return self.t_end - self.t0


def snake_params_of(metadata: dict, nodes: int) -> SnakeParams:
    """The parallel model's snake for a trial: nodes + 1 links, the gait's friction."""
    kw: dict[str, Any] = {"n": nodes + 1}
    gait = metadata.get("gait", {})
    friction = gait.get("friction", {}) if isinstance(gait, dict) else {}
    for key in ("mu_x", "mu_y"):
        v = friction.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
            kw[key] = float(v)
    return SnakeParams(**kw)


def _json_field(meta: dict, key: str, default):
    raw = meta.get(key)
    if raw is None:
        return default
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


REPLAY_TOPICS = ("/references", "/mocap", "/model", "/events")
"""The channels a replay reads; the CAN frames and the joint states, the bulk
of a log, are only counted (a long trial's replay does not hold them in
memory; the joint states are read again only for a log whose parallel model
left no start coordinates)."""


def load_replay(path: str | Path) -> ReplayInput:
    """Read a trial log for a replay; ReplayError names the file and what is
    missing. A truncated file gives what it holds (``truncated`` is set)."""
    path = Path(path)
    try:
        data = read_trial(path, topics=REPLAY_TOPICS)
    except TrialLogError as exc:
        raise ReplayError(str(path), exc.args[0].split(": ", 1)[-1]) from exc
    if not data.metadata:
        raise ReplayError(str(path), "not a trial log (no 'trial' metadata)")
    meta = {k: _json_field(data.metadata, k, None) for k in data.metadata}
    config = meta.get("config")
    if not isinstance(config, dict):
        config = {}
    nodes = config.get("nodes")
    period = config.get("period", 0.1)
    if not isinstance(nodes, int) or nodes < 1:
        raise ReplayError(str(path), "the trial metadata has no node count")
    t_refs, refs = data.references("gait")
    if t_refs.size == 0:
        raise ReplayError(str(path), "no gait references (/references)")
    if refs.shape[1:] != (nodes, 4) or not np.all(np.isfinite(refs)):
        raise ReplayError(str(path), f"/references: expected ({nodes}, 4) finite references "
                                     f"per period, got {refs.shape[1:]}")
    exp = paths_from_trial(data)
    if np.sum(np.all(np.isfinite(exp.p_experiment[:, :2]), axis=1)) < 2:
        raise ReplayError(str(path), "no motion capture of link 6 (/mocap)")
    params = snake_params_of(meta, nodes)
    try:
        scene = scene_from_json(meta.get("scene"))
    except (SceneError, TypeError, ValueError) as exc:
        raise ReplayError(str(path), f"the trial's scene cannot be used: {exc}") from exc
    states = _States(path)
    t0, q0, source = _start(data, states, params, t_refs, refs, exp)
    t_end = float(t_refs[-1] + period)
    if data.truncated:
        last = data.span[1] if data.span is not None else t_end
        t_end = min(t_end, float(last))
    ramp_t, ramp_refs, q_ramp = _ramp(data, states, params, exp, t0)
    if q_ramp is not None:
        source += f"; a plant from the ramp's start ({ramp_t.size} periods before)"
    return ReplayInput(path, path.stem, str(meta.get("gait_name", "?")), nodes, float(period),
                       t_refs, refs, t0, q0, source, t_end, exp, params, data.truncated, meta,
                       scene, ramp_t, ramp_refs, q_ramp)


class _States:
    """A log's /joint_state records, read once and only when asked for (a
    second pass over the file: a long trial holds many)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._records: list | None = None

    def __iter__(self):
        if self._records is None:
            self._records = read_trial(self._path, topics=("/joint_state",)).records.get(
                "/joint_state", [])
        return iter(self._records)


def _state_posture(states, params: SnakeParams, counter, fallback: np.ndarray,
                   exp: Paths, t: float) -> tuple[np.ndarray, int, int]:
    """The posture of the STATE replies (``states``: the log's /joint_state
    records, an iterable) to the SYNC with ``counter`` (the joint angles of
    ``fallback`` (n-1, 2) where a node did not answer), placed on link 6's motion-capture
    sample nearest t; how many answered, and on how many links it was
    placed."""
    ah, av = fallback[:, 0].copy(), fallback[:, 1].copy()
    answered = 0
    for _, s in states:
        if s.get("sync_echo") == counter and 1 <= s.get("node", 0) <= len(ah):
            ah[s["node"] - 1], av[s["node"] - 1] = s["alpha_h"], s["alpha_v"]
            answered += 1
    markers = {}
    ok = np.all(np.isfinite(exp.p_experiment), axis=1)
    if ok.any():
        i = int(np.argmin(np.abs(np.where(ok, exp.t_experiment, np.inf) - t)))
        markers[min(LINK, params.n)] = tuple(exp.p_experiment[i])
    return start_posture(params, ah, av, markers), answered, len(markers)


def _ramp(data, states, params: SnakeParams, exp: Paths, t0: float
          ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The ramp's send times (r,), references (r, nodes, 4) and the posture at
    its start, when the log holds a whole ramp before the gait (else empty,
    None, None): its first period's STATE replies were every node's."""
    t_ramp, refs = data.references("ramp")
    nodes = params.n - 1
    if (t_ramp.size == 0 or refs.shape[1:] != (nodes, 4) or not np.all(np.isfinite(refs))
            or not np.all(np.diff(t_ramp) > 0) or t_ramp[-1] >= t0):
        return np.zeros(0), None, None
    first = [d for _, d in data.records.get("/references", []) if d.get("phase") == "ramp"][0]
    q, answered, _ = _state_posture(states, params, first.get("counter"), refs[0, :, :2], exp,
                                 float(t_ramp[0]))
    if answered < nodes:
        return np.zeros(0), None, None
    return t_ramp, refs, q


def _start(data, states, params: SnakeParams, t_refs, refs, exp: Paths):
    """(t0, q0, source) of the trial's parallel model, or rebuilt."""
    started = data.events("model_started")
    t0 = float(t_refs[0])
    if started:
        d = started[0][1].get("data", {})
        t0 = float(d.get("t0", t0))
        q0 = d.get("q0")
        if q0 is not None:
            q0 = np.asarray(q0, dtype=float)
            if q0.shape == (params.n, 7) and np.all(np.isfinite(q0)):
                return t0, q0, "the parallel model's start (logged)"
    # rebuild: the first gait period's STATE replies, placed on link 6
    first = [d for _, d in data.records.get("/references", [])
             if d.get("phase", "gait") == "gait"][0]
    q0, answered, placed = _state_posture(states, params, first.get("counter"), refs[0, :, :2],
                                          exp, t0)
    return t0, q0, (f"rebuilt: STATE of {answered}/{params.n - 1} nodes, "
                    f"placed on {placed} mocap link(s)")


def experiment_from(inp: ReplayInput, delay: float) -> tuple[np.ndarray, np.ndarray]:
    """Link 6 of the experiment from the gait's t = 0 (the ramp before it is
    not the model's), its times taken ``delay`` s earlier: (t (k,), p (k, 3))."""
    t = inp.experiment.t_experiment - delay
    keep = t >= inp.t0 - 1e-9
    return t[keep], inp.experiment.p_experiment[keep]


def shifted(inp: ReplayInput, paths: Paths, delay: float) -> Paths:
    """``paths`` with the experiment taken from :func:`experiment_from`."""
    return Paths(*experiment_from(inp, delay), paths.t_model, paths.p_model)


def _paths(inp: ReplayInput, t_model, p_model, delay: float) -> Paths:
    return Paths(*experiment_from(inp, delay), np.asarray(t_model),
                 np.asarray(p_model).reshape(-1, 3))


def replay_model(inp: ReplayInput, params: SnakeParams | None = None,
                 solver: SolverParams | None = None, delay: float = 0.0,
                 scene: Scene | None = None) -> tuple[Paths, dict]:
    """The ideal robot on the logged references (as the parallel model ran
    it), among the trial's obstacles or ``scene``; (paths, solver statistics)."""
    params = inp.params if params is None else params
    model = SnakeModel(params, solver or SolverParams(), inp.scene if scene is None else scene)
    pm = ParallelModel(model, SAMPLE_RATE)
    samples = pm.start(inp.t0, inp.q0)
    for t, r in zip(inp.t_refs, inp.refs, strict=True):
        if t > inp.t_end:
            break
        samples += pm.add_refs(float(t), r)
    samples += pm.finish(inp.t_end)
    t = np.array([s.t for s in samples])
    p = np.array([s.positions[min(LINK, params.n) - 1] for s in samples])
    return _paths(inp, t, p, delay), pm.stats()


def replay_plant(inp: ReplayInput, params: SnakeParams | None = None,
                 solver: SolverParams | None = None, backlash: float = 0.0,
                 servo: str = "ideal", delay: float = 0.0,
                 scene: Scene | None = None) -> tuple[Paths, dict]:
    """The logged REF and SYNC frames, at their send times, into emulated
    joint modules (free play ``backlash`` rad, ``servo`` "module" or "ideal")
    whose motors drive the model (:func:`aiko.experiments.rig.plant.drive_plant`),
    from the ramp's start when the log has the ramp (module docstring), else
    from the gait's; (paths from the gait's start, statistics)."""
    from aiko.experiments.rig.plant import drive_plant

    params = inp.params if params is None else params
    model = SnakeModel(params, solver or SolverParams(), inp.scene if scene is None else scene)
    if inp.q_ramp is not None and inp.ramp_refs is not None:
        start, q_start = float(inp.ramp_t[0]), inp.q_ramp
        t_refs = np.concatenate([inp.ramp_t, inp.t_refs])
        refs = np.concatenate([inp.ramp_refs, inp.refs])
    else:
        start, q_start, t_refs, refs = inp.t0, inp.q0, inp.t_refs, inp.refs
    run = drive_plant(model, model.state_from_q(q_start, t=0.0), t_refs - start, refs,
                      inp.t_end - start, backlash, servo, SAMPLE_RATE)
    link = min(LINK, params.n) - 1   # link 6, or the last of a shorter snake
    t = run.t + start
    # from the last sample at or before the gait's start (the ramp is not compared)
    keep = t >= t[max(0, int(np.searchsorted(t, inp.t0 + 1e-9)) - 1)]
    stats = {"steps": run.steps, "iterations": run.iterations, "unconverged": run.unconverged}
    return _paths(inp, t[keep], run.positions[keep, link], delay), stats


def plant_solver(inp: ReplayInput) -> SolverParams:
    """The time step and contact-solver settings of the simulated Aiko that
    ran the trial (its log's ``plant`` metadata: ``dt``, ``u_tol``,
    ``max_iter``), the model's defaults for what it does not say (a trial on
    the robot says nothing). Only the numerics: the floor and the free play
    recorded beside them are what a fit is to find, and are not read."""
    plant = inp.metadata.get("plant")
    if not isinstance(plant, dict):
        return SolverParams()
    kw: dict[str, Any] = {}
    for key, kind in (("dt", float), ("u_tol", float), ("max_iter", int)):
        value = plant.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value) and value > 0:
            kw[key] = kind(value)
    try:
        return SolverParams(**kw)
    except (AikoError, ValueError):
        return SolverParams()


def with_friction(params: SnakeParams, mu_x: float | None, mu_y: float | None) -> SnakeParams:
    changes: dict[str, Any] = {k: v for k, v in (("mu_x", mu_x), ("mu_y", mu_y))
                               if v is not None}
    return replace(params, **changes) if changes else params
