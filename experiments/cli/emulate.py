"""`aiko emulate`: emulated joint modules behind an slcan adapter on TCP, and with
``--plant`` the simulated Aiko behind them with its motion capture."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from aiko.drivers.awake import AWAKE_MODES
from aiko.experiments.cli.args import ArgError, nonneg, port, positive
from aiko.experiments.cli.flags import add_named_flags
from aiko.experiments.rig.plant_params import PlantParams

if TYPE_CHECKING:
    from aiko.experiments.rig.physics import PhysicsProcess

__all__ = ["add_parser", "cmd_emulate"]


def _udp_target(text: str) -> tuple[str, int]:
    host, _, p = text.rpartition(":")
    try:
        value = int(p)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}") from None
    if not host or not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with a port in 1..65535, "
                                         f"got {text!r}")
    return host, value


def add_parser(sub) -> None:
    e = sub.add_parser(
        "emulate", help="emulated joint modules (and with --plant the simulated Aiko)",
        description="Start emulated joint modules on a virtual CAN bus behind an emulated "
                    "serial-line CAN (slcan) adapter on a TCP port. Reach it with python-can's "
                    "slcan interface and the printed socket:// channel. With --plant, the "
                    "simulated Aiko: the non-smooth model driven by the modules' motors in "
                    "real time, its links sent as a Vicon Tracker UDP Object Stream. Ctrl-C "
                    "stops it.")
    add_named_flags(e, "emulate", "nodes")
    e.add_argument("--port", type=port, default=0, metavar="PORT",
                   help="TCP port (default: any free one, printed)")
    e.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1, loopback only)")
    e.add_argument("--fault", action="append", default=[], metavar="NODE:KIND[=V][@T]",
                   help="inject a fault: drop=F, delay=S, silent, encoder[=h|v], "
                        "saturate[=h|v], babble=RATE (random frames a second); @T seconds "
                        "after start (repeatable)")
    e.add_argument("--keep-awake", choices=AWAKE_MODES, default="auto",
                   help="keep the processors from halting while serving: auto (default: "
                        "hold the idle latency at 0 where permitted, and where the kernel has "
                        "no cpuidle driver, as in many virtual machines, keep each processor "
                        "running with an idle-class spinner), spin (the spinners always), off")
    g = e.add_argument_group("the simulated Aiko (--plant)")
    g.add_argument("--plant", action="store_true",
                   help="run the physics behind the modules and send motion capture")
    g.add_argument("--udp-target", type=_udp_target, default=("127.0.0.1", 51001),
                   metavar="HOST:PORT", help="where the Tracker stream goes "
                                             "(default 127.0.0.1:51001)")
    g.add_argument("--mocap-rate", type=positive("mocap rate"), default=100.0, metavar="HZ",
                   help="datagrams per second (default 100)")
    g.add_argument("--datastream-port", type=port, default=None, metavar="PORT",
                   help="also serve the same frames as a Vicon DataStream server on --host's "
                        "address, this port (0: any free one, printed; Vicon's own is 801); "
                        "default: none")
    g.add_argument("--qtm-port", type=port, default=None, metavar="PORT",
                   help="also serve the same frames as a Qualisys QTM real-time server (6D "
                        "bodies) on --host's address, this port (0: any free one, printed; "
                        "QTM's own is 22223); default: none")
    add_named_flags(g, "emulate", "mu_x", "mu_y")
    g.add_argument("--plant-mu-x", type=nonneg("plant-mu-x"), default=None,
                   help=argparse.SUPPRESS)
    g.add_argument("--plant-mu-y", type=nonneg("plant-mu-y"), default=None,
                   help=argparse.SUPPRESS)
    add_named_flags(g, "emulate", "servo", "backlash_deg", "mocap_noise_mm", "mocap_latency_ms",
                    "mocap_occlusion", "start_curve", "scene")
    g.add_argument("--seed", type=int, default=0, help="seed of the mocap noise")
    g.add_argument("--scene-json", default=None, help=argparse.SUPPRESS)
    g.add_argument("--start-joint-angles-json", default=None, help=argparse.SUPPRESS)
    add_named_flags(g, "emulate", "u_tol", "max_iter")
    g.add_argument("--status-interval", type=positive("status interval"), default=5.0,
                   metavar="S", help="seconds between status lines (default 5)")
    g.add_argument("--json-lines", action="store_true", help=argparse.SUPPRESS)
    g.add_argument("--parent-lifeline", action="store_true", help=argparse.SUPPRESS)
    e.set_defaults(func=cmd_emulate)


def cmd_emulate(args: argparse.Namespace) -> int:
    if not args.plant:
        return _emulate(args, None)
    from aiko.experiments.rig.physics import PhysicsProcess

    physics = PhysicsProcess()
    physics.spawn()   # it loads the model's kernels while this process imports and sets up
    try:
        return _emulate(args, physics)
    finally:
        physics.close()   # the rig ends it when it stops; this, on every other way out


def _emulate(args: argparse.Namespace, physics: PhysicsProcess | None) -> int:
    import asyncio

    from aiko.drivers.mocap_sources import SERVED_KINDS
    from aiko.experiments.rig.simrig import RigConfig, SimulatedRig
    from aiko.firmware_interface.faults import faults_by_node

    for kind, value in (("vicon-datastream", args.datastream_port),
                        ("qualisys", args.qtm_port)):
        if value is not None and physics is None:
            raise ArgError(f"aiko emulate: {SERVED_KINDS[kind].flag} needs --plant (the frames "
                           "are the simulated Aiko's)")
    faults = faults_by_node(args.fault)
    for node in faults:
        if node > args.nodes:
            raise ArgError(f"aiko emulate: fault for node {node}, but only nodes 1..{args.nodes} "
                           "exist")
    scene = _scene(args)
    plant = _plant(args)
    rig = SimulatedRig(RigConfig(nodes=args.nodes, host=args.host, port=args.port, faults=faults,
                                 plant=plant, udp_target=args.udp_target,
                                 datastream_port=args.datastream_port, qtm_port=args.qtm_port,
                                 mu_x=args.mu_x,
                                 mu_y=args.mu_y, scene=scene,
                                 status_interval=args.status_interval,
                                 keep_awake=args.keep_awake), physics=physics)
    if rig.model is not None and rig.start_state is not None:
        from aiko.experiments.files.scene_file import check_clear
        from aiko.model.scene import SceneError
        try:
            check_clear(rig.model, rig.start_state, "the simulated Aiko's start posture")
        except SceneError as exc:
            raise ArgError(f"aiko emulate: {exc}") from exc
    out = _Output(args, scene, faults, plant is not None)
    try:
        asyncio.run(_serve(rig, out, args.parent_lifeline))
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    out.stopped(rig)
    return 0


def _scene(args: argparse.Namespace):
    """The scene of --scene or --scene-json (the flat floor without either)."""
    from aiko.experiments.files.scene_file import load_scene, scene_from_json
    from aiko.model.scene import SceneError
    if args.scene is not None and args.scene_json is not None:
        raise ArgError("aiko emulate: give --scene or --scene-json, not both")
    try:
        scene = (scene_from_json(args.scene_json) if args.scene_json is not None
                 else load_scene(args.scene))
    except (SceneError, ValueError) as exc:
        raise ArgError(f"aiko emulate: --scene {exc}") from exc
    if not scene.empty and not args.plant:
        raise ArgError("aiko emulate: --scene needs --plant (obstacles act on the simulated "
                       "Aiko's physics)")
    return scene


def _plant(args: argparse.Namespace) -> PlantParams | None:
    """With --plant, the simulated Aiko's settings (the kernels compiled first)."""
    if not args.plant:
        return None
    plant = PlantParams(backlash_deg=args.backlash_deg, servo=args.servo,
                        mocap_noise_mm=args.mocap_noise_mm,
                        mocap_latency_ms=args.mocap_latency_ms, mocap_rate=args.mocap_rate,
                        mocap_occlusion=tuple(args.mocap_occlusion or ()),
                        mu_x=args.plant_mu_x, mu_y=args.plant_mu_y, seed=args.seed,
                        u_tol=args.u_tol, max_iter=args.max_iter,
                        start_curve=None if args.start_curve is None else str(args.start_curve),
                        start_joint_angles=None if args.start_joint_angles_json is None
                        else tuple(tuple(p) for p in json.loads(args.start_joint_angles_json)))
    from aiko.model import kernels_cached, warm_up
    if not kernels_cached() and not args.json_lines:
        print("compiling the model (first run only) ...", flush=True)
    warm_up()
    return plant


