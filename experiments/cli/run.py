"""`aiko run`: one trial on the simulated rig (default) or the robot, with the
model in parallel and the comparison at the end."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from aiko.experiments.cli.args import StatusLine
from aiko.experiments.cli.flags import add_flags, add_rig_file_flag, given_flags

__all__ = ["add_parser", "cmd_run", "run_session_blocking"]


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
    r.add_argument("--check", action="store_true",
                   help="only run the preflight: print the gait's table (joint limits, motor "
                        "speeds, ramp) and every setting with where it came from, and exit "
                        "(0: can be followed, 1: refused)")
    r.add_argument("--out", type=Path, default=None, metavar="FILE.mcap",
                   help="trial log (default trial-YYYYmmdd-HHMMSS.mcap); the comparison "
                        "goes beside it as FILE.png and FILE.json; its folder must exist")
    add_rig_file_flag(r)
    add_flags(r, "run")
    r.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    from aiko.experiments.files.gait_file import get_gait
    from aiko.experiments.trial.settings import build_settings
    from aiko.experiments.trial.wiring import session_config, trial_duration

    settings = build_settings(given_flags(args, "run"), rig_file=args.rig_file)
    gait = get_gait(args.gait)
    if args.check:
        code = _check(gait, settings.rig.nodes, trial_duration(settings),
                      settings.rig.limit_deg, settings.rig.max_speed_deg_s)
        print("settings (value, and where it came from):")
        for line in settings.describe():
            print(line)
        return code
    session = session_config(settings, gait, args.out)
    wall0 = time.monotonic()
    report, interrupted = run_session_blocking(session, gait)
    wall = time.monotonic() - wall0
    result = report.result
    if interrupted or result is None:
        print(f"aiko run: interrupted; joints sent to the safe state; log: {session.out}")
        _print_comparison(report)
        return 130
    _print_trial(result, gait.name, settings.rig.nodes, virtual=session.time == "virtual")
    if session.time == "virtual":
        print(f"virtual time: {result.duration:.1f} s of trial in {wall:.1f} s of wall time "
              f"(the session's start and the comparison included)")
    _print_rig(result, report)
    _print_comparison(report)
    _print_steering(report)
    print(f"log: {session.out}")
    if result.reason == "fault":
        print(f"aiko run: fault: {result.fault}", file=sys.stderr)
        return 1
    return 0


def run_session_blocking(session, gait):
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

    from aiko.drivers.virtual_time import run_virtual

    interrupted = False
    try:
        (run_virtual if session.time == "virtual" else asyncio.run)(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        interrupted = True
    finally:
        status.close()
    return report, interrupted


def _print_trial(result, gait_name: str, nodes: int, virtual: bool = False) -> None:
    """The stream, the bus and the ramps (no jitter in virtual time: none can be)."""
    from aiko.experiments.trial.runner import jitter_summary

    st = result.stream
    print(f"trial {result.reason}: {gait_name}, {result.duration:.1f} s, {st.periods} periods, "
          f"{st.late} late, {st.missed} missed, STATE matched {st.states_matched} "
          f"(unmatched {st.states_unmatched}), nodes ok {result.nodes_ok}/{nodes}")
    js = jitter_summary(st)
    if js and not virtual:
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
