"""The `aiko` command line. The only place that prints."""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from aiko.model.errors import AikoError

__all__ = ["main"]


class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise _ArgError(f"{self.prog}: {message}")


def _positive(kind: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind} must be a number, got {text!r}") from None
        if not (math.isfinite(v) and v > 0):
            raise argparse.ArgumentTypeError(f"{kind} must be a positive number, got {text}")
        return v
    return parse


def _nonneg(kind: str):
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind} must be a number, got {text!r}") from None
        if not (math.isfinite(v) and v >= 0):
            raise argparse.ArgumentTypeError(f"{kind} must be a number >= 0, got {text}")
        return v
    return parse


def _links(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"links must be an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"links must be >= 1, got {v}")
    return v


def _slope(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"slope must be a number, got {text!r}") from None
    if not (math.isfinite(v) and abs(v) < 90):
        raise argparse.ArgumentTypeError(f"slope must lie in (-90, 90) degrees, got {text}")
    return v


def _node_count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"nodes must be an integer, got {text!r}") from None
    if not 1 <= v <= 63:
        raise argparse.ArgumentTypeError(f"nodes must lie in 1..63, got {v}")
    return v


def _port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port must be an integer, got {text!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"port must lie in 0..65535, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="aiko", description="Aiko snake robot: model, rig and trials.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    s = sub.add_parser("simulate", help="simulate a gait on the non-smooth model",
                       description="Simulate a gait (a preset name or a gait TOML file) on the "
                                   "non-smooth 3D model and print a summary or write a CSV.")
    s.add_argument("gait", metavar="GAIT",
                   help="lateral-undulation, lateral-undulation-orthotropic, sidewinding, "
                        "still, or a gait .toml file")
    s.add_argument("--duration", type=_nonneg("duration"), default=15.0, metavar="S",
                   help="simulated time, s (default 15)")
    s.add_argument("--dt", type=_positive("dt"), default=0.00025, metavar="S",
                   help="time step, s (default 0.00025)")
    s.add_argument("--mu", type=_nonneg("mu"), metavar="MU", help="isotropic friction")
    s.add_argument("--mu-x", type=_nonneg("mu-x"), metavar="MU",
                   help="friction along the link")
    s.add_argument("--mu-y", type=_nonneg("mu-y"), metavar="MU",
                   help="friction across the link")
    s.add_argument("--links", type=_links, default=11, metavar="N",
                   help="number of links (default 11)")
    s.add_argument("--height", type=_nonneg("height"), default=0.0, metavar="M",
                   help="start height of the lowest sphere points, m (default 0)")
    s.add_argument("--slope", type=_slope, default=0.0, metavar="DEG",
                   help="ground inclination about y, rising toward +x, degrees")
    s.add_argument("--solver", choices=("newton", "jor", "sor"), default="sor",
                   help="contact solver (default sor)")
    s.add_argument("--rate", type=_positive("rate"), default=20.0, metavar="HZ",
                   help="output sample rate, Hz (default 20)")
    s.add_argument("--out", type=Path, metavar="FILE.csv", help="write samples as CSV")
    s.set_defaults(func=cmd_simulate)

    e = sub.add_parser("emulate", help="emulated joint modules behind an slcan adapter on TCP",
                       description="Start emulated joint modules on a virtual CAN bus behind an "
                                   "emulated serial-line CAN (slcan) adapter on a TCP port. "
                                   "Reach it with python-can's slcan interface and the printed "
                                   "socket:// channel. Ctrl-C stops it.")
    e.add_argument("--nodes", type=_node_count, default=10, metavar="N",
                   help="joint modules 1..N (default 10)")
    e.add_argument("--port", type=_port, default=0, metavar="PORT",
                   help="TCP port (default: any free one, printed)")
    e.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1, loopback only)")
    e.add_argument("--fault", action="append", default=[], metavar="NODE:KIND[=V][@T]",
                   help="inject a fault: drop=F, delay=S, silent, encoder[=h|v], "
                        "saturate[=h|v]; @T seconds after start (repeatable)")
    e.set_defaults(func=cmd_emulate)

    d = sub.add_parser("dbc", help="the joint protocol's DBC file and C code",
                       description="Print where the DBC is, or write the C pack/unpack code "
                                   "that cantools generates from it.")
    d.add_argument("--c-source", type=Path, metavar="DIR",
                   help="write aiko_joint.h and aiko_joint.c into DIR")
    d.set_defaults(func=cmd_dbc)
    return p


