"""How steady is this machine's processor time? The floor under every real-time
figure of the simulated rig.

One process per processor, each pinned to it and in the real-time class when
permitted (as the trial runner and the emulated modules are), repeats a fixed
piece of pure-Python work (about 0.25 ms) every 2 ms for ``--duration`` s,
with nothing else of ours running. Per processor: the work's wall time
p50/p99/p99.9/max and its CPU time max; then the *episodes*, stretches where
the work took more than 4x its median, merged when less than 50 ms apart, with
when they began on each processor, so one sees whether they come together (the
host, not a neighbour process)::

    python benchmarks/machine_noise.py --duration 20

A trial's SYNC->STATE path is a few ms of such work across three processes;
an episode in which it runs several times slower shows in the round trips'
tail whatever the scheduling. Not part of the tests.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

import numpy as np
from machine import describe

SLOW_FACTOR = 4.0
MERGE_GAP = 0.05
PAUSE = 0.002


def work() -> float:
    """The fixed piece of work: about 0.25 ms of the interpreter's arithmetic."""
    s = 0.0
    for i in range(3000):
        s += i * 0.5
    return s


def probe(cpu: int, duration: float, out: mp.Queue) -> None:
    """Pinned to ``cpu``: (start s, wall s, cpu s) of every repetition."""
    os.sched_setaffinity(0, {cpu})
    realtime = True
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (PermissionError, OSError):
        realtime = False
    rows = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < duration:
        time.sleep(PAUSE)
        w, c = time.perf_counter(), time.thread_time()
        work()
        rows.append((w - t0, time.perf_counter() - w, time.thread_time() - c))
    out.put((cpu, realtime, np.array(rows)))


def episodes(rows: np.ndarray) -> list[tuple[float, float, float]]:
    """(start s, length s, worst wall ms) of each stretch of slow repetitions."""
    med = float(np.median(rows[:, 1]))
    slow = rows[rows[:, 1] > SLOW_FACTOR * med]
    out: list[list[float]] = []
    for t, wall, _ in slow:
        if out and t - (out[-1][0] + out[-1][1]) < MERGE_GAP:
            out[-1][1] = t + wall - out[-1][0]
            out[-1][2] = max(out[-1][2], 1e3 * wall)
        else:
            out.append([t, wall, 1e3 * wall])
    return [(a, b, c) for a, b, c in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=20.0)
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    print(f"machine: {describe()}; {args.duration:g} s per processor, processors {cpus}")
    q: mp.Queue = mp.Queue()
    procs = [mp.Process(target=probe, args=(c, args.duration, q)) for c in cpus]
    for p in procs:
        p.start()
    results = sorted((q.get() for _ in procs), key=lambda r: r[0])
    for p in procs:
        p.join()
    starts = []
    for cpu, realtime, rows in results:
        wall = 1e3 * rows[:, 1]
        eps = episodes(rows)
        starts.append([e[0] for e in eps])
        print(f"cpu {cpu} ({'real-time' if realtime else 'normal'} class): {len(rows)} repetitions, "
              f"wall p50 {np.median(wall):.3f} p99 {np.percentile(wall, 99):.3f} "
              f"p99.9 {np.percentile(wall, 99.9):.2f} max {wall.max():.2f} ms, "
              f"cpu max {1e3 * rows[:, 2].max():.2f} ms; {len(eps)} episodes (> "
              f"{SLOW_FACTOR:g}x median), longest {max((e[1] for e in eps), default=0) * 1e3:.0f} ms, "
              f"worst {max((e[2] for e in eps), default=0):.1f} ms")
        print("   began at s: " + ", ".join(f"{e[0]:.2f}" for e in eps[:30]))
    if len(starts) > 1 and starts[0]:
        other = np.array(sorted(t for s in starts[1:] for t in s))
        shared = sum(1 for t in starts[0] if other.size and np.min(np.abs(other - t)) < MERGE_GAP)
        print(f"episodes of cpu {results[0][0]} within {1e3 * MERGE_GAP:.0f} ms of one on another "
              f"processor: {shared} of {len(starts[0])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
