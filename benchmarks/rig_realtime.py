"""Does the simulated Aiko keep the firmware's timing? `aiko run` on each preset
(realistic plant, the model in parallel, the plant's motion capture at 100 Hz),
several runs each, with what the trial summary reports:

    python benchmarks/rig_realtime.py                         # 3 presets x 5 runs, 15 s
    python benchmarks/rig_realtime.py --runs 2 --duration 10 --presets sidewinding
    python benchmarks/rig_realtime.py --compare ../before     # interleaved with another tree
    python benchmarks/rig_realtime.py --load                  # a CPU-bound process beside it
    python benchmarks/rig_realtime.py --quiet 0.5             # each run after a quiet 10 s

Per run: SYNC->STATE p50/p99/max (the runner's round trips, one per STATE),
the physics' lag p99/max and late updates (> 10 ms) as the simulated Aiko
reports them, the parallel model's lag max (ms, as the summary gives it in
0.01 s), late periods, and the CPU seconds of each process (sampled from
/proc every 0.5 s: the runner, the simulated Aiko's modules and its physics
process, the parallel model), and the share of the processors' time the
hypervisor stole during the run (``steal``, /proc/stat: on a virtual machine
the floor under every figure; no process priority helps against it).
``--compare DIR`` runs every run a second time with DIR on PYTHONPATH first
(a folder holding an ``aiko`` package, e.g. symlinks into another checkout),
alternating, so that the machine's drift hits both alike. Not part of the tests.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_times, describe, steal_percent, wait_for_quiet

BURN = "import itertools\nfor _ in itertools.count():\n    pass\n"
PRESETS = ("sidewinding", "lateral-undulation", "lateral-undulation-orthotropic")
_PATTERNS = {
    "rtt": r"SYNC->STATE p50 ([\d.]+) ms, p99 ([\d.]+) ms(?:, max ([\d.]+) ms)?",
    "lag": r"physics lag max ([\d.]+) ms(?:, p99 ([\d.]+) ms)?(?:, p50 ([\d.]+) ms)?, (\d+) late updates",
    "periods": r"(\d+) periods, (\d+) late, (\d+) missed",
    "answer": r"SYNC->STATE on its bus p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms",
    "model": r"parallel model: \d+ samples, lag max ([\d.]+) s",
}


def descendants(root: int) -> dict[int, str]:
    """{pid: role} of root and every process below it."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out: dict[int, str] = {}
    todo = [(root, "runner")]
    while todo:
        pid, role = todo.pop()
        try:
            cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"SCHED_IDLE" in cmd:
            role = "idle spinner"   # aiko.drivers.awake's, one per processor
        elif b"emulate" in cmd:
            role = "simulated Aiko"
        elif b"parallel_model" in cmd:
            role = "parallel model"
        elif b"resource_tracker" in cmd:
            role = "resource tracker"   # multiprocessing's, beside the physics process
        elif b"multiprocessing" in cmd and role == "simulated Aiko":
            role = "physics"      # the simulated Aiko's physics process
        out[pid] = role
        todo += [(p, role) for p, pp in parents.items() if pp == pid]
    return out


