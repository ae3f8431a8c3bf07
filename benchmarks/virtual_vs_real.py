"""The same trial in real time and in virtual time: does virtual time give what
real time gives, within the realistic simulated Aiko's run-to-run spread?

For each preset, ``--runs`` trials of ``--duration`` s on the realistic
simulated Aiko with the model in parallel (``aiko run``), in real time, and
as many in virtual time with motion-capture noise seeds 0, 1, ... (a virtual
trial is deterministic: the same seed, the same trial; real-time runs differ
by their timing, and with ``--real-seeds`` by the same seeds' noise too, as
a rehearsal's repetitions differ in both). Reports each run's comparison
(RMS and final error of link 6, the net displacement ratio, the heading
difference), its wall time and late periods, and per preset and mode the
mean and spread.

    python benchmarks/virtual_vs_real.py --runs 3 --duration 15
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

PRESETS = ("sidewinding", "lateral-undulation", "lateral-undulation-orthotropic")
KEYS = ("rms_error_m", "final_error_m", "distance_ratio", "heading_difference_deg")


def run(gait: str, mode: str, k: int, duration: float, folder: Path,
        real_seeds: bool = False) -> dict:
    out = folder / f"{gait}-{mode}-{k}.mcap"
    argv = [sys.executable, "-m", "aiko.experiments.cli", "run", gait, "--duration",
            str(duration), "--out", str(out)]
    if mode == "virtual":
        argv += ["--time", "virtual"]
    if mode == "virtual" or real_seeds:
        argv += ["--plant-seed", str(k)]
    w0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - w0
    if done.returncode != 0:
        return {"gait": gait, "mode": mode, "run": k, "error": done.stderr.strip()[-300:]}
    metrics = json.loads(out.with_suffix(".json").read_text())
    late = next((line.split(" late,")[0].rsplit(" ", 1)[-1] for line in done.stdout.splitlines()
                 if line.startswith("trial completed")), "?")
    return {"gait": gait, "mode": mode, "run": k, "wall_s": wall, "late": late,
            **{key: metrics[key] for key in KEYS}}


def spread(rows: list[dict], key: str) -> str:
    values = [r[key] for r in rows if key in r]
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f} ({min(values):.3f}..{max(values):.3f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--presets", default=",".join(PRESETS))
    p.add_argument("--real-seeds", action="store_true",
                   help="real-time run k with the noise seed k too (default: seed 0)")
    a = p.parse_args()
    print(f"# {datetime.now():%Y-%m-%d %H:%M}, {platform.machine()} {platform.processor() or ''}"
          f" Python {platform.python_version()}, {a.runs} runs x {a.duration:g} s"
          f"{', real time with seeds 0..' + str(a.runs - 1) if a.real_seeds else ''}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for gait in a.presets.split(","):
            for k in range(a.runs):          # interleaved: the host's moods fall on both
                for mode in ("real", "virtual"):
                    r = run(gait, mode, k, a.duration, Path(tmp), a.real_seeds)
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    print("\n| preset | time | wall s | RMS error m | final error m | net disp. ratio "
          "| heading diff deg |")
    print("|---|---|---|---|---|---|---|")
    for gait in a.presets.split(","):
        for mode in ("real", "virtual"):
            sel = [r for r in rows if r["gait"] == gait and r["mode"] == mode and "error" not in r]
            print(f"| {gait} | {mode} | {spread(sel, 'wall_s')} | "
                  + " | ".join(spread(sel, key) for key in KEYS) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
