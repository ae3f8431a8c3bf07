"""The best sidewinding the model finds at mu 0.2, and whether Dask changes the search.

    python benchmarks/optimize_gaits.py                      # speed, 300 candidates
    python benchmarks/optimize_gaits.py --budget 120 --out runs/opt

1. CMA-ES for speed over A_h, omega_h, delta_h, A_v, delta_0 of the paper's
   sidewinding and their vertical twins omega_v, delta_v (12 s per candidate, the joint limits, 80 % of the motors'
   full-duty speed, no link lifted over 12 cm) on the local process pool:
   the best gait against the preset (speed, cost of transport), the wall time
   and the evaluations.
2. The first ``--check`` candidates of the same search again on a Dask
   LocalCluster (two worker processes): the histories must be identical.
3. NSGA-II for speed and CoT together (``--pareto`` candidates): the front.

Writes the runs' folders (best.toml, history.csv, figures) under --out. Not
part of the test suite.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import time
from pathlib import Path

from machine import describe

from aiko.control.gait import PRESETS
from aiko.experiments.analysis.executor import open_executor
from aiko.experiments.analysis.optimize import OptimizeConfig, parse_bounds
from aiko.experiments.analysis.optimize_run import RunFolder, write_outputs

VARY = ("A_h", "omega_h", "delta_h", "A_v", "omega_v", "delta_v", "delta_0")


def search(out: Path, objective: str, budget: int, scheduler=None, popsize=16, seed=1):
    gait = PRESETS["sidewinding"]
    config = OptimizeConfig(vary=VARY, bounds=parse_bounds(None, VARY), objective=objective,
                            duration=12.0, budget=budget, popsize=popsize, seed=seed,
                            sigma0=0.25)
    if out.exists():
        shutil.rmtree(out)
    folder = RunFolder.open(out, gait, config)
    w0 = time.perf_counter()
    with open_executor(scheduler, workers=None if scheduler else 2) as ex:
        res = folder.run(ex)
    wall = time.perf_counter() - w0
    write_outputs(out, gait, res, folder.start_row)
    return res, folder.start_row, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--check", type=int, default=20)
    ap.add_argument("--pareto", type=int, default=200)
    ap.add_argument("--out", type=Path, default=Path("optimize-runs"))
    args = ap.parse_args()
    print(describe())
    res, s0, wall = search(args.out / "speed", "speed", args.budget)
    b = res.best
    print(f"speed search: {res.evaluations} evaluations in {wall:.0f} s on the local pool "
          f"(2 workers), {sum(r['feasible'] for r in res.history)} feasible")
    print(f"  preset sidewinding: {100 * s0['speed_m_s']:.2f} cm/s, CoT {s0['cot']:.3f}")
    print("  best: " + ", ".join(f"{k} {b[k]:.1f}" for k in VARY)
          + f": {100 * b['speed_m_s']:.2f} cm/s ({b['speed_m_s'] / s0['speed_m_s']:.2f}x), "
            f"CoT {b['cot']:.3f}")

    from distributed import LocalCluster

    local, _, _ = search(args.out / "check-local", "speed", args.check)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        dask, _, wall_d = search(args.out / "check-dask", "speed", args.check,
                                 scheduler=cluster.scheduler_address)
    keys = VARY + ("feasible", "speed_m_s", "cot", "reason")
    same = [[repr(r[k]) for k in keys] for r in local.history] == \
        [[repr(r[k]) for k in keys] for r in dask.history]   # repr: nan equals nan
    print(f"Dask LocalCluster, first {args.check} candidates: history "
          f"{'identical to' if same else 'DIFFERENT from'} the local pool's ({wall_d:.0f} s)")

    res, s0, wall = search(args.out / "pareto", "both", args.pareto, popsize=24)
    print(f"Pareto search: {res.evaluations} evaluations in {wall:.0f} s; "
          f"{len(res.front)} gaits on the front")
    with open(args.out / "pareto" / "pareto.csv") as f:
        for r in csv.DictReader(f):
            print(f"  {100 * float(r['speed_m_s']):6.2f} cm/s  CoT {float(r['cot']):.3f}")


if __name__ == "__main__":
    main()
