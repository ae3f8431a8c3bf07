"""The contact solvers and their settings on the paper's presets.

    python benchmarks/solvers.py                 # the three solvers, 15 s each
    python benchmarks/solvers.py --settings      # SOR's alpha, link_passes, warm start

Prints Markdown table rows: link 6's displacement, sweeps per step, steps that
hit the iteration cap, us/step and the realtime factor, one core. This is how
the defaults (SOR, alpha 1, three passes per link) were chosen; the README shows
the tables as measured. Not part of the test suite.
"""

from __future__ import annotations

import argparse

from machine import describe
from timed import PAPER_PRESETS, timed_run

from aiko.control import PRESETS
from aiko.model import SnakeModel, SnakeParams, SolverParams


def row(name: str, label: str, solver: SolverParams, duration: float, repeat: int = 1) -> str:
    """One table row; with repeat > 1 the fastest of that many runs."""
    gait = PRESETS[name]
    model = SnakeModel(SnakeParams(mu_x=gait.mu_x, mu_y=gait.mu_y), solver)
    runs = [r for r in (timed_run(model, gait, duration) for _ in range(repeat)) if r]
    if not runs:
        return f"| {name} | {label} | diverges | | | | |"
    r = min(runs, key=lambda x: x.us_per_step)
    d = r.link(6)[-1] - r.link(6)[0]
    st = r.stats
    return (f"| {name} | {label} | ({d[0]:+.3f}, {d[1]:+.3f}) | {st.iterations / st.steps:.1f} "
            f"| {st.unconverged} | {r.us_per_step:.1f} | {r.realtime_factor:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0, help="simulated s (default 15)")
    ap.add_argument("--settings", action="store_true",
                    help="SOR with other alpha, link_passes and warm starts instead of the "
                         "three solvers")
    ap.add_argument("--dt", type=float, default=None,
                    help="time step, ms (default: the model's)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per row, the fastest counts (default 1)")
    a = ap.parse_args()
    print(f"machine: {describe()}; one core; {a.duration:g} s per run, dt "
          f"{(a.dt if a.dt is not None else SolverParams().dt * 1e3):g} ms"
          + (f", fastest of {a.repeat}" if a.repeat > 1 else ""))
    print("| preset | solver | link 6 moved (x, y) m | sweeps mean | unconverged steps "
          "| us/step | realtime factor |")
    print("|---|---|---|---|---|---|---|")
    base = SolverParams() if a.dt is None else SolverParams(dt=a.dt * 1e-3)
    if a.settings:
        configs = [(f"sor alpha {al}", base.with_(alpha=al)) for al in (0.8, 1.0, 1.2, 1.4)]
        configs += [(f"sor link_passes {k}", base.with_(link_passes=k)) for k in (1, 2, 5)]
        configs += [("sor, paper's warm start", base.with_(extrapolate=False))]
    else:
        configs = [(s, base.with_(solver=s)) for s in ("sor", "jor", "newton")]
    for name in PAPER_PRESETS:
        for label, solver in configs:
            print(row(name, label, solver, a.duration, a.repeat), flush=True)


if __name__ == "__main__":
    main()
