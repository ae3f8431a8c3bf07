"""`aiko export`: a trial log as CSV files per channel, or its CAN frames as
Vector ASC or BLF."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiko.experiments.cli.args import OUT_FOLDER_HELP, ArgError, out_folder

__all__ = ["add_parser", "cmd_export"]


def add_parser(sub) -> None:
    e = sub.add_parser(
        "export", help="export a trial: CSV per channel, or CAN frames as ASC or BLF",
        description="Export a trial log: --format csv writes one CSV per channel (references, "
                    "joint states, EMCY, motion capture, the parallel model, events) for MATLAB "
                    "and pandas; asc and blf write its raw CAN frames in python-can's Vector "
                    "log formats for CAN tools.")
    e.add_argument("trial", type=Path, metavar="TRIAL.mcap")
    e.add_argument("--format", choices=("csv", "asc", "blf"), default="csv")
    e.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                   help=f"folder for the files (default: here; {OUT_FOLDER_HELP})")
    e.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from aiko.experiments.analysis.export import CAN_TOPICS, export_can, export_csv
    from aiko.experiments.files.triallog import read_trial

    # a CAN log needs the frames only: the other channels are not held in memory
    data = read_trial(args.trial, topics=None if args.format == "csv" else CAN_TOPICS)
    if not data.metadata:
        raise ArgError(f"aiko export: {args.trial}: not a trial log (no 'trial' metadata)")
    out_folder("export", args.out)
    stem = args.trial.stem
    if data.truncated:
        print(f"{args.trial}: the file ends early (a killed run); exporting what it holds")
    if args.format == "csv":
        for path in export_csv(data, args.out, stem):
            print(path)
        return 0
    path = args.out / f"{stem}.{args.format}"
    n = export_can(data, path)
    print(f"{path}: {n} CAN frames")
    return 0
