"""How large a time step do the presets tolerate, with explicit and implicit drives?

    python benchmarks/timestep_study.py                       # 15 s, 3 members per ensemble
    python benchmarks/timestep_study.py --duration 5 --dt 0.5 1 2 --members 3 --u-tol 1e-6

A run's path can depend on more than the step. On the paper's rigid contact
the contact problem is rank deficient, and where the solver stops among
equivalent impulses picks the path (a lying snake's weight split,
benchmarks/weight_split.py: at u_tol 1e-6 m/s the orthotropic preset
travelled 3 % further than solved to 1e-10). The model's contact springs
(SnakeParams k_N, d_N) make the impulses unique; what is left is the
sensitivity of stick and slip: friction changed by a part in a million moves
sidewinding's path by up to 6 mm (the undulation presets' by less than 0.05
mm). So every configuration runs as an ensemble of
``--members`` runs whose friction coefficients differ by k parts in a million
(k = 0 .. members - 1), and the study compares ensemble means:

* the reference: explicit drives (the paper's step) at 0.25 ms, solved to
  u_tol 1e-10 m/s, so that the solver's tolerance plays no part in it; and
  how well it is itself defined: the same at half the step, with the paper's
  warm start (the last impulses) instead of the extrapolated one, at u_tol
  1e-8, with ten times stiffer springs (how far from their stiff limit), and
  on the paper's rigid contact (k_N = inf, the solver's own weight split);
* for each drive, step and solver tolerance (``--u-tol``; default: the
  model's default and a tenfold tighter one): the largest distance between the
  ensemble's mean link-6 path and the reference's, sampled at 20 Hz over the
  run ("bias"), and between end points;
* with ``--refinements K``: the reference at 1/2, 1/4, ... 1/2^K of its step
  (K = 1, the default, is the half-step row above), and every configuration's
  bias also against the pooled reference, the mean path of the reference's
  and its refinements' members together ("pooled cm"): where the refined
  references do not converge to one path (sidewinding: 0.3-0.6 cm apart at
  any step from 0.25 to 0.03 ms), the bias against any one of them is known
  only to that;
* the spread: the largest distance of a member's path from its own ensemble's
  mean (what one run can be trusted to), for the reference as well;
* the distance travelled (the mean end point's distance from the start) and its
  error against the reference's;
* the cost: sweeps per step, us/step (median over the members, one core) and
  the realtime factor.

A configuration passes when its bias is within 1 % of the distance travelled
or 1 cm, whichever is larger, on every preset. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np
from machine import describe
from timed import PAPER_PRESETS, timed_run

from aiko.control import PRESETS
from aiko.model import SnakeModel, SnakeParams, SolverParams

REFERENCE = SolverParams(dt=0.00025, drive="explicit", u_tol=1e-10, active_tol=1e-9)
"""The model as the paper steps it, its contact problem solved to 1e-10 m/s
(an ensemble's members then agree to 0.05 mm on undulation, 2.6 mm on
sidewinding), with the extrapolated warm start (the row "reference/warm"
takes the paper's) and the model's contact springs (the row
"reference/rigid" takes the paper's rigid contact): the reference every
configuration is compared with."""

VARIANTS = {"reference/warm": (REFERENCE.with_(extrapolate=False), {}),
            "reference/1e-8": (REFERENCE.with_(u_tol=1e-8), {}),
            "reference/stiff": (REFERENCE, {"k_N": 10 * SnakeParams.k_N,
                                             "d_N": 10 * SnakeParams.d_N}),
            "reference/rigid": (REFERENCE, {"k_N": math.inf})}
"""The reference with the paper's warm start, at a looser tolerance, with
springs ten times stiffer (and dampers ten times stronger, the same time
constant d_N / k_N), and on the paper's rigid contact: how well the reference
is itself defined, beside its refinements (:func:`refinements`). Each:
(solver, SnakeParams changes)."""


def refinements(k: int) -> dict[str, tuple[SolverParams, dict]]:
    """The reference at 1/2, 1/4, ... 1/2^k of its step, labelled
    reference/2, reference/4, ..."""
    return {f"reference/{2 ** i}": (REFERENCE.with_(dt=REFERENCE.dt / 2 ** i), {})
            for i in range(1, k + 1)}


def ensemble(name: str, solver: SolverParams, duration: float, members: int,
             snake: dict | None = None):
    """Link-6 paths (members, samples, 2), us/step and sweeps/step per member;
    None when a member diverges. snake: SnakeParams changes."""
    gait = PRESETS[name]
    paths, us, sweeps = [], [], []
    for k in range(members):
        f = 1.0 + 1e-6 * k
        model = SnakeModel(SnakeParams(mu_x=gait.mu_x * f, mu_y=gait.mu_y * f, **(snake or {})),
                           solver)
        r = timed_run(model, gait, duration)
        if r is None:
            return None
        paths.append(r.link(6)[:, :2])
        us.append(r.us_per_step)
        sweeps.append(r.stats.iterations / max(r.stats.steps, 1))
    k = min(len(p) for p in paths)
    return np.array([p[:k] for p in paths]), us, sweeps


def spread(paths: np.ndarray) -> float:
    """Largest distance of a member's path from the ensemble mean, m."""
    return float(np.linalg.norm(paths - paths.mean(axis=0), axis=2).max())


def _bias(paths: np.ndarray, mean_ref: np.ndarray) -> np.ndarray:
    """Distance of the ensemble's mean path from mean_ref at each sample, m."""
    k = min(paths.shape[1], len(mean_ref))
    return np.linalg.norm(paths[:, :k].mean(axis=0) - mean_ref[:k], axis=1)


def _configs(a: argparse.Namespace) -> list[tuple[str, tuple[SolverParams, dict]]]:
    """The configurations studied against the reference after its
    refinements, in order: the reference's other variants, then each drive,
    tolerance and step."""
    configs = [] if a.no_variants else list(VARIANTS.items())
    for drive in a.drive:
        kind, _, weight = drive.partition("@")
        for u_tol in a.u_tol:
            for dt_ms in a.dt:
                configs.append((drive, (SolverParams(
                    dt=dt_ms * 1e-3, drive=kind, u_tol=u_tol,
                    **({"drive_weight": float(weight)} if weight else {})), {})))
    return configs


def _row(head: str, out, ref_mean: np.ndarray, pool: np.ndarray | None, bound: float,
         dt_ms: float) -> tuple[bool, str]:
    """Whether an ensemble ``out`` lies within the bound of the reference, and
    its row of the table."""
    paths, us, sweeps = out
    d = _bias(paths, ref_mean)
    k = len(d)
    mean = paths[:, :k].mean(axis=0)
    travel = float(np.linalg.norm(mean[-1] - mean[0]))
    travel_ref = float(np.linalg.norm(ref_mean[-1] - ref_mean[0]))
    pooled = f"{100 * _bias(paths, pool).max():>10.2f}" if pool is not None else ""
    med = statistics.median(us)
    ok = bool(d.max() <= bound)
    return ok, (f"{head}{100 * d.max():>9.2f}{100 * d[-1]:>8.2f}{100 * spread(paths):>10.2f}"
                f"{travel:>9.3f}{100 * (travel - travel_ref) / travel_ref:>+7.1f}"
                f"{statistics.mean(sweeps):>8.1f}{med:>9.1f}{dt_ms * 1e3 / med:>7.2f}"
                f"  {'yes' if ok else 'no'}{pooled}")


def study(name: str, a: argparse.Namespace, configs, verdict: dict) -> None:
    """One preset's rows: the reference, its refinements, then every
    configuration, each against the reference (and, with more than one
    refinement, against the pooled reference); verdict collects whether each
    configuration stays within the bound on every preset."""
    ref = ensemble(name, REFERENCE, a.duration, a.members)
    if ref is None:
        raise SystemExit(f"{name}: the reference diverged")
    ref_mean = ref[0].mean(axis=0)
    travel_ref = float(np.linalg.norm(ref_mean[-1] - ref_mean[0]))
    bound = max(0.01, 0.01 * travel_ref)
    refined = [(label, setting, ensemble(name, setting[0], a.duration, a.members, setting[1]))
               for label, setting in refinements(a.refinements).items()]
    pool = None
    if a.refinements > 1:
        pool = _pooled([ref[0]] + [out[0] for _, _, out in refined if out is not None])
    print(f"{name:<32}{'explicit':>15}{REFERENCE.dt * 1e3:>6.2f}{REFERENCE.u_tol:>7.0e}"
          f"{'ref':>9}{'':>8}{100 * spread(ref[0]):>10.2f}{travel_ref:>9.3f}{'':>7}"
          f"{statistics.mean(ref[2]):>8.1f}{statistics.median(ref[1]):>9.1f}"
          f"{REFERENCE.dt * 1e6 / statistics.median(ref[1]):>7.2f}"
          f"  (bound {100 * bound:.2f} cm)"
          + ("" if pool is None else f"{100 * _bias(ref[0], pool).max():>10.2f}"), flush=True)
    for label, (solver, _), out in refined:
        _report(name, label, solver, out, ref_mean, pool, bound, verdict)
    for label, (solver, snake) in configs:
        out = ensemble(name, solver, a.duration, a.members, snake)
        _report(name, label, solver, out, ref_mean, pool, bound, verdict)


def _report(name: str, label: str, solver: SolverParams, out, ref_mean: np.ndarray,
            pool: np.ndarray | None, bound: float, verdict: dict) -> None:
    """Print a configuration's row (None: it diverged) and note in verdict
    whether it stays within the bound (the reference's own rows aside)."""
    dt_ms = solver.dt * 1e3
    head = f"{name:<32}{label:>15}{dt_ms:>6.2f}{solver.u_tol:>7.0e}"
    key = (label, dt_ms, solver.u_tol)
    if out is None:
        print(f"{head}   diverges (StateError)", flush=True)
        verdict[key] = False
        return
    ok, row = _row(head, out, ref_mean, pool, bound, dt_ms)
    print(row, flush=True)
    if not label.startswith("reference"):
        verdict[key] = verdict.get(key, True) and ok


def _pooled(members: list[np.ndarray]) -> np.ndarray:
    """The mean path of every member of the reference and its refinements."""
    k = min(m.shape[1] for m in members)
    return np.concatenate([m[:, :k] for m in members]).mean(axis=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0, help="simulated s (default 15)")
    ap.add_argument("--dt", type=float, nargs="+", default=[0.25, 0.5, 1.0, 1.5, 2.0, 3.0],
                    help="time steps in ms")
    ap.add_argument("--members", type=int, default=3, help="runs per ensemble (default 3)")
    ap.add_argument("--drive", nargs="+", default=["explicit", "implicit"],
                    help="drives to study; implicit@W sets the drive weight W")
    ap.add_argument("--u-tol", type=float, nargs="+",
                    default=[SolverParams().u_tol, SolverParams().u_tol / 10],
                    help="solver tolerances to study, m/s (default: the model's and a "
                         "tenfold tighter one)")
    ap.add_argument("--presets", nargs="+", default=list(PAPER_PRESETS))
    ap.add_argument("--refinements", type=int, default=1,
                    help="the reference also at 1/2 ... 1/2^K of its step (default 1); "
                         "above 1, biases also against the pooled reference")
    ap.add_argument("--no-variants", action="store_true",
                    help="skip the reference's variants (warm start, tolerance, springs, "
                         "rigid contact), not its refinements")
    a = ap.parse_args()
    if a.refinements < 0:
        raise SystemExit(f"--refinements must be >= 0, got {a.refinements}")
    print(f"machine: {describe()}; one core; {a.duration:g} s per run, {a.members} members "
          "per ensemble; other solver settings at their defaults")
    print(f"{'preset':<32}{'drive':>15}{'dt ms':>6}{'u_tol':>7}{'bias cm':>9}{'end cm':>8}"
          f"{'spread cm':>10}{'travel m':>9}{'err %':>7}{'sweeps':>8}{'us/step':>9}{'RTF':>7}"
          "  within" + ("  pooled cm" if a.refinements > 1 else ""))
    configs = _configs(a)
    verdict: dict[tuple[str, float, float], bool] = {}
    for name in a.presets:
        study(name, a, configs, verdict)
    print("within the bound on every preset:",
          ", ".join(f"{d} {dt:g} ms u_tol {u:g}" for (d, dt, u), ok in verdict.items() if ok)
          or "none")


if __name__ == "__main__":
    main()
