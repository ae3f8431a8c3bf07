"""Gait optimisation on the model: faster, or cheaper, gaits within what Aiko can do.

A candidate is the gait with some of its parameters of (70)-(71) changed (gait
file units: degrees, degrees per second). It is judged in three steps:

1. **Feasible?** Its references, one per 10 Hz period over the run, must stay
   inside the joint limits (a reference the codec would clamp makes the
   candidate infeasible: clamping changes the gait's shape) and need at most
   ``max_duty`` of the motors' full-duty speed (:mod:`aiko.control.preflight`).
   An infeasible candidate is not simulated; its *violation* (how far beyond
   the limits, radians plus the excess fraction of the speed) ranks it.
2. **Simulated** on the model for ``duration`` s on each floor friction asked
   for, among the obstacles of ``scene`` if one is given (a candidate whose
   start posture lies inside one is infeasible). A diverging simulation makes
   the candidate infeasible (recorded with its error), never a crash; so does one that throws a link's centre more
   than ``max_lift`` above its resting height (a snake tumbling or flailing,
   far from the motions the model was validated on; the paper's sidewinding
   lifts its links 5 cm).
   With ``backlash_deg`` the candidate runs instead on the simulated Aiko:
   emulated joint modules with that free play and their servo (``servo``)
   driving the model, fed the references at 10 Hz as a trial streams them;
   the robot's imperfections the rig models, offline and as fast as it
   computes (about half the model's speed).
3. **Measured** after the start transient, the first third of the run (the
   soft start and at least one period of the paper's waves): *speed* is the
   centre of mass's straight-line displacement in the ground plane over the
   last two thirds, divided by their duration; *cost of transport* is the
   drives' positive work over the same window divided by m g and that
   displacement. Over several frictions a candidate scores its worst (slowest
   speed, largest CoT) or the mean.

:func:`run_optimization` drives CMA-ES (``cma``) for one objective and
NSGA-II (``pymoo``) for the speed/CoT Pareto front, generation by generation,
each generation's candidates evaluated together on an executor (a local pool
or Dask, :mod:`aiko.experiments.analysis.executor`). Every evaluation is a row of the
history, appended as it finishes; a run started again on the same history
replays the logged evaluations through the same seeded strategy (the search
is deterministic given its seed and the values it was told), so it goes on
where it stopped without simulating anything twice.

The strategies minimise: speed as -speed (m/s), CoT as CoT; an infeasible
candidate gets ``INFEASIBLE`` plus its violation, worse than any feasible one.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from aiko.control.gait import JOINT_LIMIT, Gait
from aiko.control.preflight import OMEGA_MAX, preflight
from aiko.experiments.analysis.bounds import parse_bounds_spec
from aiko.experiments.analysis.simulate import initial_state_for_gait, simulate_gait
from aiko.experiments.files.scene_file import StartInsideObstacle, check_clear, scene_from_json
from aiko.experiments.rig.plant import PlantParams
from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams
from aiko.model.errors import AikoError
from aiko.model.scene import Scene

__all__ = ["OptimizeError", "OptimizeConfig", "DEFAULT_BOUNDS", "VARY_KEYS", "INFEASIBLE",
           "parse_vary", "parse_bounds", "parse_mu", "candidate_gait", "evaluate_candidate",
           "evaluate_point",
           "objective_values", "pareto_front", "run_optimization", "OptimizationResult",
           "HISTORY_KEYS"]

VARY_KEYS = ("A_h", "omega_h", "delta_h", "psi_h", "A_v", "omega_v", "delta_v", "delta_0",
             "psi_v")

DEFAULT_BOUNDS: dict[str, tuple[float, float]] = {
    "A_h": (5.0, 45.0), "omega_h": (20.0, 200.0), "delta_h": (-120.0, 120.0),
    "psi_h": (-20.0, 20.0), "A_v": (0.0, 30.0), "omega_v": (20.0, 200.0),
    "delta_v": (-120.0, 120.0), "delta_0": (-180.0, 180.0), "psi_v": (-20.0, 20.0),
}
"""Search bounds in the gait file's units (deg, deg/s) when none are given."""

