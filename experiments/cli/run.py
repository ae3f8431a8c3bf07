"""`aiko run`: one trial on the simulated rig (default) or the robot, with the
model in parallel and the comparison at the end."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiko.experiments.cli.args import ArgError, StatusLine, node_count, nonneg, port, positive

__all__ = ["add_parser", "cmd_run", "SIMULATED_DURATION"]

SIMULATED_DURATION = 15.0
"""Default trial length on the simulated rig, s (the paper's 15 s runs)."""


def add_parser(sub) -> None:
    r = sub.add_parser(
        "run", help="run a gait: stream, supervise, log, model in parallel, compare",
        description="Run a trial: bring the joint modules up, stream the gait's references at "
                    "10 Hz over CAN, supervise the joints, log motion capture, run the model "
                    "in parallel, record everything to an MCAP file and compare simulation "
                    "against experiment at the end. Without a robot (--rig simulated, the "
                    "default) the simulated Aiko stands in for it. Ctrl-C or SIGTERM stops "
                    "safely.")
    r.add_argument("gait", metavar="GAIT", help="a preset name or a gait .toml file")
    _add_trial_options(r)
    _add_view_options(r)
    _add_steering_options(r)
    r.add_argument("--scene", default=None, metavar="FILE.toml|NAME",
                   help="obstacles on the floor (a scene file or a preset, pegs-grid): in the "
                        "parallel model, in the simulated Aiko (--rig simulated, whose motion "
                        "capture then streams each peg as peg1, peg2, ...) and in the log")
    _add_plant_options(r)
    r.set_defaults(func=cmd_run)


def _add_trial_options(r) -> None:
    """The trial, the bus, motion capture, telemetry, the log."""
    r.add_argument("--check", action="store_true",
                   help="only run the preflight: print the gait's table (joint limits, motor "
                        "speeds, ramp) and exit (0: can be followed, 1: refused)")
    r.add_argument("--force", action="store_true",
                   help="stream a gait the preflight refuses (clamped at the joint limits; "
                        "logged)")
    r.add_argument("--ramp-time", type=nonneg("ramp time"), default=None, metavar="S",
                   help="time to ramp the joints to the gait's start posture (default: the "
                        "fastest joint at 25 %% of its motor's full-duty speed)")
    r.add_argument("--end", choices=("hold", "straight"), default="hold",
                   help="when the duration is over: hold the last posture (default) or ramp "
                        "every joint back to 0 first; faults and Ctrl-C always hold")
    r.add_argument("--rig-file", type=Path, default=None, metavar="FILE.toml",
                   help="the lab's rig described once (CAN, joints, motion capture, MQTT, "
                        "where trials go; default: aiko.toml in the working folder if there "
                        "is one); flags override its values, and with it the trial runs on "
                        "the robot unless --rig simulated")
    r.add_argument("--rig", choices=("simulated", "robot"), default=None,
                   help="simulated: start the simulated Aiko (default without a rig file); "
                        "robot: the real bus and motion capture")
    r.add_argument("--can-interface", default=None, metavar="NAME",
                   help="robot: python-can interface: socketcan (default), slcan, pcan, "
                        "kvaser, ...")
    r.add_argument("--can-channel", default=None, metavar="CH",
                   help="robot: channel, e.g. can0 (default), /dev/ttyACM0, "
                        "socket://127.0.0.1:PORT")
    r.add_argument("--bitrate", type=int, default=None, metavar="B",
                   help="bit rate in bit/s (robot: 1000000)")
    r.add_argument("--nodes", type=node_count, default=None, metavar="N",
                   help="joint modules 1..N (default 10)")
    r.add_argument("--mocap", default=None, metavar="SRC",
                   help="vicon-udp[:PORT], vicon-datastream:HOST or none (default: none on "
                        "the robot, the simulated Aiko's stream on the simulated rig)")
    r.add_argument("--mocap-subject", default=None, metavar="NAME",
                   help="the tracked object (UDP object name or DataStream subject; default "
                        "link6)")
    r.add_argument("--mocap-segment", default=None, metavar="NAME",
                   help="DataStream segment of the subject (default link6)")
    r.add_argument("--mocap-rate", type=positive("mocap rate"), default=None, metavar="HZ",
                   help="motion-capture logging rate (default 20)")
    r.add_argument("--tolerate", action="append", default=[], metavar="FAULT",
                   choices=("current-limit", "encoder-fault"),
                   help="keep going after this fault (default: every fault stops the trial)")
    r.add_argument("--mqtt", default=None, metavar="URL",
                   help="telemetry broker, mqtt://[user:pass@]host[:port][/prefix] or mqtts://")
    r.add_argument("--mqtt-ca", default=None, metavar="FILE", help="CA file for mqtts://")
    r.add_argument("--duration", type=positive("duration"), default=None, metavar="S",
                   help="trial length, s (default: 15 on the simulated rig, until Ctrl-C on "
                        "the robot)")
    r.add_argument("--startup-timeout", type=positive("startup timeout"), default=2.0,
                   metavar="S", help="wait this long for every node's heartbeat (default 2)")
    r.add_argument("--out", type=Path, default=None, metavar="FILE.mcap",
                   help="trial log (default trial-YYYYmmdd-HHMMSS.mcap); the comparison "
                        "goes beside it as FILE.png and FILE.json; its folder must exist")
    r.add_argument("--no-model", action="store_true",
                   help="do not run the model in parallel (no comparison)")


def _add_view_options(r) -> None:
    v = r.add_argument_group("watching a trial live")
    v.add_argument("--live", type=port, nargs="?", const=8765, default=None,
                   metavar="PORT",
                   help="serve a live page of the trial on http://127.0.0.1:PORT/ (default "
                        "port 8765; 0: any free port): link 6 from motion capture and from "
                        "the model, x(t), y(t), the heading when steering, the status")
    v.add_argument("--live-host", default=None, metavar="HOST",
                   help="bind the live page (and --foxglove) to this address instead of "
                        "127.0.0.1, e.g. 0.0.0.0 to let other machines watch")
    v.add_argument("--foxglove", type=port, nargs="?", const=8766, default=None,
                   metavar="PORT",
                   help="serve the trial to Foxglove (WebSocket protocol, default port 8766): "
                        "the links as a 3D scene, link 6, steering, status, events")


def _add_steering_options(r) -> None:
    s = r.add_argument_group(
        "steering: close the loop through motion capture (lateral undulation)",
        "A joint offset added to every horizontal joint turns the snake; a controller sets it "
        "every period from the heading of travel that motion capture sees (the mean of the "
        "links where it tracks three or more, else the tracked link, over one gait period: "
        "the estimate lags by about half a period). Stale motion capture holds the last "
        "offset for --steer-hold s, then the gait runs open loop until it is back; every "
        "period's estimate, target and offset go to the log's /steering.")
    how = s.add_mutually_exclusive_group()
    how.add_argument("--heading", type=float, default=None, metavar="DEG",
                     help="hold this heading of travel (deg from motion capture's x axis "
                          "toward y)")
    how.add_argument("--path", type=Path, default=None, metavar="FILE.toml",
                     help="follow a straight line or waypoint polyline with line-of-sight "
                          "guidance ([path] waypoints = [[x, y], ...] m, lookahead, accept)")
    s.add_argument("--steer-gain", type=positive("steer gain"), default=0.25, metavar="K",
                   help="offset per heading error, deg/deg (default 0.25)")
    s.add_argument("--steer-ki", type=nonneg("steer ki"), default=0.015, metavar="K",
                   help="integral gain, deg of offset per deg s of heading error (default "
                        "0.015; 0: proportional only); takes out a steady turn, e.g. from "
                        "joints whose zero is off")
    s.add_argument("--steer-max-deg", type=positive("steer max"), default=15.0, metavar="DEG",
                   help="largest offset (default 15; less where the gait's amplitude leaves "
                        "less room to the joint limits)")
    s.add_argument("--steer-hold", type=nonneg("steer hold"), default=1.0, metavar="S",
                   help="on stale motion capture, hold the last offset this long before "
                        "falling back to open loop (default 1)")
    s.add_argument("--steer-window", type=positive("steer window"), default=None, metavar="S",
                   help="the heading estimate's window (default: one gait period)")


def _add_plant_options(r) -> None:
    g = r.add_argument_group("the simulated Aiko (--rig simulated)")
    g.add_argument("--plant", choices=("realistic", "ideal"), default="realistic",
                   help="realistic: 4 deg free play, the modules' servo limits, 0.5 mm mocap "
                        "noise (default); ideal: none of them")
    g.add_argument("--backlash-deg", type=nonneg("backlash"), default=None, metavar="DEG",
                   help="free play between motor and link")
    g.add_argument("--servo", choices=("module", "ideal"), default=None,
                   help="the modules' duty- and speed-limited servo, or ideal motors")
    g.add_argument("--mocap-noise-mm", type=nonneg("mocap noise"), default=None, metavar="MM",
                   help="motion-capture noise (standard deviation per coordinate)")
    g.add_argument("--mocap-latency-ms", type=nonneg("mocap latency"), default=None,
                   metavar="MS", help="motion-capture latency")
    g.add_argument("--start-curve", type=Path, default=None, metavar="FILE.toml",
                   help="the simulated Aiko starts at rest laid along this curve ([curve] "
                        "polyline or arc; see aiko simulate --start-curve); the trial's ramp "
                        "then takes its joints to the gait's start posture")
    g.add_argument("--plant-fault", action="append", default=[], metavar="NODE:KIND[=V][@T]",
                   help="an emulated module's fault, as aiko emulate --fault (drop=F, "
                        "delay=S, silent, encoder[=h|v], saturate[=h|v], babble=RATE; @T s "
                        "after the simulated Aiko's start), to rehearse a fault; repeatable")
    g.add_argument("--plant-mu", type=nonneg("plant mu"), default=None, metavar="MU",
                   help="the simulated floor's friction, if it differs from the gait's")
    g.add_argument("--plant-mu-x", type=nonneg("plant mu-x"), default=None, metavar="MU",
                   help="the simulated floor's friction along the links")
    g.add_argument("--plant-mu-y", type=nonneg("plant mu-y"), default=None, metavar="MU",
                   help="the simulated floor's friction across the links")


def plant_from_args(args: argparse.Namespace):
    from aiko.experiments.rig.plant import PlantParams

    base = PlantParams.ideal() if args.plant == "ideal" else PlantParams.realistic()
    changes = {}
    for flag in ("backlash_deg", "servo", "mocap_noise_mm", "mocap_latency_ms"):
        if getattr(args, flag) is not None:
            changes[flag] = getattr(args, flag)
    if args.start_curve is not None:
        if args.rig != "simulated":
            raise ArgError("aiko run: --start-curve places the simulated Aiko; the robot "
                           "starts where it lies")
        changes["start_curve"] = str(args.start_curve)
    if args.plant_fault:
        changes["faults"] = tuple(_plant_faults(args))
    if args.plant_mu is not None and (args.plant_mu_x is not None or args.plant_mu_y is not None):
        raise ArgError("aiko run: give either --plant-mu or --plant-mu-x/--plant-mu-y, not both")
    if args.plant_mu is not None:
        changes["mu_x"] = changes["mu_y"] = args.plant_mu
    if args.plant_mu_x is not None:
        changes["mu_x"] = args.plant_mu_x
    if args.plant_mu_y is not None:
        changes["mu_y"] = args.plant_mu_y
    from dataclasses import replace
    return replace(base, **changes)


def _plant_faults(args: argparse.Namespace) -> list[str]:
    from aiko.firmware_interface.faults import FaultSpecError, faults_by_node

    if args.rig != "simulated":
        raise ArgError("aiko run: --plant-fault is for the simulated Aiko (--rig simulated)")
    try:
        nodes = faults_by_node(args.plant_fault)
    except FaultSpecError as exc:
        raise ArgError(f"aiko run: --plant-fault: {exc}") from None
    for node in nodes:
        if node > args.nodes:
            raise ArgError(f"aiko run: --plant-fault for node {node}, but only nodes "
                           f"1..{args.nodes} exist")
    return list(args.plant_fault)


def steering_from_args(args: argparse.Namespace):
    """The SteeringConfig of --heading/--path and the --steer-* flags, or None."""
    import math

    from aiko.control.steering import SteeringConfig
    from aiko.experiments.files.path_file import load_path_toml

    if args.heading is None and args.path is None:
        return None
    common = dict(k_p=args.steer_gain, k_i=args.steer_ki, phi_max=math.radians(args.steer_max_deg),
                  hold=args.steer_hold, window=args.steer_window)
    if args.heading is not None:
        if not math.isfinite(args.heading):
            raise ArgError("aiko run: --heading must be a finite number of degrees")
        return SteeringConfig(heading=math.radians(args.heading), **common)
    spec = load_path_toml(args.path)
    return SteeringConfig(waypoints=spec.waypoints, lookahead=spec.lookahead,
                          accept=spec.accept, **common)


def cmd_run(args: argparse.Namespace) -> int:
    from aiko.experiments.cli.rig_settings import as_metadata, describe, resolve
    from aiko.experiments.files.gait_file import get_gait

    settings, rig = resolve(args, "run")
    gait = get_gait(args.gait)
    simulated = args.rig == "simulated"
    duration = args.duration if args.duration is not None else (
        SIMULATED_DURATION if simulated else None)
    if args.check:
        code = _check(gait, args.nodes, duration, args.limit_deg, args.max_speed_deg_s)
        print("settings (value, and where it came from):")
        for line in describe(settings, rig):
            print(line)
        return code
    session = session_from_args(args, duration, gait.name, as_metadata(settings, rig))
    report, interrupted = _run(session, gait)
    result = report.result
    if interrupted or result is None:
        print(f"aiko run: interrupted; joints sent to the safe state; log: {session.out}")
        _print_comparison(report)
        return 130
    _print_trial(result, gait.name, args.nodes)
    _print_rig(result, report)
    _print_comparison(report)
    _print_steering(report)
    print(f"log: {session.out}")
    if result.reason == "fault":
        print(f"aiko run: fault: {result.fault}", file=sys.stderr)
        return 1
    return 0


def session_from_args(args: argparse.Namespace, duration: float | None, gait_name: str,
                      settings: dict | None = None):
    """The :class:`~aiko.experiments.trial.session.SessionConfig` of ``aiko run``'s
    flags, merged with the rig file (:func:`.rig_settings.resolve`)."""
    import math

    from aiko.control.supervisor import FaultPolicy
    from aiko.experiments.cli.rig_settings import mqtt_config, without_password
    from aiko.experiments.files.scene_file import load_scene
    from aiko.experiments.trial.runner import TrialConfig
    from aiko.experiments.trial.session import SessionConfig

    simulated = args.rig == "simulated"
    mocap_spec = args.mocap or ("vicon-udp" if simulated else "none")
    mocap_kind = mocap_spec.partition(":")[0]
    # merged by resolve(); the host is the DataStream server's (a UDP source
    # listens on every address, as before)
    mocap_host = args.mocap_host if mocap_kind == "vicon-datastream" else None
    mocap_port = args.mocap_port
    if not simulated and mocap_kind == "vicon-udp" and mocap_port is None:
        mocap_port = 51001
    mqtt_cfg = mqtt_config(args)
    policy = FaultPolicy(stop_on_current_limit="current-limit" not in args.tolerate,
                         stop_on_encoder_fault="encoder-fault" not in args.tolerate)
    config = TrialConfig(gait=args.gait, nodes=args.nodes, duration=duration, rig=args.rig,
                         can_interface="slcan" if simulated else args.can_interface,
                         can_channel="(the simulated Aiko's)" if simulated else args.can_channel,
                         bitrate=args.bitrate, mocap=mocap_spec, mocap_subject=args.mocap_subject,
                         mocap_segment=args.mocap_segment, mocap_rate=args.mocap_rate,
                         mqtt=without_password(args.mqtt), startup_timeout=args.startup_timeout,
                         policy=policy, limit=math.radians(args.limit_deg),
                         omega_max=math.radians(args.max_speed_deg_s),
                         ramp_time=args.ramp_time, end=args.end, force=args.force,
                         steering=steering_from_args(args))
    out = args.out or _default_out(args, gait_name)
    scene = load_scene(args.scene)
    return SessionConfig(trial=config, out=out, plant=plant_from_args(args), scene=scene,
                         parallel_model=not args.no_model, mocap_host=mocap_host,
                         mocap_port=mocap_port, mqtt=mqtt_cfg,
                         live=None if args.live is None else (args.live_host, args.live),
                         foxglove=None if args.foxglove is None
                         else (args.live_host, args.foxglove), settings=settings)


def _default_out(args: argparse.Namespace, gait_name: str) -> Path:
    """The trial log's path from the rig file's [trials] folder and name
    pattern (the folder made if need be), never an existing file."""

    from aiko.experiments.cli.args import out_folder
    from aiko.experiments.files.rig_file import trial_stem
    from aiko.experiments.files.triallog import free_log_path

    folder = Path(args.trials_folder) if args.trials_folder else Path(".")
    if args.trials_folder:
        out_folder("run", folder)
    return free_log_path(trial_stem(args.trials_name, gait_name), folder)


def _run(session, gait):
    """Run the session until it ends, Ctrl-C or SIGTERM: (report, interrupted)."""
    import asyncio
    import signal

    from aiko.experiments.trial.session import SessionReport, run_session

    status = StatusLine(sys.stderr.isatty())
    report = SessionReport()

    def say(text: str) -> None:
        print(f"aiko run: {text}", flush=True)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        await run_session(session, gait, report, say=say, status=status)

    interrupted = False
    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    finally:
        status.close()
    return report, interrupted


def _print_trial(result, gait_name: str, nodes: int) -> None:
    """The stream, the bus and the ramps."""
    from aiko.experiments.trial.runner import jitter_summary

    st = result.stream
    print(f"trial {result.reason}: {gait_name}, {result.duration:.1f} s, {st.periods} periods, "
          f"{st.late} late, {st.missed} missed, STATE matched {st.states_matched} "
          f"(unmatched {st.states_unmatched}), nodes ok {result.nodes_ok}/{nodes}")
    js = jitter_summary(st)
    if js:
        print("period jitter p50 {jitter_p50_ms:.2f} ms, p99 {jitter_p99_ms:.2f} ms, max "
              "{jitter_max_ms:.2f} ms".format(**js)
              + ("; SYNC->STATE p50 {rtt_p50_ms:.2f} ms, p99 {rtt_p99_ms:.2f} ms, max "
                 "{rtt_max_ms:.2f} ms".format(**js)
                 if "rtt_p50_ms" in js else ""))
    print(f"CAN tx {result.can['tx']} (failed {result.can['tx_errors']}), rx {result.can['rx']} "
          f"(errors {result.can['rx_errors']}, dropped {result.can['rx_dropped']})"
          + (f"; mocap {result.mocap}" if result.mocap else "")
          + (f"; mqtt {result.telemetry}" if result.telemetry else ""))
    for name, ramp in result.ramps.items():
        what = "to the start posture" if name == "ramp" else "back to straight"
        print(f"ramp {what}: {ramp['duration']:.1f} s, peak {ramp['peak_speed'] * 57.29578:.0f} "
              f"deg/s, every joint within {ramp['max_error_deg']:.2f} deg after "
              f"{ramp['settle_periods']} more period(s)")


def _print_rig(result, report) -> None:
    """Link 6's last position, the simulated Aiko's lag, the parallel model."""
    if result.last_link6 is not None:
        x, y, z = result.last_link6
        print(f"link 6 last seen at ({x:+.4f}, {y:+.4f}, {z:+.4f}) m")
    if report.plant.get("max_lag_ms") is not None:
        p99, p50 = report.plant.get("lag_p99_ms"), report.plant.get("lag_p50_ms")
        held = report.plant.get("mocap_held") or 0
        due = held + (report.plant.get("mocap_frames") or 0)
        print(f"simulated Aiko: physics lag max {report.plant['max_lag_ms']:.1f} ms"
              + (f", p99 {p99:.1f} ms" if p99 is not None else "")
              + (f", p50 {p50:.1f} ms" if p50 is not None else "")
              + f", {report.plant.get('late_updates', 0)} late updates (> 10 ms)"
              + (f", {held} of {due} mocap frames held back (physics behind)" if held else ""))
        if report.plant.get("physics_demoted"):
            print(f"simulated Aiko: the physics left the real-time class "
                  f"{report.plant['physics_demoted']} time(s), unable to catch up")
    if report.plant.get("answer_p99_ms") is not None:
        pl = report.plant
        print(f"simulated Aiko: SYNC->STATE on its bus p50 {pl['answer_p50_ms']:.1f} ms, "
              f"p99 {pl['answer_p99_ms']:.1f} ms, max {pl['answer_max_ms']:.1f} ms")
    m = result.model
    if m:
        if m.get("stopped"):
            print(f"parallel model: stopped during the trial: {m['stopped']}")
        else:
            demoted = (m.get("done") or {}).get("demoted")
            print(f"parallel model: {m['samples']} samples, lag max {m['max_lag_s']:.2f} s"
                  + (f"; it left the real-time class {demoted} time(s), unable to keep up"
                     if demoted else ""))


def _check(gait, nodes: int, duration: float | None, limit_deg: float,
           max_speed_deg_s: float) -> int:
    import math

    from aiko.control.preflight import format_table, preflight

    report = preflight(gait, nodes, duration, limit=math.radians(limit_deg),
                       omega_max=math.radians(max_speed_deg_s))
    for line in format_table(report, bounded=duration is not None):
        print(line)
    return 0 if report.ok else 1


def _print_comparison(report) -> None:
    m = report.metrics
    if m is None:
        if report.comparison_error:
            print(f"no comparison: {report.comparison_error}")
        return
    from aiko.experiments.cli.args import comparison_lines

    for line in comparison_lines(m):
        print(line)
    if report.figure is not None:
        print(f"figure: {report.figure}")
    if report.json is not None:
        print(f"metrics: {report.json}")


def _print_steering(report) -> None:
    m = report.steering
    if m is None:
        return
    st = m["settling_time_s"]
    settle = "never settled" if st is None else f"settled after {st:.1f} s"
    if m["kind"] == "heading":
        line = f"steering (heading hold): {settle} (within {m['band_deg']:g} deg)"
        if m.get("steady_error_deg") is not None:
            line += (f", then error {m['steady_error_deg']:+.1f} deg mean, "
                     f"{m['steady_rms_deg']:.1f} deg RMS")
    else:
        line = f"steering (path): {settle} (within {100 * m['band_m']:g} cm)"
        if m.get("cross_track_rms_m") is not None:
            line += (f", then cross-track {100 * m['cross_track_rms_m']:.1f} cm RMS, "
                     f"{100 * m['cross_track_max_m']:.1f} cm max")
    line += (f"; closed loop {100 * m['closed_share']:.0f} % of the periods, "
             f"{m['hold_periods']} held, {m['open_periods']} open")
    print(line)
    if report.steering_figure is not None:
        print(f"steering figure: {report.steering_figure}")
