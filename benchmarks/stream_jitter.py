"""Long-run timing of the 10 Hz stream: `aiko run` against `aiko emulate` over
slcan on loopback, as in the lab but with emulated joints.

    python benchmarks/stream_jitter.py --minutes 10            # idle machine
    python benchmarks/stream_jitter.py --minutes 10 --load     # a busy process beside it

Reports period jitter (send time minus deadline) p50/p99/max, late and missed
periods, and SYNC-to-STATE round trips, as `aiko run` measured them, with the
machine it ran on. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from machine import describe

BURN = "import itertools\nfor _ in itertools.count():\n    pass\n"


def cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "aiko.experiments.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--load", action="store_true", help="run a CPU-bound process beside it")
    ap.add_argument("--nodes", type=int, default=10)
    a = ap.parse_args()
    emu = cli("emulate", "--nodes", str(a.nodes), "--port", "0")
    channel = None
    for _ in range(20):
        line = emu.stdout.readline()
        if line.startswith("channel: "):
            channel = line.split()[1]
            break
    if channel is None:
        emu.kill()
        print("aiko emulate did not start", file=sys.stderr)
        return 1
    burner = subprocess.Popen([sys.executable, "-c", BURN]) if a.load else None
    try:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.time()
            run = cli("run", "sidewinding", "--rig", "robot", "--no-model",
                      "--can-interface", "slcan", "--can-channel", channel,
                      "--nodes", str(a.nodes), "--duration", str(60 * a.minutes),
                      "--out", os.path.join(d, "bench.mcap"))
            out, err = run.communicate()
            wall = time.time() - t0
    finally:
        if burner is not None:
            burner.kill()
        emu.terminate()  # SIGTERM: a background job may be ignoring SIGINT
        try:
            emu.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            emu.kill()
    if run.returncode != 0:
        print(out, err, file=sys.stderr)
        return 1
    print(f"machine: {describe()}; load: {'one busy process' if a.load else 'none'}; "
          f"{a.nodes} emulated nodes behind slcan on loopback; {wall / 60:.1f} min")
    print(out.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
