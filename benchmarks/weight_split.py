"""How a lying snake's weight splits between its spheres: the solver's tolerance
on the paper's rigid contact, the springs on the model's default one.

    python benchmarks/weight_split.py                    # the paper's presets, 10 s
    python benchmarks/weight_split.py --presets lateral-undulation-orthotropic --u-tol 1e-6 1e-9

The chain lying on the ground is statically indeterminate: the joints' vertical
shear forces can move weight from link to link, so the normal impulses that
stop every sphere from sinking are not unique. This prints, per preset and
solver tolerance, the rank of the normal impulses' Delassus matrix
W_N^T A W_N (A: the inverse mass with the joints' four constraint rows solved
out; from the dense twin, at the run's last state) and the share of the
ground's normal impulse that the links' front spheres carry, sampled every
0.5 s after the first 3 s (mean, smallest, largest), with how far link 6
travelled, for the paper's rigid contact (k_N = inf: the split is wherever
the iteration stops) and the model's contact springs (SnakeParams k_N, d_N:
the split is theirs, the same at every tolerance). Not part of the test
suite.
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from machine import describe
from timed import PAPER_PRESETS

from aiko.control import PRESETS
from aiko.experiments.analysis.simulate import simulate_gait
from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams, reference


def normal_rank(model: SnakeModel, state) -> tuple[int, int]:
    """(rank, size) of W_N^T A W_N for the spheres the state's last step had
    on the ground (its active set; relative threshold 1e-10 on the singular
    values)."""
    p = model.params
    m = reference.dense_matrices(state.q, reference._pars(model._par))
    minv = np.diag(np.tile([1 / p.m] * 3 + [1 / p.Theta1] * 2 + [1 / p.Theta3], p.n))
    WJ = m["W_J"]
    A = minv - minv @ WJ @ np.linalg.pinv(WJ.T @ minv @ WJ) @ WJ.T @ minv
    down = state.active[:2 * p.n]
    WN = m["W_N"][:, down]
    s = np.linalg.svd(WN.T @ A @ WN, compute_uv=False)
    return int((s > 1e-10 * s[0]).sum()) if s.size else 0, int(down.sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="simulated s (default 10)")
    ap.add_argument("--dt", type=float, default=0.5, help="time step, ms (default 0.5)")
    ap.add_argument("--u-tol", type=float, nargs="+", default=[1e-6, 1e-8, 1e-10],
                    help="solver tolerances, m/s")
    ap.add_argument("--cold", action="store_true",
                    help="every step's contact impulses start from zero")
    ap.add_argument("--presets", nargs="+", default=list(PAPER_PRESETS))
    ap.add_argument("--contact", nargs="+", choices=("rigid", "springs"),
                    default=["rigid", "springs"],
                    help="the paper's rigid contact, the default springs, or both")
    a = ap.parse_args()
    if a.duration <= 3.0:
        ap.error("--duration must be above 3 s (the samples start at 3 s)")
    print(f"machine: {describe()}; dt {a.dt:g} ms, {a.duration:g} s per run"
          + (", cold starts" if a.cold else ""))
    print(f"{'preset':<32}{'contact':>8}{'u_tol':>7}{'rank':>9}{'front share':>13}{'min':>7}{'max':>7}"
          f"{'sweeps':>8}{'link 6 moved m':>16}")
    for name in a.presets:
        gait = PRESETS[name]
        for contact, u_tol in ((c, u) for c in a.contact for u in a.u_tol):
            springs = {} if contact == "springs" else {"k_N": math.inf}
            model = SnakeModel(SnakeParams(mu_x=gait.mu_x, mu_y=gait.mu_y, **springs),
                               SolverParams(dt=a.dt * 1e-3, u_tol=u_tol,
                                            warm_start=not a.cold))
            n = model.n
            state, shares, sweeps, start = None, [], [], None
            t = 0.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                while t < a.duration - 1e-9:
                    span = 3.0 if state is None else min(0.5, a.duration - t)
                    r = simulate_gait(model, gait, span, state=state)
                    if start is None:
                        start = r.link(6)[0, :2]
                    state = r.final_state
                    t += span
                    sweeps.append(r.stats.iterations / max(r.stats.steps, 1))
                    P_N = state.P[:2 * n, 0]
                    if P_N.sum() > 0:
                        shares.append(P_N[:n].sum() / P_N.sum())
            rank, size = normal_rank(model, state)
            moved = np.linalg.norm(state.q[5, :2] - start)
            print(f"{name:<32}{contact:>8}{u_tol:>7.0e}{f'{rank}/{size}':>9}{np.mean(shares):>13.3f}"
                  f"{np.min(shares):>7.3f}{np.max(shares):>7.3f}{np.mean(sweeps):>8.1f}"
                  f"{moved:>16.3f}", flush=True)


if __name__ == "__main__":
    main()
