"""How large a time step do the presets tolerate, with explicit and implicit drives?

    python benchmarks/timestep_study.py                       # 15 s, 3 members per ensemble
    python benchmarks/timestep_study.py --duration 5 --dt 0.5 1 2 --members 3

Lateral undulation is sensitive: friction coefficients changed by one part in a
million move link 6 by centimetres after 15 s, and so do a tighter solver
tolerance or a halved step (seeds' numerics notes). A single run at a larger
step, compared with a single reference run, measures that sensitivity as much as
the step's error. So every configuration runs as an ensemble of ``--members``
runs whose friction coefficients differ by k parts in a million
(k = 0 .. members - 1), and the study compares ensemble means:

* the reference: explicit drives (the paper's step) at 0.25 ms with the solver
  tolerance they had (u_tol 1e-8 m/s), and how well it is itself defined: the
  same at half the step, with a tolerance ten times tighter, and with the
  paper's warm start (the last impulses) instead of the extrapolated one;
* for each drive and step: the largest distance between the ensemble's mean
  link-6 path and the reference's, sampled at 20 Hz over the run ("bias"), and
  between end points;
* the spread: the largest distance of a member's path from its own ensemble's
  mean (what one run can be trusted to), for the reference as well;
* the distance travelled (the mean end point's distance from the start) and its
  error against the reference's;
* the cost: sweeps per step, us/step (median over the members, one core) and
  the realtime factor.

A step passes when its bias is within 1 % of the distance travelled or 1 cm,
whichever is larger, on every preset. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from machine import describe
from timed import PAPER_PRESETS, timed_run

from aiko.control import PRESETS
from aiko.model import SnakeModel, SnakeParams, SolverParams


REFERENCE = SolverParams(dt=0.00025, drive="explicit", u_tol=1e-8, active_tol=1e-9)
"""The model as the paper steps it, with the solver settings it had before the
implicit drives and today's extrapolated warm start (the row "reference/warm"
takes the paper's): the reference every step is compared with."""


def ensemble(name: str, solver: SolverParams, duration: float, members: int):
    """Link-6 paths (members, samples, 2), us/step and sweeps/step per member;
    None when a member diverges."""
    gait = PRESETS[name]
    paths, us, sweeps = [], [], []
    for k in range(members):
        f = 1.0 + 1e-6 * k
        model = SnakeModel(SnakeParams(mu_x=gait.mu_x * f, mu_y=gait.mu_y * f), solver)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0, help="simulated s (default 15)")
    ap.add_argument("--dt", type=float, nargs="+", default=[0.25, 0.5, 1.0, 1.5, 2.0, 3.0],
                    help="time steps in ms")
    ap.add_argument("--members", type=int, default=3, help="runs per ensemble (default 3)")
    ap.add_argument("--drive", nargs="+", default=["explicit", "implicit"],
                    help="drives to study; implicit@W sets the drive weight W")
    ap.add_argument("--presets", nargs="+", default=list(PAPER_PRESETS))
    a = ap.parse_args()
    print(f"machine: {describe()}; one core; {a.duration:g} s per run, {a.members} members "
          "per ensemble; other solver settings at their defaults")
    print(f"{'preset':<32}{'drive':>13}{'dt ms':>6}{'bias cm':>9}{'end cm':>8}{'spread cm':>10}"
          f"{'travel m':>9}{'err %':>7}{'sweeps':>8}{'us/step':>9}{'RTF':>7}  within")
    verdict: dict[tuple[str, float], bool] = {}
    for name in a.presets:
        ref = ensemble(name, REFERENCE, a.duration, a.members)
        if ref is None:
            raise SystemExit(f"{name}: the reference diverged")
        ref_paths = ref[0]
        ref_mean = ref_paths.mean(axis=0)
        travel_ref = float(np.linalg.norm(ref_mean[-1] - ref_mean[0]))
        bound = max(0.01, 0.01 * travel_ref)
        print(f"{name:<32}{'explicit':>13}{0.25:>6.2f}{'ref':>9}{'':>8}"
              f"{100 * spread(ref_paths):>10.2f}{travel_ref:>9.3f}{'':>7}"
              f"{statistics.mean(ref[2]):>8.1f}{statistics.median(ref[1]):>9.1f}"
              f"{250 / statistics.median(ref[1]):>7.2f}  (bound {100 * bound:.2f} cm)")
        for drive in ["reference/2", "reference/tol", "reference/warm"] + a.drive:
            for dt_ms in (a.dt if not drive.startswith("reference") else [0.0]):
                if drive.startswith("reference"):
                    solver = {"reference/2": REFERENCE.with_(dt=0.000125),
                              "reference/tol": REFERENCE.with_(u_tol=1e-9),
                              "reference/warm": REFERENCE.with_(extrapolate=False)}[drive]
                    dt_ms = solver.dt * 1e3
                else:
                    kind, _, weight = drive.partition("@")
                    solver = SolverParams(dt=dt_ms * 1e-3, drive=kind,
                                          **({"drive_weight": float(weight)} if weight else {}))
                out = ensemble(name, solver, a.duration, a.members)
                if out is None:
                    print(f"{name:<32}{drive:>13}{dt_ms:>6.2f}   diverges (StateError)")
                    verdict[(drive, dt_ms)] = False
                    continue
                paths, us, sweeps = out
                k = min(len(paths[0]), len(ref_mean))
                mean = paths[:, :k].mean(axis=0)
                d = np.linalg.norm(mean - ref_mean[:k], axis=1)
                travel = float(np.linalg.norm(mean[-1] - mean[0]))
                ok = bool(d.max() <= bound)
                if not drive.startswith("reference"):
                    verdict[(drive, dt_ms)] = verdict.get((drive, dt_ms), True) and ok
                med = statistics.median(us)
                print(f"{name:<32}{drive:>13}{dt_ms:>6.2f}{100 * d.max():>9.2f}"
                      f"{100 * d[-1]:>8.2f}{100 * spread(paths):>10.2f}{travel:>9.3f}"
                      f"{100 * (travel - travel_ref) / travel_ref:>+7.1f}"
                      f"{statistics.mean(sweeps):>8.1f}{med:>9.1f}{dt_ms * 1e3 / med:>7.2f}"
                      f"  {'yes' if ok else 'no'}", flush=True)
    print("steps within the bound on every preset:",
          ", ".join(f"{d} {dt:g} ms" for (d, dt), ok in verdict.items() if ok) or "none")


if __name__ == "__main__":
    main()
