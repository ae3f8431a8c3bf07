"""What the simulated Aiko's time step costs and changes: each preset played on
the realistic plant (4 deg free play, the modules' servo, the plant's solver
settings) at two steps, offline and single-threaded, from the gait's start
posture with the references the streamer sends at 10 Hz:

    python benchmarks/plant_step.py                       # 15 s, dt 0.5 and 1 ms
    python benchmarks/plant_step.py --duration 5 --steps 0.0005 0.001 0.00025
    python benchmarks/plant_step.py --steps 0.0005 0.001,1e-6 0.001,1e-6,60
                                       # DT[,U_TOL[,CAP]]: the plant's tolerance
                                       # (m/s) and sweep cap unless given

Per preset and step: the CPU seconds of the first second of the gait (the
free play's start transient, where the rig's physics falls behind) and of the
whole run, the solver's iterations and capped steps, link 6's path length,
and against the first step listed: link 6's position error at the end and
RMS over the run (samples at 20 Hz), in mm and as a share of the path
length. Not part of the tests.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from machine import describe

from aiko.control.gait import PRESETS, references, soft_start_times
from aiko.experiments.analysis.simulate import initial_state_for_gait
from aiko.experiments.rig.plant import PlantParams, drive_plant
from aiko.model import SnakeModel, SnakeParams, SolverParams

PRESET_NAMES = ("sidewinding", "lateral-undulation", "lateral-undulation-orthotropic")
LINK = 5   # link 6


def play(preset: str, step: tuple[float, float, int], duration: float, plant: PlantParams):
    """(run, CPU seconds of the first second, CPU seconds in all)."""
    dt, u_tol, max_iter = step
    gait = PRESETS[preset]
    params = SnakeParams(n=11, **{k: v for k, v in (("mu_x", gait.mu_x), ("mu_y", gait.mu_y))
                                  if v is not None})
    model = SnakeModel(params, SolverParams(u_tol=u_tol, max_iter=max_iter, dt=dt))
    state = initial_state_for_gait(model, gait)
    t_refs = np.arange(int(round(duration * 10))) * 0.1
    refs = references(gait, t_refs, 10, t_start=soft_start_times(gait, 10))
    backlash = math.radians(plant.backlash_deg)
    t0 = time.process_time()
    drive_plant(model, state, t_refs[:10], refs[:10], 1.0, backlash, plant.servo)
    first = time.process_time() - t0
    t0 = time.process_time()
    run = drive_plant(model, state, t_refs, refs, duration, backlash, plant.servo)
    return run, first, time.process_time() - t0


def parse_step(text: str, plant: PlantParams) -> tuple[float, float, int]:
    """DT[,U_TOL[,CAP]] -> (dt, u_tol, cap), the plant's own where not given."""
    parts = text.split(",")
    return (float(parts[0]), float(parts[1]) if len(parts) > 1 else plant.u_tol,
            int(parts[2]) if len(parts) > 2 else plant.max_iter)


def label(step: tuple[float, float, int]) -> str:
    return f"dt {step[0] * 1e3:4.2f} ms, {step[1]:.0e} m/s, cap {step[2]:3d}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--steps", nargs="+", default=["0.0005", "0.001"])
    ap.add_argument("--presets", nargs="+", default=list(PRESET_NAMES))
    args = ap.parse_args()
    plant = PlantParams()
    steps = [parse_step(text, plant) for text in args.steps]
    print(f"machine: {describe()}")
    print(f"plant: free play {plant.backlash_deg} deg, servo {plant.servo}, u_tol "
          f"{plant.u_tol:g} m/s, cap {plant.max_iter} sweeps; {args.duration:g} s per run")
    for preset in args.presets:
        play(preset, steps[0], 0.3, plant)         # load the kernels
        ref = None
        for step in steps:
            run, first, total = play(preset, step, args.duration, plant)
            p = run.positions[:, LINK]
            path = float(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1).sum())
            line = (f"{preset:30s} {label(step)}: first 1 s {first:5.2f} s CPU, all "
                    f"{total:6.2f} s CPU ({total / args.duration:4.2f} of a core), "
                    f"{run.iterations / max(run.steps, 1):5.1f} sweeps/step, capped "
                    f"{run.unconverged}, path {path:6.3f} m")
            if ref is None:
                ref = p
            else:
                err = np.linalg.norm(p[:, :2] - ref[:, :2], axis=1)
                line += (f"; vs the first: end {1e3 * err[-1]:6.1f} mm, "
                         f"RMS {1e3 * math.sqrt(float(np.mean(err ** 2))):6.1f} mm "
                         f"({100 * err[-1] / max(path, 1e-9):.1f} % of the path)")
            print(line, flush=True)


if __name__ == "__main__":
    main()
