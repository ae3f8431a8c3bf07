"""`aiko info`: what a trial log holds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from aiko.experiments.cli.args import ArgError

__all__ = ["add_parser", "cmd_info"]


def add_parser(sub) -> None:
    i = sub.add_parser("info", help="what a trial log holds",
                       description="Print a trial log's gait, rig, duration, phases, counts "
                                   "per channel, faults and stored comparison.")
    i.add_argument("trial", type=Path, metavar="TRIAL.mcap")
    i.add_argument("--json", action="store_true", help="print it as JSON")
    i.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    from aiko.experiments.analysis.export import INFO_TOPICS, trial_info
    from aiko.experiments.files.triallog import read_trial

    data = read_trial(args.trial, topics=INFO_TOPICS)
    if not data.metadata:
        raise ArgError(f"aiko info: {args.trial}: not a trial log (no 'trial' metadata)")
    info = trial_info(data)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"{info['file']}: {info['gait']} on the {info['rig']} rig, {info['nodes']} nodes, "
          f"{info['duration_s']:.1f} s, {info['gait_periods']} gait periods"
          + ("" if info["complete"] else " (the file ends early)"))
    if info["scene"] is not None:
        print(f"  scene: {info['scene']}")
    print(f"  phases: {', '.join(p or '?' for p in info['phases']) or '-'}; end: "
          f"{info['end'] or '-'}")
    for f in info["faults"]:
        print(f"  fault: {f.get('reason')}")
    print("  channels: " + ", ".join(f"{ch} {n}" for ch, n in info["channels"].items()))
    m = info["comparison"]
    if m:
        print(f"  comparison: final error {100 * m['final_error_m']:.1f} cm, RMS "
              f"{100 * m['rms_error_m']:.1f} cm, distance ratio {m['distance_ratio']:.2f}, "
              f"heading difference {m['heading_difference_deg']:+.1f} deg")
    st = info["steering"]
    if st:
        settle = ("never settled" if st["settling_time_s"] is None
                  else f"settled after {st['settling_time_s']:.1f} s")
        what = (f"final error {st['final_error_deg']:+.1f} deg" if st["kind"] == "heading"
                and st["final_error_deg"] is not None else
                f"final cross-track {100 * st['final_cross_track_m']:.1f} cm"
                if st.get("final_cross_track_m") is not None else "no estimate")
        print(f"  steering ({st['kind']}): {settle}, {what}; closed loop "
              f"{100 * st['closed_share']:.0f} % of {st['periods']} periods")
    print(f"  software {info['software_version']} ({info['git_revision']})")
    return 0
