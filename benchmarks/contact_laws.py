"""Hard against compliant contact on Aiko, in the manner of Gehring et al.'s Table 1.

    python benchmarks/contact_laws.py [--duration 15] [--dt 0.25 0.5 1 2 4]
    python benchmarks/contact_laws.py --laws compliant --compliant-u-tol 1e-5

For each paper preset and each contact law (SnakeParams(contact=...)), on one
core: the cost at each time step (us per step, sweeps per step, realtime
factor), whether the run stays stable and accurate (link 6's end within 1 cm
of the hard model at the first step, 0.25 ms), the deepest penetration seen
(sampled at 20 Hz), and at 0.25 ms how far the compliant run's link 6 ends
from the hard run's (and the largest distance between the two paths). Then a
resting straight snake on a 5 deg slope with mu 0.2 for 10 s: how far each law
lets it creep. Default solver settings for both laws. Not part of the test
suite; about ten minutes on two cores.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from machine import describe
from timed import PAPER_PRESETS

from aiko.control import PRESETS, references, soft_start_times
from aiko.experiments.analysis.simulate import initial_state_for_gait
from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams, StateError


def run(name: str, contact: str, dt: float, duration: float, u_tol: float | None = None):
    """(link 6 at 20 Hz (k, 3), deepest penetration m, us/step, sweeps/step,
    unconverged steps, realtime factor) or None if it diverged."""
    gait = PRESETS[name]
    model = SnakeModel(SnakeParams(mu_x=gait.mu_x, mu_y=gait.mu_y, contact=contact),
                       SolverParams(dt=dt) if u_tol is None else SolverParams(dt=dt, u_tol=u_tol))
    nj = model.n - 1
    ts = soft_start_times(gait, nj)
    state = initial_state_for_gait(model, gait)
    per = max(1, int(round(0.05 / dt)))
    total = int(round(duration / dt))
    link6, deepest, wall, sweeps, unconv = [state.q[5, :3].copy()], 0.0, 0.0, 0, 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.run_steps(state, references(gait, np.zeros(10), nj, t_start=ts))  # compile
        done = 0
        try:
            while done < total:
                m = min(per, total - done)
                refs = references(gait, state.t + np.arange(m) * dt, nj, t_start=ts)
                t0 = time.perf_counter()
                state, st = model.run_steps(state, refs)
                wall += time.perf_counter() - t0
                sweeps += st.iterations
                unconv += st.unconverged
                done += m
                link6.append(state.q[5, :3].copy())
                deepest = min(deepest, float(model.contact_gaps(state).min()))
        except StateError:
            return None
    p = np.array(link6)
    if not np.all(np.isfinite(p)) or np.abs(p[:, 2]).max() > 1.0:
        return None
    return p, -deepest, 1e6 * wall / total, sweeps / total, unconv, duration / wall


def creep(contact: str, seconds: float = 10.0) -> float:
    model = SnakeModel(SnakeParams(slope_deg=5.0, contact=contact))
    s0 = model.initial_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        s, _ = model.advance(s0, seconds)
    return float(np.abs(s.q[:, :3] - s0.q[:, :3]).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--dt", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0, 4.0],
                    help="time steps, ms; the first is the reference")
    ap.add_argument("--compliant-u-tol", type=float, default=None, metavar="M_S",
                    help="the compliant law's velocity tolerance (default: the solver's, "
                         "1e-8 m/s)")
    ap.add_argument("--laws", nargs="+", default=["hard", "compliant"])
    a = ap.parse_args()
    print(f"machine: {describe()}; one core; {a.duration:g} s per run")
    print(f"{'preset':<32}{'law':<11}{'dt ms':>6}{'end cm':>8}{'us/step':>9}{'sweeps':>8}"
          f"{'capped':>8}{'RTF':>7}{'depth um':>10}")
    for name in PAPER_PRESETS:
        ref = None
        ends = {}
        for contact in ("hard", "compliant"):
            for dt_ms in a.dt:
                if contact not in a.laws and not (contact == "hard" and dt_ms == a.dt[0]):
                    continue
                r = run(name, contact, dt_ms * 1e-3, a.duration,
                        a.compliant_u_tol if contact == "compliant" else None)
                if r is None:
                    print(f"{name:<32}{contact:<11}{dt_ms:>6.2f}   diverges")
                    continue
                p, depth, us, sw, capped, rtf = r
                if ref is None:
                    ref = p
                k = min(len(ref), len(p))
                end = np.linalg.norm(p[k - 1, :2] - ref[k - 1, :2])
                if dt_ms == a.dt[0]:
                    ends[contact] = p
                flag = "" if end <= 0.01 else "  (> 1 cm)"
                print(f"{name:<32}{contact:<11}{dt_ms:>6.2f}{100 * end:>8.2f}{us:>9.1f}{sw:>8.1f}"
                      f"{capped:>8d}{rtf:>7.2f}{1e6 * depth:>10.1f}{flag}")
        if len(ends) == 2:
            h, c = ends["hard"], ends["compliant"]
            k = min(len(h), len(c))
            d = np.linalg.norm(h[:k, :2] - c[:k, :2], axis=1)
            dist_h = np.linalg.norm(h[k - 1, :2] - h[0, :2])
            print(f"  {name}: compliant vs hard at {a.dt[0]} ms: link 6 ends {100 * d[-1]:.2f} cm "
                  f"apart (largest {100 * d.max():.2f} cm) after {dist_h:.3f} m of travel")
    for contact in a.laws:
        print(f"resting snake, 5 deg slope, mu 0.2, 10 s, {contact}: creeps "
              f"{1e3 * creep(contact):.4f} mm")


if __name__ == "__main__":
    main()
