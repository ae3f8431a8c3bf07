"""What the emulated joint modules' tick costs: ten operational modules
following a wave (REF to each and a SYNC every 100 ms, a tick every 2 ms, as
the simulated Aiko's modules run), ticked one by one in Python
(``JointModules``, the reference) and as a compiled bank (``ModuleBank``),
taken in turn, the fastest of ``--repeat`` runs of each; checks that both
sent the same frames:

    python benchmarks/module_bank.py                 # 10 s, 3 repeats
    python benchmarks/module_bank.py --duration 30 --nodes 20

One core, wall time of the loop only (the frames' encoding included, the
bank's first compile not). Not part of the tests.
"""

from __future__ import annotations

import argparse
import math
import time

from machine import describe

from aiko.firmware_interface.bank import ModuleBank
from aiko.firmware_interface.codec import Nmt, Ref, Sync, encode
from aiko.firmware_interface.emulator import JointModelParams, JointModule
from aiko.firmware_interface.group import JointModules
from aiko.firmware_interface.protocol import NmtCommand

TICK = 0.002
PERIOD = 0.1


def play(kind, nodes: int, duration: float):
    """(seconds, ticks, frames out) of ``duration`` s of a wave."""
    jp = JointModelParams(backlash=math.radians(4.0))
    group = kind([JointModule(i, params=jp) for i in range(1, nodes + 1)])
    out = group.power_up(0.0)
    out += group.receive(0.0, *encode(Nmt(NmtCommand.START, 0)))
    ticks = round(duration / TICK)
    per = round(PERIOD / TICK)
    t0 = time.perf_counter()
    for k in range(1, ticks + 1):
        t = k * TICK
        if k % per == 0:
            for node in range(1, nodes + 1):
                a = 0.6 * math.sin(2.0 * t - 0.5 * node)
                out += group.receive(t, *encode(Ref(node, a, 0.3 * a, 1.2, 0.0)))
            out += group.receive(t, *encode(Sync((k // per) % 256)))
        out += group.tick(t)
    return time.perf_counter() - t0, ticks, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {describe()}; {args.nodes} modules, {args.duration:g} s, a tick every "
          f"{TICK * 1e3:g} ms, REF and SYNC every {PERIOD * 1e3:g} ms")
    play(ModuleBank, args.nodes, 0.1)         # the bank's kernel loaded
    best = {JointModules: math.inf, ModuleBank: math.inf}
    frames = {}
    for _ in range(args.repeat):
        for kind in best:
            secs, ticks, out = play(kind, args.nodes, args.duration)
            best[kind] = min(best[kind], secs)
            frames[kind] = out
    same = frames[JointModules] == frames[ModuleBank]
    for kind, secs in best.items():
        print(f"{kind.__name__:13s} {secs:6.3f} s, {secs / ticks * 1e6:6.1f} us a tick "
              f"(frames included), {args.duration / secs:6.0f}x real time")
    print(f"same {len(frames[ModuleBank])} frames at the same times: {same}; the bank "
          f"{best[JointModules] / best[ModuleBank]:.1f}x faster")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