class _Progress:
    """A one-line progress bar on stderr, only on a terminal."""

    def __init__(self, total: float, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled and total > 0
        self.last = 0.0

    def __call__(self, t: float) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and t < self.total):
            return
        self.last = now
        frac = min(1.0, t / self.total)
        bar = "#" * int(30 * frac)
        sys.stderr.write(f"\r[{bar:<30}] {t:6.2f}/{self.total:.2f} s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def cmd_simulate(args: argparse.Namespace) -> int:
    from aiko.control.gait import get_gait
    from aiko.experiments.simulate import LINK_OF_INTEREST, simulate_gait
    from aiko.model import ConvergenceWarning, SnakeModel, SnakeParams, SolverParams

    if args.mu is not None and (args.mu_x is not None or args.mu_y is not None):
        raise _ArgError("aiko simulate: give either --mu or --mu-x/--mu-y, not both")
    gait = get_gait(args.gait)
    mu_x = gait.mu_x if gait.mu_x is not None else SnakeParams.mu_x
    mu_y = gait.mu_y if gait.mu_y is not None else SnakeParams.mu_y
    if args.mu is not None:
        mu_x = mu_y = args.mu
    mu_x = args.mu_x if args.mu_x is not None else mu_x
    mu_y = args.mu_y if args.mu_y is not None else mu_y
    params = SnakeParams(n=args.links, mu_x=mu_x, mu_y=mu_y, slope_deg=args.slope)
    model = SnakeModel(params, SolverParams(dt=args.dt, solver=args.solver))
    progress = _Progress(args.duration, sys.stderr.isatty())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # counted in the summary
        try:
            res = simulate_gait(model, gait, args.duration, rate=args.rate, height=args.height,
                                progress=progress)
        finally:
            progress.close()
    if args.out is not None:
        try:
            np.savetxt(args.out, res.csv_rows(), delimiter=",", header=",".join(res.csv_header()),
                       comments="", fmt="%.9g")
        except OSError as exc:
            raise _ArgError(f"aiko simulate: cannot write {args.out}: {exc.strerror}") from exc
        print(f"wrote {res.t.size} rows to {args.out}")
    link = min(LINK_OF_INTEREST, params.n)
    p0, p1 = res.link(link)[0], res.link(link)[-1]
    d = p1 - p0
    st = res.stats
    print(f"gait {gait.name}: {params.n} links, mu_x {mu_x:g}, mu_y {mu_y:g}, "
          f"slope {args.slope:g} deg, solver {args.solver}, dt {args.dt:g} s")
    print(f"link {link}: start ({p0[0]:+.4f}, {p0[1]:+.4f}, {p0[2]:+.4f}) m, "
          f"end ({p1[0]:+.4f}, {p1[1]:+.4f}, {p1[2]:+.4f}) m, "
          f"moved ({d[0]:+.4f}, {d[1]:+.4f}) m, distance {math.hypot(d[0], d[1]):.4f} m")
    print(f"steps {st.steps}, solver iterations mean {st.mean_iterations:.1f} max "
          f"{st.max_iterations}, unconverged steps {st.unconverged}")
    print(f"wall {res.wall_time:.2f} s, {res.us_per_step:.1f} us/step, "
          f"realtime factor {res.realtime_factor:.2f}")
    return 0


def cmd_emulate(args: argparse.Namespace) -> int:
    import asyncio
    import os
    import signal

    import can

    from aiko.firmware_interface.emulator import JointModule
    from aiko.firmware_interface.faults import faults_by_node
    from aiko.firmware_interface.service import EmulatedJoints
    from aiko.firmware_interface.slcan import SlcanAdapter

    faults = faults_by_node(args.fault)
    for node in faults:
        if node > args.nodes:
            raise _ArgError(f"aiko emulate: fault for node {node}, but only nodes 1..{args.nodes} "
                            "exist")
    channel = f"aiko-emulate-{os.getpid()}"

    async def serve() -> None:
        t0 = time.monotonic()
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        modules = [JointModule(i, faults=faults.get(i) or JointModule(i).faults)
                   for i in range(1, args.nodes + 1)]
        node_bus = can.Bus(interface="virtual", channel=channel, ignore_config=True)
        adapter_bus = can.Bus(interface="virtual", channel=channel, ignore_config=True)
        try:
            try:
                adapter = SlcanAdapter(adapter_bus, host=args.host, port=args.port)
                await adapter.__aenter__()
            except OSError as exc:
                raise _ArgError(f"aiko emulate: cannot listen on {args.host}:{args.port}: "
                                f"{exc.strerror}") from exc
            try:
                print(f"aiko emulate: {args.nodes} joint modules behind an slcan adapter", flush=True)
                print(f"channel: {adapter.channel}  (python-can interface 'slcan')", flush=True)
                for node, f in sorted(faults.items()):
                    print(f"fault on node {node}: {f}", flush=True)
                joints = EmulatedJoints(node_bus, modules, clock=lambda: time.monotonic() - t0)
                await joints.run()
            finally:
                await adapter.__aexit__(None, None, None)
        finally:
            node_bus.shutdown()
            adapter_bus.shutdown()

    try:
        asyncio.run(serve())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    print("aiko emulate: stopped", flush=True)
    return 0


def cmd_dbc(args: argparse.Namespace) -> int:
    from aiko.firmware_interface.dbc import DBC_PATH, load_database

    if args.c_source is None:
        print(DBC_PATH)
        return 0
    from cantools.database.can.c_source import generate

    header, source, _, _ = generate(load_database(), "aiko_joint", "aiko_joint.h", "aiko_joint.c",
                                    "aiko_joint_fuzzer.c", use_round=True)
    try:
        args.c_source.mkdir(parents=True, exist_ok=True)
        (args.c_source / "aiko_joint.h").write_text(header)
        (args.c_source / "aiko_joint.c").write_text(source)
    except OSError as exc:
        raise _ArgError(f"aiko dbc: cannot write into {args.c_source}: {exc.strerror}") from exc
    print(f"wrote {args.c_source / 'aiko_joint.h'} and {args.c_source / 'aiko_joint.c'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except _ArgError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except AikoError as exc:
        print(f"aiko {getattr(args, 'command', '')}: {exc}".replace("  ", " "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aiko: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
