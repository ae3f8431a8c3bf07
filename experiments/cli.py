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


def _number(kind: str, cast=float, ok=lambda v: True, expect: str = ""):
    """An argparse type: parse with ``cast``, check with ``ok``, one-line errors."""
    noun = "an integer" if cast is int else "a number"

    def parse(text: str):
        try:
            v = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind} must be {noun}, got {text!r}") from None
        if (cast is float and not math.isfinite(v)) or not ok(v):
            raise argparse.ArgumentTypeError(f"{kind} must {expect}, got {text}")
        return v
    return parse


def _positive(kind: str):
    return _number(kind, float, lambda v: v > 0, "be a positive number")


def _nonneg(kind: str):
    return _number(kind, float, lambda v: v >= 0, "be a number >= 0")


_links = _number("links", int, lambda v: v >= 1, "be >= 1")
_slope = _number("slope", float, lambda v: abs(v) < 90, "lie in (-90, 90) degrees")
_node_count = _number("nodes", int, lambda v: 1 <= v <= 63, "lie in 1..63")
_port = _number("port", int, lambda v: 0 <= v <= 65535, "lie in 0..65535")


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

    r = sub.add_parser("run", help="run a gait on Aiko: stream, supervise, log",
                       description="Run a trial: bring the joint modules up, stream the gait's "
                                   "references at 10 Hz over CAN, supervise the joints, log "
                                   "motion capture, and record everything to an MCAP file. "
                                   "Ctrl-C or SIGTERM stops safely.")
    r.add_argument("gait", metavar="GAIT", help="a preset name or a gait .toml file")
    r.add_argument("--rig", choices=("robot",), default="robot",
                   help="robot: the real bus and motion capture (default)")
    r.add_argument("--can-interface", default="socketcan", metavar="NAME",
                   help="python-can interface: socketcan, slcan, pcan, kvaser, virtual, ...")
    r.add_argument("--can-channel", default="can0", metavar="CH",
                   help="channel, e.g. can0, /dev/ttyACM0, socket://127.0.0.1:PORT")
    r.add_argument("--bitrate", type=int, default=None, metavar="B",
                   help="bit rate in bit/s (robot: 1000000)")
    r.add_argument("--nodes", type=_node_count, default=10, metavar="N",
                   help="joint modules 1..N (default 10)")
    r.add_argument("--mocap", default="none", metavar="SRC",
                   help="vicon-udp[:PORT], vicon-datastream:HOST or none (default)")
    r.add_argument("--mocap-subject", default="link6", metavar="NAME",
                   help="the tracked object (UDP object name or DataStream subject)")
    r.add_argument("--mocap-segment", default="link6", metavar="NAME",
                   help="DataStream segment of the subject (default link6)")
    r.add_argument("--mocap-rate", type=_positive("mocap rate"), default=20.0, metavar="HZ",
                   help="motion-capture logging rate (default 20)")
    r.add_argument("--tolerate", action="append", default=[], metavar="FAULT",
                   choices=("current-limit", "encoder-fault"),
                   help="keep going after this fault (default: every fault stops the trial)")
    r.add_argument("--mqtt", default=None, metavar="URL",
                   help="telemetry broker, mqtt://[user:pass@]host[:port][/prefix] or mqtts://")
    r.add_argument("--mqtt-ca", default=None, metavar="FILE", help="CA file for mqtts://")
    r.add_argument("--duration", type=_positive("duration"), default=None, metavar="S",
                   help="trial length, s (default: until Ctrl-C)")
    r.add_argument("--startup-timeout", type=_positive("startup timeout"), default=2.0,
                   metavar="S", help="wait this long for every node's heartbeat (default 2)")
    r.add_argument("--out", type=Path, default=None, metavar="FILE.mcap",
                   help="trial log (default trial-YYYYmmdd-HHMMSS.mcap)")
    r.set_defaults(func=cmd_run)

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
                try:
                    await joints.run()
                finally:
                    for m in modules:
                        cmds = ", ".join(f"0x{c:02X}" for c in m.nmt_obeyed) or "none"
                        print(f"node {m.node}: {m.state.name.lower()}, NMT obeyed: {cmds}",
                              flush=True)
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


def _parse_mocap(spec: str) -> tuple[str, str | None, int | None]:
    if spec == "none":
        return "none", None, None
    kind, _, arg = spec.partition(":")
    if kind == "vicon-udp":
        if not arg:
            return kind, None, 51001
        try:
            port = int(arg)
        except ValueError:
            raise _ArgError(f"aiko run: --mocap {spec}: the port must be an integer") from None
        if not 0 <= port <= 65535:
            raise _ArgError(f"aiko run: --mocap {spec}: port out of range")
        return kind, None, port
    if kind == "vicon-datastream" and arg:
        return kind, arg, None
    raise _ArgError(f"aiko run: --mocap {spec!r}: expected vicon-udp[:PORT], "
                    "vicon-datastream:HOST or none")


