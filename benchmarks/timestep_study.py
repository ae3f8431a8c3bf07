"""How large a time step do the presets tolerate?

    python benchmarks/timestep_study.py                  # 15 s per preset and step
    python benchmarks/timestep_study.py --duration 5 --dt 0.25 0.5 1.0

Runs each paper preset at several time steps and reports, against the run at the
smallest step, where link 6 ends (the distance between the end positions) and
the largest distance between the two link-6 paths sampled at 20 Hz, with the
cost (us/step, sweeps/step, realtime factor). A run that diverges is reported
as such (the PD torques are explicit, so a large enough step is unstable). The
joint references change at 10 Hz on the robot, so anything up to several
milliseconds would be fine for the controller; the contact and PD dynamics
decide. Not part of the test suite.
"""

from __future__ import annotations

import argparse

import numpy as np

from machine import describe
from timed import PAPER_PRESETS, timed_run

from aiko.control import PRESETS
from aiko.model import SnakeModel, SnakeParams, SolverParams

def run(name: str, dt: float, duration: float):
    gait = PRESETS[name]
    model = SnakeModel(SnakeParams(mu_x=gait.mu_x, mu_y=gait.mu_y), SolverParams(dt=dt))
    return timed_run(model, gait, duration)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0, help="simulated s (default 15)")
    ap.add_argument("--dt", type=float, nargs="+", default=[0.25, 0.5, 0.75, 1.0],
                    help="time steps in ms; the first is the reference")
    a = ap.parse_args()
    print(f"machine: {describe()}; one core; {a.duration:g} s per run")
    print(f"{'preset':<32}{'dt ms':>6}{'end dist cm':>12}{'max dist cm':>12}"
          f"{'us/step':>9}{'sweeps':>8}{'RTF':>7}")
    for name in PAPER_PRESETS:
        ref = None
        for dt_ms in a.dt:
            r = run(name, dt_ms * 1e-3, a.duration)
            if r is None:
                print(f"{name:<32}{dt_ms:>6.2f}   diverges (StateError)")
                continue
            p6 = r.link(6)
            if ref is None:
                ref = p6
            k = min(len(ref), len(p6))
            end = np.linalg.norm(p6[k - 1, :2] - ref[k - 1, :2])
            worst = np.linalg.norm(p6[:k, :2] - ref[:k, :2], axis=1).max()
            sweeps = r.stats.iterations / max(r.stats.steps, 1)
            print(f"{name:<32}{dt_ms:>6.2f}{100 * end:>12.2f}{100 * worst:>12.2f}"
                  f"{r.us_per_step:>9.1f}{sweeps:>8.1f}{r.realtime_factor:>7.2f}")


if __name__ == "__main__":
    main()
