"""A long trial on the simulated rig, and what the tools make of its log.

    python benchmarks/soak.py --minutes 30                 # the soak
    python benchmarks/soak.py --minutes 1 --figure soak.png
    python benchmarks/soak.py --minutes 1 --every 5 --json soak.json   # as CI runs it
    python benchmarks/soak.py --minutes 30 --quiet 0.5     # started after a quiet 10 s
    python benchmarks/soak.py --minutes 1 --time virtual --every 5 --json soak.json  # as CI runs it

Runs `aiko run GAIT --duration N*60` (realistic plant, the model in parallel)
and samples every process of it (the runner, the simulated Aiko, the parallel
model) every ``--every`` s from /proc: resident memory (RSS) and CPU seconds.
With ``--time virtual`` the trial runs in virtual time in this process
(:func:`aiko.experiments.testing.run_virtual_trial`: the simulated Aiko, the
model and the runner are one process) and the process's memory is sampled
every ``--every`` s of trial time, by a listener on the trial's records: the
same samples on any machine, loaded or idle.
Then it checks the log (every period's REFs and SYNC, motion capture at 20 Hz
to the end) and runs `aiko info`, `aiko replay` and `aiko export --format blf`
on it, each with its wall time and peak memory (VmHWM, sampled every 0.1 s).
Prints a report with the machine; ``--figure`` draws RSS per process over
time; ``--json`` writes the report for a script to judge (the suite's
``tests/benchmarks/test_soak.py`` runs it for one minute).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_times, describe, steal_percent
from rig_realtime import add_quiet_argument, cpu_seconds, descendants, quiet


def _status_kb(pid: int, key: str) -> int | None:
    try:
        for line in (Path("/proc") / str(pid) / "status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "aiko.experiments.cli", *args]


def run_trial(gait: str, minutes: float, out: Path,
              every: float) -> tuple[list[dict], str, int, float | None]:
    """The trial, sampled: rows of (t, role, pid, rss_mb, cpu_s); its output,
    exit status and the hypervisor's steal during it (%)."""
    proc = subprocess.Popen(_cli("run", gait, "--duration", str(60 * minutes), "--out",
                                 str(out)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    t0 = time.monotonic()
    steal0 = cpu_times()
    rows: list[dict] = []
    next_sample = t0
    while proc.poll() is None:
        now = time.monotonic()
        if now >= next_sample:
            for pid, role in descendants(proc.pid).items():
                rss = _status_kb(pid, "VmRSS")
                if rss is not None:
                    rows.append({"t": now - t0, "role": role, "pid": pid, "rss_mb": rss / 1024,
                                 "cpu_s": cpu_seconds(pid)})
            next_sample += every
        time.sleep(0.2)
    return (rows, proc.stdout.read() if proc.stdout else "", proc.returncode,
            steal_percent(steal0, cpu_times()))


class MemorySampler:
    """A listener of the trial's records that reads this process's RSS and
    CPU seconds each time the trial clock passes another ``every`` s."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.rows: list[dict] = []
        self._next = 0.0

    async def start(self) -> None:
        """Nothing to open."""

    async def stop(self) -> None:
        """Nothing to close."""

    def on_record(self, record) -> None:
        if record.t >= self._next:
            self._next = (int(record.t / self.every) + 1) * self.every
            rss = _status_kb(os.getpid(), "VmRSS")
            if rss is not None:
                self.rows.append({"t": record.t, "role": "runner", "pid": os.getpid(),
                                  "rss_mb": rss / 1024, "cpu_s": time.process_time()})


def run_virtual(gait: str, minutes: float, out: Path,
                every: float) -> tuple[list[dict], str, int, float | None]:
    """The trial in virtual time in this process, sampled on the trial clock;
    rows, its summary as ``aiko run`` prints it, exit status (0 when it
    completed) and the hypervisor's steal during it (%)."""
    from aiko.experiments.testing import run_virtual_trial

    sampler = MemorySampler(every)
    steal0 = cpu_times()
    t0 = time.monotonic()
    trial = run_virtual_trial(gait, out, duration=60 * minutes, listeners=[sampler])
    wall = time.monotonic() - t0
    stream = trial.result.stream
    text = (f"trial {trial.reason}: {gait}, {stream.periods} periods, {stream.late} late, "
            f"{stream.missed} missed; {wall:.1f} s of wall time (virtual time)\n")
    return (sampler.rows, text, 0 if trial.reason == "completed" else 1,
            steal_percent(steal0, cpu_times()))


def timed(argv: list[str]) -> dict:
    """Run a command; its exit status, wall time and peak memory."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _status_kb(proc.pid, "VmHWM") or 0)
        time.sleep(0.1)
    out = proc.stdout.read() if proc.stdout else ""
    return {"rc": proc.returncode, "wall_s": time.monotonic() - t0, "peak_mb": peak / 1024,
            "last": out.strip().splitlines()[-1] if out.strip() else ""}


def check_log(path: Path) -> dict:
    """Periods, REFs, SYNCs and mocap samples in the log; the last mocap time."""
    from aiko.experiments.files.triallog import read_trial

    data = read_trial(path, topics=("/can/tx", "/mocap"))   # the rest only counted
    tx = data.records.get("/can/tx", [])
    syncs = sum(1 for _, r in tx if r["id"] == 0x80)
    refs = sum(1 for _, r in tx if 0x201 <= r["id"] <= 0x23F)
    mocap = data.records.get("/mocap", [])
    return {"syncs": syncs, "refs": refs, "mocap": len(mocap),
            "mocap_last_s": mocap[-1][0] - mocap[0][0] if mocap else None,
            "complete": data.complete}


def growth(rows: list[dict], until: float) -> dict[str, tuple[float, float, float]]:
    """Per role: RSS after the first minute (after the first third of a trial
    shorter than 3 minutes), at ``until`` s after the command's start (the
    trial's length: the trial streams until a few seconds later, after its
    start-up; the comparison after it is not the trial) (MB) and the growth
    (%)."""
    out = {}
    start = min(60.0, until / 3)
    for role, series in per_role(rows).items():
        mine = [(t, rss) for t, rss in series if t <= until]
        if not mine:
            continue
        after = [x for x in mine if x[0] >= start] or mine
        first, last = after[0][1], mine[-1][1]
        out[role] = (first, last, 100.0 * (last - first) / first)
    return out


def per_role(rows: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """{role: [(t, RSS MB summed over the role's processes at that sample)]}
    (the idle spinners are one a processor)."""
    out: dict[str, dict[float, float]] = {}
    for r in rows:
        at = out.setdefault(r["role"], {})
        at[r["t"]] = at.get(r["t"], 0.0) + r["rss_mb"]
    return {role: sorted(at.items()) for role, at in sorted(out.items())}


def figure(rows: list[dict], path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for role, series in per_role(rows).items():
        ax.plot([t / 60 for t, _ in series], [rss for _, rss in series], label=role)
    ax.set_xlabel("time [min]")
    ax.set_ylabel("resident memory [MB]")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("soak: each process's memory during the trial")
    fig.savefig(path, dpi=100)


def trial_counts(summary: list[str]) -> dict:
    """Periods, late and missed periods from the trial's summary line."""
    for line in summary:
        m = re.search(r"(\d+) periods, (\d+) late, (\d+) missed", line)
        if m:
            return {"periods": int(m[1]), "late": int(m[2]), "missed": int(m[3])}
    return {"periods": None, "late": None, "missed": None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--gait", default="sidewinding")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--time", choices=("real", "virtual"), default="real",
                    help="the trial's time (virtual: in this process, sampled on its clock)")
    ap.add_argument("--figure", type=Path, default=None)
    ap.add_argument("--keep", type=Path, default=None, help="keep the log in this folder")
    ap.add_argument("--json", type=Path, default=None, help="write the report here")
    add_quiet_argument(ap, "the trial")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = a.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"soak-{a.gait}.mcap"
        if log.exists():
            print(f"soak: {log} exists (a soak's log is never reused)", file=sys.stderr)
            return 2
        quiet(a.quiet)
        trial = run_virtual if a.time == "virtual" else run_trial
        rows, text, code, steal = trial(a.gait, a.minutes, log, a.every)
        if a.keep is not None:   # the samples, for another look
            with (folder / "soak-samples.csv").open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=["t", "role", "pid", "rss_mb", "cpu_s"])
                w.writeheader()
                w.writerows(rows)
        if code != 0:
            tail = "\n".join(f"  {line}" for line in text.strip().splitlines()[-15:])
            print(f"soak: aiko run ended with exit {code}"
                  + (f" ({steal:.1f} % stolen)" if steal is not None else "")
                  + f"; its output ends:\n{tail}", file=sys.stderr)
            return 1
        summary = [line for line in text.splitlines() if line.startswith(("trial ", "period",
                                                                          "simulated Aiko"))]
        counts = check_log(log)
        tools = {"info": timed(_cli("info", str(log))),
                 "replay": timed(_cli("replay", str(log), "--out", str(folder / "replay"))),
                 "export blf": timed(_cli("export", str(log), "--format", "blf", "--out",
                                          str(folder / "export")))}
        size_mb = log.stat().st_size / 1e6
    print(f"machine: {describe()}")
    print(f"{a.minutes:g} min of {a.gait} in {a.time} time, log {size_mb:.1f} MB"
          + (f"; the hypervisor stole {steal:.1f} % of the processors' time during the trial"
             if steal is not None else ""))
    for line in summary:
        print(f"  {line}")
    print(f"  log: {counts}")
    rss = growth(rows, 60.0 * a.minutes)
    for role, (first, last, pct) in rss.items():
        cpu = max((r["cpu_s"] or 0.0) for r in rows if r["role"] == role)
        print(f"  {role}: RSS {first:.0f} MB after the start, {last:.0f} MB at the end "
              f"({pct:+.1f} %), CPU {cpu:.0f} s")
    for name, r in tools.items():
        print(f"  aiko {name}: exit {r['rc']}, {r['wall_s']:.1f} s, peak {r['peak_mb']:.0f} MB")
    if a.figure is not None:
        figure(rows, a.figure)
        print(f"figure: {a.figure}")
    if a.json is not None:
        report = {"machine": describe(), "minutes": a.minutes, "gait": a.gait, "time": a.time,
                  "log_mb": size_mb, "steal_pct": steal, "summary": summary,
                  "trial": trial_counts(summary),
                  "log": counts, "tools": tools,
                  "rss": {role: {"start_mb": g[0], "end_mb": g[1], "growth_pct": g[2]}
                          for role, g in rss.items()},
                  "samples": len(rows)}
        a.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