async def _serve(rig, out: _Output, parent_lifeline: bool) -> None:
    """Serve the rig until SIGTERM, Ctrl-C or, with ``parent_lifeline``, the
    end of stdin (the owner holds it: its end means the owner is gone)."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    if not parent_lifeline:
        await rig.run(out.ready, out.status)
        return
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    async with asyncio.TaskGroup() as tg:
        serving = tg.create_task(rig.run(out.ready, out.status), name="rig")

        async def lifeline() -> None:
            while await reader.read(4096):
                pass
            serving.cancel()

        tg.create_task(lifeline(), name="lifeline")


class _Output:
    """What ``aiko emulate`` prints: lines for a person, or JSON lines for the
    process that started it (``--json-lines``)."""

    def __init__(self, args: argparse.Namespace, scene, faults: dict, plant: bool) -> None:
        self.args = args
        self.json_lines = args.json_lines
        self.scene = scene
        self.faults = faults
        self.plant = plant

    def emit(self, kind: str, data: dict) -> None:
        print(json.dumps({kind: data}), flush=True)

    def ready(self, info: dict) -> None:
        if self.json_lines:
            self.emit("ready", info)
            return
        from aiko.drivers.mocap_sources import SERVED_KINDS

        args, scene = self.args, self.scene
        what = "the simulated Aiko" if self.plant else f"{args.nodes} joint modules"
        print(f"aiko emulate: {what} behind an slcan adapter", flush=True)
        print(f"channel: {info['channel']}  (python-can interface 'slcan')", flush=True)
        if info["udp_target"] is not None:
            host, p = info["udp_target"]
            print(f"motion capture: Vicon Tracker UDP Object Stream to {host}:{p}, objects "
                  f"link1..link{args.nodes + 1}"
                  + (f", peg1..peg{len(scene.pegs)}" if scene.pegs else "")
                  + f", {args.mocap_rate:g} Hz", flush=True)
        for kind, served in SERVED_KINDS.items():
            if info.get(served.server) is not None:
                host, p = info[served.server]
                print(f"motion capture: {served.server_what} on {host}:{p}, the same frames "
                      f"(aiko run --mocap {kind}:{host}:{p})", flush=True)
        if not scene.empty:
            print(f"scene: {scene.describe()}", flush=True)
        print(f"processors: {info['awake']}", flush=True)
        for node, f in sorted(self.faults.items()):
            print(f"fault on node {node}: {f}", flush=True)

    def status(self, st: dict) -> None:
        if self.json_lines:
            self.emit("status", st)
        elif "physics_t" in st:
            print(f"t {st['t']:.0f} s: physics lag max {st['max_lag_ms']:.1f} ms, "
                  f"{st['late_updates']} late updates (> 10 ms), {st['mocap_frames']} mocap "
                  f"frames ({st['mocap_held']} held back)", flush=True)

    def stopped(self, rig) -> None:
        final = rig.status()
        if self.json_lines:
            self.emit("stopped", final)
            return
        for m in rig.modules:
            cmds = ", ".join(f"0x{c:02X}" for c in m.nmt_obeyed) or "none"
            print(f"node {m.node}: {m.state.name.lower()}, NMT obeyed: {cmds}", flush=True)
        if "physics_t" in final:
            print(f"physics: {final['physics_t']:.1f} s simulated, lag max "
                  f"{final['max_lag_ms']:.1f} ms, {final['late_updates']} late updates",
                  flush=True)
        print("aiko emulate: stopped", flush=True)
