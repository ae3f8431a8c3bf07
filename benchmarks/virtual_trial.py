"""How long a trial in virtual time takes, and where the time goes.

Each preset on the realistic simulated Aiko with the model in parallel,
``--duration`` s, run in this process after a first short trial of each has
loaded the kernels and the figure's library (a warm process, as a campaign's
or the test suite's later trials), the presets taken in turn ``--rounds``
times so that a slow phase of a shared machine does not fall on one of them.
Reported per preset: the fastest and the median wall time of the trial (the
session on its virtual-time loop, the comparison and its figure included;
the log is not read back), with ``--parts`` where the fastest run's wall time
went. With ``--command`` also the whole ``aiko run PRESET --time virtual``
as a user types it, in a fresh interpreter each time (imports, the kernels'
caches loaded, the first figure of a process). One process at a time; the
hypervisor's steal over the runs is reported beside them.

    python benchmarks/virtual_trial.py                      # 15 s, 3 presets, 4 rounds
    python benchmarks/virtual_trial.py --rounds 6 --parts --command
    python benchmarks/virtual_trial.py --duration 2 --rounds 1 --parts --json vt.json

``--json`` writes the figures for a script to judge (the suite's
``tests/benchmarks/test_virtual_trial.py`` runs a short one).

The parts (timers around them, so the trial runs a little slower): the
simulated Aiko's compiled ticks (its physics and its modules' ticks, on the
loop's thread), the loop's waits for the parallel model's thread, the trial
log's listener (the records as JSON in MCAP), the simulated camera's frames
and their decoding, the comparison with its figure, and the rest (the
trial's Python: CAN codec and bus, the fan-out, asyncio, the runner).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from machine import cpu_times, describe, steal_percent

from aiko.experiments.files.gait_file import get_gait
from aiko.experiments.testing import run_virtual_session
from aiko.model.errors import AikoError

PRESETS = ("sidewinding", "lateral-undulation", "lateral-undulation-orthotropic")


def trial(preset: str, out: Path, duration: float) -> float:
    """Wall seconds of one trial in virtual time, run in this process (the
    settings built, the session run; the log not read back)."""
    t0 = time.perf_counter()
    run_virtual_session(preset, out, duration=duration)
    return time.perf_counter() - t0


def command(preset: str, out: Path, duration: float) -> float:
    """Wall seconds of ``aiko run PRESET --time virtual`` in a fresh interpreter."""
    argv = [sys.executable, "-m", "aiko.experiments.cli", "run", preset, "--time", "virtual",
            "--duration", str(duration), "--out", str(out)]
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


@contextlib.contextmanager
def timed_parts(spent: Counter) -> Iterator[None]:
    """Timers around the parts of a trial (see the module docstring), summed
    into ``spent`` (s) while the context lasts."""
    import aiko.experiments.rig._plant_loop as plant_loop
    import aiko.experiments.trial.session as session
    from aiko.drivers.mocap import ViconUdpSource
    from aiko.experiments.rig.plant import MocapView
    from aiko.experiments.trial.listeners import TrialLogListener
    from aiko.experiments.trial.model_inline import InlineModel

    targets = [(plant_loop, "plant_ticks", "physics (compiled ticks)"),
               (InlineModel, "_collect", "waiting for the model's thread"),
               (TrialLogListener, "on_record", "trial log"),
               (MocapView, "objects", "camera frames"),
               (ViconUdpSource, "take_datagram", "camera frames"),
               (session, "save_comparison", "comparison and figure")]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]

    def timer(f, part):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - t0
        return timed

    for (owner, name, part), (_, _, f) in zip(targets, saved, strict=True):
        setattr(owner, name, timer(f, part))
    try:
        yield
    finally:
        for owner, name, f in saved:
            setattr(owner, name, f)


def parts_line(wall: float, spent: Counter) -> str:
    rest = wall - sum(spent.values())
    return ", ".join(f"{k} {v:.2f}" for k, v in spent.most_common()) + f", the rest {rest:.2f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=15.0, help="trial length, s")
    ap.add_argument("--rounds", type=int, default=4, help="runs of each preset, in turn")
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), metavar="PRESET")
    ap.add_argument("--parts", action="store_true", help="where the time goes (timers)")
    ap.add_argument("--command", action="store_true",
                    help="also the whole `aiko run` in a fresh interpreter")
    ap.add_argument("--json", type=Path, metavar="FILE", help="write the figures here")
    a = ap.parse_args()
    if a.rounds < 1 or a.duration <= 0:
        ap.error("--rounds must be at least 1 and --duration positive")
    for p in a.presets:
        try:
            get_gait(p)
        except AikoError as exc:
            ap.error(str(exc))
    print(f"machine: {describe()}; {a.duration:g} s trials, {a.rounds} rounds", flush=True)
    with tempfile.TemporaryDirectory(prefix="virtual-trial-") as tmp:
        report(a, Path(tmp))


def report(a: argparse.Namespace, folder: Path) -> None:
    """Run the trials into ``folder`` and print (and with --json write) the figures."""
    for p in a.presets:                       # the kernels and the figure's library
        trial(p, folder / f"warm-{p}.mcap", 1.0)
    walls: dict[str, list[float]] = {p: [] for p in a.presets}
    cmds: dict[str, list[float]] = {p: [] for p in a.presets}
    parts: dict[str, tuple[float, Counter]] = {}
    before = cpu_times()
    for k in range(a.rounds):
        for p in a.presets:
            walls[p].append(trial(p, folder / f"{p}-{k}.mcap", a.duration))
            if a.command:
                cmds[p].append(command(p, folder / f"{p}-{k}-cmd.mcap", a.duration))
            if a.parts:
                spent: Counter = Counter()
                with timed_parts(spent):
                    w = trial(p, folder / f"{p}-{k}-parts.mcap", a.duration)
                if p not in parts or w < parts[p][0]:
                    parts[p] = (w, spent)
    steal = steal_percent(before, cpu_times())
    print(f"hypervisor steal over the runs: {'unknown' if steal is None else f'{steal:.1f} %'}")
    for p in a.presets:
        line = (f"{p:<32} trial {min(walls[p]):.2f} s fastest, "
                f"{statistics.median(walls[p]):.2f} s median")
        if a.command:
            line += f"; command {min(cmds[p]):.2f} / {statistics.median(cmds[p]):.2f} s"
        print(line)
        if p in parts:
            print(f"    timed run {parts[p][0]:.2f} s: {parts_line(*parts[p])}")
    if a.json is not None:
        a.json.write_text(json.dumps({
            "machine": describe(), "duration_s": a.duration, "steal_percent": steal,
            "presets": {p: {"trial_s": walls[p], "command_s": cmds[p],
                            **({"timed_run_s": parts[p][0], "parts_s": dict(parts[p][1])}
                               if p in parts else {})} for p in a.presets}}, indent=2) + "\n")


if __name__ == "__main__":
    main()