PERIOD = 0.1
"""The reference period of a trial (10 Hz), s."""

INFEASIBLE = 1e6
"""What the strategies are told for an infeasible candidate (plus its violation)."""

PLANT_SOLVER: dict[str, Any] = {"u_tol": PlantParams.u_tol, "max_iter": PlantParams.max_iter}
"""The simulated Aiko's solver settings (:class:`aiko.experiments.rig.plant.PlantParams`)."""

NO_MOTION_COT = 1e3
"""The CoT a candidate that did not move is scored with (it is inf)."""

HISTORY_KEYS = ("evaluation", "generation", "index", "feasible", "objective", "speed_m_s",
                "cot", "work_J", "distance_m", "violation", "reason", "wall_s")


class OptimizeError(AikoError):
    """A bad optimisation request, or a run directory that does not match it."""


@dataclass(frozen=True)
class OptimizeConfig:
    """What to optimise and how (see the module docstring)."""

    vary: tuple[str, ...]
    bounds: dict[str, tuple[float, float]]
    objective: str = "speed"            # speed, cot or both
    duration: float = 12.0              # s simulated per candidate and friction
    mu: tuple[float, ...] = ()          # floor frictions (isotropic); () the gait's own
    robust: str = "worst"               # worst or mean over mu
    budget: int = 200                   # candidates; the last generation may go beyond
    popsize: int | None = None          # per generation (None: the strategy's default)
    seed: int = 1
    sigma0: float = 0.2                 # CMA-ES's initial step, in the unit box
    max_duty: float = 0.8               # of the motors' full-duty speed
    max_lift: float = 0.12              # m, a link's centre above its resting height
    backlash_deg: float | None = None   # evaluate on the simulated Aiko with this free play
    servo: str = "module"               # its modules' servo (with backlash_deg)
    n: int = 11
    dt: float | None = None             # model step (None: the default)
    scene: dict | None = None           # obstacles, as scene_file.scene_json's object

    def __post_init__(self) -> None:
        if self.objective not in ("speed", "cot", "both"):
            raise OptimizeError(f"--objective {self.objective!r}: speed, cot or both")
        if self.robust not in ("worst", "mean"):
            raise OptimizeError(f"--robust {self.robust!r}: worst or mean")
        if self.budget < 1:
            raise OptimizeError("--budget must be >= 1")
        if self.objective != "both" and len(self.vary) < 2:
            raise OptimizeError("CMA-ES needs at least two varied parameters "
                                "(one alone: use aiko sweep)")
        missing = [k for k in self.vary if k not in self.bounds]
        if missing:
            raise OptimizeError(f"no bounds for {', '.join(missing)}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["vary"] = list(self.vary)
        d["mu"] = list(self.mu)
        d["bounds"] = {k: list(v) for k, v in self.bounds.items()}
        return d


def parse_vary(spec: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in spec.split(",") if s.strip())
    if not names:
        raise OptimizeError("--vary: no parameters")
    for n in names:
        if n not in VARY_KEYS:
            raise OptimizeError(f"--vary: unknown {n!r} (one of {', '.join(VARY_KEYS)})")
    if len(set(names)) != len(names):
        raise OptimizeError("--vary: a parameter is given twice")
    return names


def parse_bounds(spec: str | None, vary: Sequence[str]) -> dict[str, tuple[float, float]]:
    """``"A_h=10:40,omega_h=30:150"`` over the defaults; OptimizeError names the item."""
    return parse_bounds_spec(spec, {k: DEFAULT_BOUNDS[k] for k in vary}, OptimizeError,
                             f"the varied (--vary {','.join(vary)})")


def parse_mu(spec: str | None) -> tuple[float, ...]:
    if spec is None or not spec.strip():
        return ()
    try:
        mu = tuple(float(s) for s in spec.split(",") if s.strip())
    except ValueError:
        raise OptimizeError(f"--mu {spec!r}: expected numbers separated by commas") from None
    if not mu or any(not (math.isfinite(m) and m > 0) for m in mu):
        raise OptimizeError(f"--mu {spec!r}: frictions must be finite and > 0")
    return mu


def candidate_gait(gait: Gait, point: dict[str, float]) -> Gait:
    """The gait with ``point`` (gait file units) applied."""
    changes: dict[str, Any] = {k: math.radians(v) for k, v in point.items()}
    return replace(gait, **changes, name=f"{gait.name}-candidate")


def _violation(report, max_duty: float) -> float:
    v = 0.0
    for m in report.motors:
        v += max(0.0, m.peak - report.limit)
        v += max(0.0, m.peak_rate / (max_duty * report.omega_max) - 1.0)
    return v


def _measure(t, positions, work, weight: float, duration: float, max_lift: float,
             rest: float) -> dict:
    """Speed and CoT (module docstring) from samples t (k,), positions
    (k, n, 3), cumulative work (k,); weight = m g of the whole snake, N."""
    if not (np.all(np.isfinite(positions)) and np.all(np.isfinite(work))):
        raise FloatingPointError("the simulation diverged (non-finite state)")
    lift = float(np.max(positions[:, :, 2])) - rest
    if lift > max_lift:
        raise _Tumbled(lift, max_lift)
    i = min(int(np.searchsorted(t, duration / 3.0 - 1e-9)), t.size - 1)
    c = positions.mean(axis=1)
    d = float(np.hypot(*(c[-1, :2] - c[i, :2])))
    span = float(t[-1] - t[i])
    w = float(work[-1] - work[i])
    return {"speed_m_s": d / span if span > 0 else 0.0,
            "cot": w / (weight * d) if d > 0 else math.inf, "work_J": w, "distance_m": d}


def _simulate(model: SnakeModel, g: Gait, start, duration: float, backlash_deg: float | None,
              servo: str):
    """(t, positions, work) of the gait on the model from the state ``start``,
    or, with ``backlash_deg``, on the simulated Aiko (emulated modules with that
    free play and ``servo`` driving the model) fed the references at 10 Hz as
    the streamer sends them."""
    if backlash_deg is None:
        res = simulate_gait(model, g, duration, rate=20.0, state=start)
        return res.t, res.positions, res.work
    from aiko.control.gait import references, soft_start_times
    from aiko.experiments.rig.plant import drive_plant

    nj = model.n - 1
    t_refs = np.arange(int(math.ceil(duration / PERIOD - 1e-9))) * PERIOD
    refs = references(g, t_refs, nj, t_start=soft_start_times(g, nj))
    run = drive_plant(model, start, t_refs, refs, duration, math.radians(backlash_deg), servo)
    return run.t, run.positions, run.work


class _Tumbled(Exception):
    def __init__(self, lift: float, limit: float) -> None:
        self.lift = lift
        self.limit = limit
        super().__init__(f"a link rose {100 * lift:.0f} cm above its resting height "
                         f"(limit {100 * limit:.0f} cm)")


def evaluate_candidate(gait: Gait, point: dict[str, float], duration: float,
                       mu: Sequence[float] = (), robust: str = "worst", n: int = 11,
                       max_duty: float = 0.8, dt: float | None = None,
                       max_lift: float = 0.12, backlash_deg: float | None = None,
                       servo: str = "module", drive: str | None = None,
                       scene: Scene | None = None) -> dict:
    """One candidate: feasibility, simulation on each friction, the measures
    (module docstring). A dict with the keys of HISTORY_KEYS that concern it
    (feasible, speed_m_s, cot, work_J, distance_m, violation, reason, wall_s)
    and ``speed@MU`` / ``cot@MU`` per friction. ``dt`` and ``drive`` replace
    the model's time step and drive integration (SolverParams)."""
    w0 = time.perf_counter()
    row = {"feasible": False, "speed_m_s": math.nan, "cot": math.nan, "work_J": math.nan,
           "distance_m": math.nan, "violation": 0.0, "reason": ""}
    g = candidate_gait(gait, point)
    report = preflight(g, n - 1, duration, limit=JOINT_LIMIT, omega_max=OMEGA_MAX)
    violation = _violation(report, max_duty)
    if violation > 0:
        too_fast = [m for m in report.motors if m.peak_rate > max_duty * OMEGA_MAX]
        reason = "; ".join(report.problems[:1] if report.clamped else [])
        if too_fast:
            m = max(too_fast, key=lambda m: m.peak_rate)
            reason = ((reason + "; ") if reason else "") + (
                f"joint {m.name} needs {math.degrees(m.peak_rate):.0f} deg/s, over "
                f"{100 * max_duty:.0f} % of its motor's {math.degrees(OMEGA_MAX):.0f} deg/s")
        row.update(violation=violation, reason=reason, wall_s=time.perf_counter() - w0)
        return row
    frictions: list[float | None] = list(mu) or [None]
    per = []
    for mu_k in frictions:
        kw: dict[str, Any] = {"n": n}
        if mu_k is not None:
            kw["mu_x"] = kw["mu_y"] = mu_k
        else:
            kw.update({k: getattr(g, k) for k in ("mu_x", "mu_y") if getattr(g, k) is not None})
        solver = SolverParams() if backlash_deg is None else SolverParams(**PLANT_SOLVER)
        if dt is not None:
            solver = replace(solver, dt=dt)
        if drive is not None:
            solver = replace(solver, drive=drive)
        try:
            model = SnakeModel(SnakeParams(**kw), solver, scene or Scene())
            start = initial_state_for_gait(model, g)
            try:
                check_clear(model, start, "its start posture")
            except StartInsideObstacle as exc:  # ranked by depth: the search walks out
                row.update(violation=1.0 + exc.depth / model.params.L_SC,
                           wall_s=time.perf_counter() - w0, reason=exc.reason)
                return row
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                t, positions, work = _simulate(model, g, start, duration, backlash_deg, servo)
            p = model.params
            per.append(_measure(t, positions, work, p.n * p.m * p.g, duration, max_lift,
                                p.L_SC))
        except _Tumbled as exc:
            row.update(violation=1.0 + exc.lift / exc.limit, wall_s=time.perf_counter() - w0,
                       reason=f"tumbled: {exc}" + (f" (mu {mu_k:g})" if mu_k is not None else ""))
            return row
        except (AikoError, FloatingPointError, ValueError, ZeroDivisionError) as exc:
            row.update(violation=1.0, wall_s=time.perf_counter() - w0,
                       reason=f"diverged: {type(exc).__name__}: {exc}"
                       + (f" (mu {mu_k:g})" if mu_k is not None else ""))
            return row
    speeds = [p["speed_m_s"] for p in per]
    cots = [p["cot"] for p in per]
    if robust == "worst":
        speed, cot = min(speeds), max(cots)
    else:
        speed, cot = float(np.mean(speeds)), float(np.mean(cots))
    row.update(feasible=True, speed_m_s=speed, cot=cot,
               work_J=float(np.mean([p["work_J"] for p in per])),
               distance_m=float(np.mean([p["distance_m"] for p in per])),
               wall_s=time.perf_counter() - w0)
    if mu:
        for mu_k, res in zip(mu, per, strict=True):
            row[f"speed@{mu_k:g}"] = res["speed_m_s"]
            row[f"cot@{mu_k:g}"] = res["cot"]
    return row


def evaluate_point(gait: Gait, point: dict[str, float], config: OptimizeConfig) -> dict:
    """:func:`evaluate_candidate` with the search's settings."""
    return evaluate_candidate(gait, point, config.duration, config.mu, config.robust,
                              config.n, config.max_duty, config.dt, config.max_lift,
                              config.backlash_deg, config.servo,
                              scene=scene_from_json(config.scene))


def objective_values(row: dict, objective: str) -> list[float]:
    """What the strategy minimises for one evaluated candidate."""
    if not row["feasible"]:
        pen = INFEASIBLE + float(row["violation"])
        return [pen, pen] if objective == "both" else [pen]
    cot = min(float(row["cot"]), NO_MOTION_COT)
    if objective == "speed":
        return [-float(row["speed_m_s"])]
    if objective == "cot":
        return [cot]
    return [-float(row["speed_m_s"]), cot]


def pareto_front(F: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated rows of F (k, m), all minimised; of
    identical rows the first."""
    F = np.asarray(F, dtype=float)
    keep = []
    for i in range(F.shape[0]):
        dominated = np.all(F <= F[i], axis=1) & np.any(F < F[i], axis=1)
        same_before = np.all(F[:i] == F[i], axis=1)
        if not dominated.any() and not same_before.any():
            keep.append(i)
    return np.array(keep, dtype=int)


@dataclass
class OptimizationResult:
    config: OptimizeConfig
    history: list[dict]
    best: dict | None                  # the best feasible row (single objective)
    front: list[dict] = field(default_factory=list)   # the Pareto rows (both)
    evaluations: int = 0               # in the history
    evaluated: int = 0                 # simulated by this call (the rest replayed)
    wall_s: float = 0.0
    stopped: str = ""


def _unit_to_point(z, config: OptimizeConfig) -> dict[str, float]:
    z = np.clip(np.asarray(z, dtype=float), 0.0, 1.0)
    return {k: float(lo + zi * (hi - lo))
            for zi, k, (lo, hi) in zip(z, config.vary,
                                       (config.bounds[k] for k in config.vary), strict=True)}


def _point_to_unit(point: dict, config: OptimizeConfig) -> np.ndarray:
    return np.array([(point[k] - config.bounds[k][0]) / (config.bounds[k][1] - config.bounds[k][0])
                     for k in config.vary])


class _Batches:
    """Evaluates a generation's unit-box candidates: replayed from the history
    where it holds them, the rest with ``evaluate(points)`` (one list)."""

    def __init__(self, config: OptimizeConfig, evaluate, previous: list[dict],
                 on_row: Callable[[dict], None] | None):
        self.config = config
        self.evaluate = evaluate
        self.previous = {(int(r["generation"]), int(r["index"])): r for r in previous}
        self.history: list[dict] = []
        self.on_row = on_row
        self.evaluated = 0

    def __call__(self, generation: int, Z) -> list[dict]:
        points = [_unit_to_point(z, self.config) for z in Z]
        rows: list[dict | None] = []
        todo = []
        for i, p in enumerate(points):
            old = self.previous.get((generation, i))
            if old is not None:
                if any(abs(float(old[k]) - p[k]) > 1e-6 * max(1.0, abs(p[k]))
                       for k in self.config.vary):
                    raise OptimizeError(
                        f"the run's history does not match this search at generation "
                        f"{generation}, candidate {i} (other settings or versions); use a new "
                        f"--out folder")
                rows.append(dict(old))
            else:
                rows.append(None)
                todo.append(i)
        if todo:
            fresh = self.evaluate([points[i] for i in todo])
            self.evaluated += len(todo)
            for i, r in zip(todo, fresh, strict=True):
                rows[i] = r
        out = []
        for i, (p, r) in enumerate(zip(points, rows, strict=True)):
            assert r is not None  # from the cache or just evaluated
            row = {"evaluation": len(self.history), "generation": generation, "index": i,
                   **p, **r}
            row["objective"] = objective_values(row, self.config.objective)[0] \
                if self.config.objective != "both" else math.nan
            self.history.append(row)
            out.append(row)
            if self.on_row is not None and (generation, i) not in self.previous:
                self.on_row(row)
        return out


class _OwnRandom:
    """The strategies draw from numpy's global random state (``cma`` and
    ``pymoo`` seed it); this keeps their draws apart from anything else in the
    process (a Dask client, a caller), so a search is the same wherever its
    candidates run: ``with rng:`` around each of their calls."""

    def __init__(self, seed: int) -> None:
        self._state = np.random.RandomState(seed).get_state()
        self._outer: Any = None

    def __enter__(self) -> None:
        self._outer = np.random.get_state()
        np.random.set_state(self._state)

    def __exit__(self, *exc) -> None:
        self._state = np.random.get_state()
        np.random.set_state(self._outer)


def _cma(config: OptimizeConfig, x0: np.ndarray, batches: _Batches, budget: int) -> str:
    import cma

    opts = {"bounds": [0.0, 1.0], "seed": config.seed, "verbose": -9,
            "maxfevals": budget, "tolfun": 1e-9, "tolx": 1e-6}
    if config.popsize:
        opts["popsize"] = config.popsize
    rng = _OwnRandom(config.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # cma's notes on small populations, flat fitness
        with rng:
            es = cma.CMAEvolutionStrategy(list(np.clip(x0, 0.0, 1.0)), config.sigma0, opts)
        generation = 0
        while len(batches.history) < budget:
            with rng:
                if es.stop():
                    break
                Z = es.ask()
            rows = batches(generation, Z)
            with rng:
                es.tell(Z, [objective_values(r, config.objective)[0] for r in rows])
            generation += 1
        stop = es.stop()
    return ", ".join(f"{k} {v}" for k, v in stop.items()) if stop else "budget"


def _nsga2(config: OptimizeConfig, x0: np.ndarray, batches: _Batches, budget: int) -> str:
    from pymoo.algorithms.moo.nsga2 import NSGA2
    from pymoo.core.evaluator import Evaluator
    from pymoo.core.problem import Problem
    from pymoo.core.termination import NoTermination
    from pymoo.operators.sampling.rnd import FloatRandomSampling
    from pymoo.problems.static import StaticProblem

    d = len(config.vary)
    pop_size = config.popsize or max(8, 4 * d)
    problem = Problem(n_var=d, n_obj=2, n_ieq_constr=1, xl=np.zeros(d), xu=np.ones(d))
    # the first population: the starting gait and random points around the box
    X0 = np.vstack([x0, np.random.default_rng(config.seed).uniform(0.0, 1.0, (pop_size - 1, d))])
    algorithm = NSGA2(pop_size=pop_size, sampling=X0 if pop_size > 1 else FloatRandomSampling())
    rng = _OwnRandom(config.seed)
    with rng:
        algorithm.setup(problem, termination=NoTermination(), seed=config.seed, verbose=False)
    generation = 0
    while len(batches.history) < budget:
        with rng:
            pop = algorithm.ask()
        Z = pop.get("X")
        rows = batches(generation, Z)
        F = np.array([objective_values(r, "both") for r in rows])
        G = np.array([[0.0 if r["feasible"] else max(float(r["violation"]), 1e-6)]
                      for r in rows])
        with rng:
            Evaluator().eval(StaticProblem(problem, F=F, G=G), pop)
            algorithm.tell(infills=pop)
        generation += 1
    return "budget"


def run_optimization(gait: Gait, config: OptimizeConfig, executor=None,
                     previous: Sequence[dict] = (), on_row: Callable[[dict], None] | None = None,
                     evaluate: Callable[[list[dict]], list[dict]] | None = None
                     ) -> OptimizationResult:
    """Search (module docstring). ``previous``: the history of an earlier run
    of the same search (replayed, not simulated); ``on_row(row)`` gets every
    new evaluation as it is recorded; ``evaluate(points)`` replaces the model
    (tests: a known objective), otherwise candidates run on ``executor`` (in
    this process when None)."""
    if evaluate is None:
        def evaluate(points: list[dict]) -> list[dict]:
            if executor is None:
                return [evaluate_point(gait, p, config) for p in points]
            futures = [executor.submit(evaluate_point, gait, p, config) for p in points]
            return [f.result() for f in futures]

    start = {k: math.degrees(getattr(gait, k)) for k in config.vary}
    x0 = _point_to_unit(start, config)
    batches = _Batches(config, evaluate, list(previous), on_row)
    w0 = time.perf_counter()
    if config.objective == "both":
        stopped = _nsga2(config, x0, batches, config.budget)
    else:
        stopped = _cma(config, x0, batches, config.budget)
    history = batches.history
    feasible = [r for r in history if r["feasible"]]
    best = None
    front: list[dict] = []
    if feasible:
        if config.objective == "both":
            F = np.array([objective_values(r, "both") for r in feasible])
            front = sorted((feasible[i] for i in pareto_front(F)),
                           key=lambda r: -r["speed_m_s"])
            best = front[0]
        else:
            best = min(feasible, key=lambda r: objective_values(r, config.objective)[0])
    return OptimizationResult(config, history, best, front, len(history), batches.evaluated,
                              time.perf_counter() - w0, stopped)
