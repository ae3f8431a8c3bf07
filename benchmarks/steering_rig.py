"""Closed loop through motion capture on the simulated rig, realistic plant.

    python benchmarks/steering_rig.py [--out runs/steering] [--duration 40]

Orthotropic lateral undulation (the model's floor mu_x 0.1, mu_y 0.5) on a
simulated floor unlike it (mu_x 0.15, mu_y 0.4), trials of `aiko run`: open
loop; heading hold at +30 deg; LOS along a straight line 0.3 m to the left of
the start; LOS along an L-shaped waypoint path; then the same gait with every
horizontal reference 2 deg off (as joints whose zero is off), open loop and
holding heading 0 with the proportional law alone and with the integral term.
Prints each run's steering metrics (settling time, steady error, cross-track
error) and writes the figures to docs/figures/steering-*.png. About
eight minutes on two cores. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

from machine import describe

from aiko.experiments.analysis.steering_report import (
    steering_figure,
    steering_metrics,
    steering_series,
)
from aiko.experiments.files.triallog import read_trial

GAIT = "lateral-undulation-orthotropic"
FLOOR = ["--plant-mu-x", "0.15", "--plant-mu-y", "0.4"]
PATHS = {
    "line": "[path]\nwaypoints = [[0.0, 0.3], [3.0, 0.3]]\n",
    "ell": "[path]\nwaypoints = [[0.0, 0.0], [1.2, 0.0], [1.2, 1.5]]\n",
}
BIASED = ("[gait]\nA_h = 30.0\nomega_h = 80.0\ndelta_h = -50.0\npsi_h = 0.0\nA_v = 0.0\n"
          "omega_v = 0.0\ndelta_v = 0.0\ndelta_0 = 0.0\npsi_v = 0.0\noffset = 2.0\n"
          "start = \"curved\"\n[friction]\nmu_x = 0.1\nmu_y = 0.5\n")
FIGURES = Path(__file__).resolve().parents[1] / "docs" / "figures"


def run(out: Path, name: str, duration: float, *extra: str, gait: str = GAIT) -> Path:
    log = out / f"{name}.mcap"
    cmd = [sys.executable, "-m", "aiko.experiments.cli", "run", gait, "--duration",
           str(duration), "--out", str(log), *FLOOR, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{name}: aiko run failed:\n{r.stdout}\n{r.stderr}")
    return log


def link6(data):
    t, p = data.mocap()
    t0 = data.references("gait")[0][0]
    keep = t >= t0
    return p[keep, 0], p[keep, 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/steering"))
    ap.add_argument("--duration", type=float, default=40.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(describe())
    for name, text in PATHS.items():
        (args.out / f"{name}.toml").write_text(text)
    biased = args.out / "biased.toml"
    biased.write_text(BIASED)
    open_loop = {}
    for name, gait in (("open-loop", GAIT), ("biased-open-loop", str(biased))):
        xy = open_loop[gait] = link6(read_trial(run(args.out, name, args.duration, gait=gait)))
        x, y = xy
        print(f"{name}: link 6 heading of travel "
              f"{math.degrees(math.atan2(y[-1] - y[0], x[-1] - x[0])):+.1f} deg, "
              f"{math.hypot(x[-1] - x[0], y[-1] - y[0]):.2f} m")
    cases = [("heading", GAIT, "heading hold +30 deg", args.duration, ["--heading", "30"]),
             ("line", GAIT, "LOS: a straight line 0.3 m to the left", args.duration,
              ["--path", str(args.out / "line.toml")]),
             ("ell", GAIT, "LOS: an L-shaped waypoint path", 1.5 * args.duration,
              ["--path", str(args.out / "ell.toml")]),
             ("bias-p", str(biased), "joints 2 deg off, heading hold 0 deg, k_i = 0",
              args.duration, ["--heading", "0", "--steer-ki", "0"]),
             ("bias", str(biased), "joints 2 deg off, heading hold 0 deg", args.duration,
              ["--heading", "0"])]
    import matplotlib.pyplot as plt
    results = {}
    for name, gait, title, duration, extra in cases:
        data = read_trial(run(args.out, name, duration, *extra, gait=gait))
        s = steering_series(data)
        m = steering_metrics(s)
        results[name] = m
        print(f"{title}: {json.dumps(m)}")
        if name == "bias-p":
            continue
        fig = steering_figure(s, f"{GAIT} on the realistic simulated rig, floor mu 0.15/0.4: "
                              f"{title}", m, link6(data), open_loop[gait])
        fig.savefig(FIGURES / f"steering-{name}.png", dpi=100)
        plt.close(fig)
    (args.out / "metrics.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
