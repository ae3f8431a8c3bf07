"""`aiko doctor`: is the rig ready? One table, one row a part."""

from __future__ import annotations

import argparse
import json
import sys

from aiko.experiments.cli.args import positive
from aiko.experiments.cli.flags import add_flags, add_rig_file_flag, given_flags

__all__ = ["add_parser", "cmd_doctor", "doctor_settings"]


def add_parser(sub) -> None:
    d = sub.add_parser(
        "doctor", help="check every part of the rig before an experiment day",
        description="Check the rig in a few seconds and print one row a part: the CAN adapter "
                    "opens; every joint module's heartbeat and NMT state; each answers SYNC "
                    "with STATE (a module found pre-operational or stopped is started, "
                    "synced and put back; no reference is sent, nothing moves); motion "
                    "capture's frames arrive at the trial's rate with the subject in view; "
                    "the MQTT broker accepts a connection; the trials folder takes a trial "
                    "log; the model's kernels are compiled (compiled now if not). The rig "
                    "comes from the rig file (--rig-file, or aiko.toml in the working "
                    "folder) and the flags. Exit 0: ready; 1: a part failed; 2: bad input.")
    add_rig_file_flag(d, what="the rig checked is the robot's")
    add_flags(d, "doctor")
    d.add_argument("--duration", type=positive("duration"), default=600.0, metavar="S",
                   help="the longest trial planned, for the disk check (default 600)")
    d.add_argument("--no-kernels", dest="kernels", action="store_false",
                   help="leave out the model kernels' row (it compiles them when numba's "
                        "cache does not hold them, about a minute)")
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.set_defaults(func=cmd_doctor)


def doctor_settings(args: argparse.Namespace):
    """The rig to check, from the rig file and the flags."""
    from aiko.experiments.trial.settings import build_settings

    return build_settings(given_flags(args, "doctor"), rig_file=args.rig_file).rig


def cmd_doctor(args: argparse.Namespace) -> int:
    import asyncio

    from aiko.experiments.trial.doctor import check_rig
    from aiko.experiments.trial.wiring import doctor_config

    rig = doctor_settings(args)
    cfg = doctor_config(rig, args.duration, args.kernels)
    if not args.json:
        print(f"checking the rig (rig file: {rig.rig_file or 'none'}) ...", flush=True)
    report = asyncio.run(check_rig(cfg, say=lambda line: print(line, flush=True)
                                   if not args.json else None))
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        _print_table(report)
    return 0 if report.ready else 1


def _print_table(report) -> None:
    width = max(len(c.part) for c in report.checks)
    for c in report.checks:
        print(f"{c.part:{width}s}  {c.status.value:4s}  {c.seen}")
        if c.hint and c.status.value in ("fail", "warn"):
            print(f"{'':{width}s}        check: {c.hint}")
    if report.ready:
        print(f"ready ({report.elapsed:.1f} s)")
    else:
        parts = ", ".join(c.part for c in report.failed)
        print(f"not ready: {parts} ({report.elapsed:.1f} s)", file=sys.stdout)