class _StatusLine:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, snap: dict) -> None:
        if not self.enabled:
            return
        p = snap["link6"]
        pos = "link 6 (no data)" if p is None else f"link 6 ({p[0]:+.3f}, {p[1]:+.3f}, {p[2]:+.3f}) m"
        sys.stderr.write(f"\r t {snap['t']:7.1f} s  periods {snap['periods']}  late "
                         f"{snap['late']}  nodes ok {snap['nodes_ok']}/{snap['nodes']}  {pos}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio
    import signal
    from datetime import datetime

    from aiko.control.gait import get_gait
    from aiko.drivers.can_bus import CanDriver
    from aiko.drivers.clock import TrialClock
    from aiko.drivers.mocap import ViconDataStreamSource, ViconUdpSource
    from aiko.drivers.telemetry import MqttConfig, MqttTelemetry
    from aiko.experiments.trial import (TrialConfig, dbc_attachment, jitter_summary, run_trial,
                                        trial_metadata)
    from aiko.experiments.triallog import TrialLog

    gait = get_gait(args.gait)
    mocap_kind, mocap_host, mocap_port = _parse_mocap(args.mocap)
    mqtt_cfg = MqttConfig.from_url(args.mqtt, args.mqtt_ca) if args.mqtt else None
    from aiko.control.supervisor import FaultPolicy

    policy = FaultPolicy(stop_on_current_limit="current-limit" not in args.tolerate,
                         stop_on_encoder_fault="encoder-fault" not in args.tolerate)
    config = TrialConfig(gait=args.gait, nodes=args.nodes, duration=args.duration, rig=args.rig,
                         can_interface=args.can_interface, can_channel=args.can_channel,
                         bitrate=args.bitrate, mocap=args.mocap, mocap_subject=args.mocap_subject,
                         mocap_segment=args.mocap_segment, mocap_rate=args.mocap_rate,
                         mqtt=args.mqtt, startup_timeout=args.startup_timeout, policy=policy)
    out = args.out or Path(f"trial-{datetime.now():%Y%m%d-%H%M%S}.mcap")
    status = _StatusLine(sys.stderr.isatty())

    async def trial():
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
        clock = TrialClock()
        with TrialLog(out, trial_metadata(config, gait), dbc_attachment()) as tlog:
            can_io = CanDriver.open(args.can_interface, args.can_channel, clock, args.bitrate,
                                    on_tx=lambda t, i, d: tlog.write("/can/tx", t,
                                                                     {"id": i, "data": d.hex()}))
            async with can_io:
                mocap = None
                if mocap_kind == "vicon-udp":
                    mocap = ViconUdpSource(args.mocap_subject, clock, port=mocap_port)
                elif mocap_kind == "vicon-datastream":
                    mocap = ViconDataStreamSource(mocap_host, args.mocap_subject,
                                                  args.mocap_segment, clock)
                telemetry = None
                if mqtt_cfg is not None:
                    telemetry = MqttTelemetry(mqtt_cfg, out.stem)
                if mocap is None:
                    return await run_trial(config, gait, can_io, clock, tlog,
                                           telemetry=telemetry, status=status)
                async with mocap:
                    return await run_trial(config, gait, can_io, clock, tlog, mocap_source=mocap,
                                           telemetry=telemetry, status=status)

    interrupted = False
    result = None
    try:
        result = asyncio.run(trial())
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    finally:
        status.close()
    if interrupted or result is None:
        print(f"aiko run: interrupted; joints sent to the safe state; log: {out}")
        return 130
    st = result.stream
    print(f"trial {result.reason}: {gait.name}, {result.duration:.1f} s, {st.periods} periods, "
          f"{st.late} late, {st.missed} missed, STATE matched {st.states_matched} "
          f"(unmatched {st.states_unmatched}), nodes ok {result.nodes_ok}/{args.nodes}")
    js = jitter_summary(st)
    if js:
        print("period jitter p50 {jitter_p50_ms:.2f} ms, p99 {jitter_p99_ms:.2f} ms, max "
              "{jitter_max_ms:.2f} ms".format(**js)
              + ("; SYNC->STATE p50 {rtt_p50_ms:.2f} ms, p99 {rtt_p99_ms:.2f} ms".format(**js)
                 if "rtt_p50_ms" in js else ""))
    print(f"CAN tx {result.can['tx']} (failed {result.can['tx_errors']}), rx {result.can['rx']} "
          f"(errors {result.can['rx_errors']}, dropped {result.can['rx_dropped']})"
          + (f"; mocap {result.mocap}" if result.mocap else "")
          + (f"; mqtt {result.telemetry}" if result.telemetry else ""))
    if result.last_link6 is not None:
        x, y, z = result.last_link6
        print(f"link 6 last seen at ({x:+.4f}, {y:+.4f}, {z:+.4f}) m")
    print(f"log: {out}")
    if result.reason == "fault":
        print(f"aiko run: fault: {result.fault}", file=sys.stderr)
        return 1
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