_RANK = {"runner": 0, "simulated Aiko": 1, "physics": 2, "parallel model": 2,
         "resource tracker": 2, "idle spinner": 2}


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(preset: str, duration: float, folder: str, pythonpath: str | None) -> dict:
    """One `aiko run`; the figures its summary prints and the CPU per process."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = os.path.join(folder, f"{preset}-{time.monotonic_ns()}.mcap")
    proc = subprocess.Popen([sys.executable, "-m", "aiko.experiments.cli", "run", preset,
                             "--duration", str(duration), "--out", out],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    cpu: dict[int, tuple[str, float]] = {}
    steal0 = cpu_times()
    while proc.poll() is None:
        for pid, role in descendants(proc.pid).items():
            c = cpu_seconds(pid)
            if c is not None:
                # a child read just after its fork (its parent's cmdline) or as a
                # zombie at the end (none) keeps the most specific role it was seen with
                if pid in cpu and _RANK[cpu[pid][0]] > _RANK[role]:
                    role = cpu[pid][0]
                cpu[pid] = (role, c)
        time.sleep(0.5)
    text = proc.stdout.read() if proc.stdout else ""
    row: dict = {"rc": proc.returncode}
    if (steal := steal_percent(steal0, cpu_times())) is not None:
        row["steal %"] = steal
    if m := re.search(_PATTERNS["rtt"], text):
        row.update(rtt_p50=float(m[1]), rtt_p99=float(m[2]),
                   rtt_max=float(m[3]) if m[3] else float("nan"))
    if m := re.search(_PATTERNS["lag"], text):
        row.update(lag_max=float(m[1]), lag_p99=float(m[2]) if m[2] else float("nan"),
                   lag_p50=float(m[3]) if m[3] else float("nan"), late_updates=int(m[4]))
    if m := re.search(_PATTERNS["periods"], text):
        row.update(periods=int(m[1]), late_periods=int(m[2]), missed=int(m[3]))
    if m := re.search(_PATTERNS["answer"], text):
        row.update(rig_p50=float(m[1]), rig_p99=float(m[2]), rig_max=float(m[3]))
    if m := re.search(_PATTERNS["model"], text):
        row.update(model_lag_max=1000.0 * float(m[1]))
    for role, c in cpu.values():
        row[f"cpu {role}"] = row.get(f"cpu {role}", 0.0) + c
    if proc.returncode != 0:
        row["error"] = text.strip().splitlines()[-1] if text.strip() else "?"
    return row


COLUMNS = ("rtt_p50", "rtt_p99", "rtt_max", "rig_p50", "rig_p99", "rig_max", "lag_p50", "lag_p99", "lag_max", "late_updates",
           "model_lag_max",
           "late_periods", "cpu runner", "cpu simulated Aiko", "cpu physics",
           "cpu parallel model", "steal %")


def _line(label: str, row: dict) -> str:
    cells = []
    for c in COLUMNS:
        v = row.get(c)
        cells.append("-" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v))
    return f"| {label} | " + " | ".join(cells) + " |" + (f" {row['error']}" if "error" in row
                                                         else "")


def add_quiet_argument(ap: argparse.ArgumentParser, each: str = "each run") -> None:
    """``--quiet PCT`` on a benchmark's command line (see :func:`quiet`)."""
    ap.add_argument("--quiet", type=float, default=None, metavar="PCT",
                    help=f"start {each} only after 10 s in which the hypervisor stole "
                         "less than PCT %% (at most an hour's wait; its own steal is "
                         "reported whatever it is)")


def quiet(limit_pct: float | None) -> None:
    """With ``--quiet``: wait for a quiet host before a run, saying how long."""
    if limit_pct is None:
        return
    steal, waited = wait_for_quiet(limit_pct)
    if steal is not None:
        print(f"(waited {waited:.0f} s; {steal:.1f} % stolen in the last 10 s)",
              file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--compare", default=None, metavar="DIR",
                    help="also run with DIR first on PYTHONPATH, interleaved")
    ap.add_argument("--load", action="store_true", help="a CPU-bound process beside it")
    add_quiet_argument(ap)
    a = ap.parse_args()
    variants = [("this tree", None)] + ([("compared", a.compare)] if a.compare else [])
    burner = subprocess.Popen([sys.executable, "-c", BURN]) if a.load else None
    rows: dict[tuple[str, str], list[dict]] = {}
    try:
        with tempfile.TemporaryDirectory() as folder:
            for preset in a.presets:
                for k in range(a.runs):
                    for name, path in variants:
                        quiet(a.quiet)
                        row = run_once(preset, a.duration, folder, path)
                        rows.setdefault((preset, name), []).append(row)
                        print(_line(f"{preset} {name} {k + 1}", row), file=sys.stderr,
                              flush=True)
    finally:
        if burner is not None:
            burner.kill()
    print(f"machine: {describe()}; {a.duration:g} s trials"
          + ("; a CPU-bound process beside them" if a.load else ""))
    print("| run | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for (preset, name), runs in rows.items():
        for k, row in enumerate(runs):
            print(_line(f"{preset} {name} {k + 1}", row))
        med = {c: statistics.median([r[c] for r in runs if c in r])
               for c in COLUMNS if any(c in r for r in runs)}
        print(_line(f"**{preset} {name} median**", med))
    return 0


if __name__ == "__main__":
    sys.exit(main())
