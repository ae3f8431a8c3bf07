"""`aiko export`: a trial log as CSV files per channel, its CAN frames as
Vector ASC or BLF, or the whole trial as a ROS 2 bag (rosbag2)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiko.experiments.cli.args import OUT_FOLDER_HELP, ArgError, out_folder

__all__ = ["add_parser", "cmd_export"]


def add_parser(sub) -> None:
    e = sub.add_parser(
        "export", help="export a trial: CSV per channel, CAN frames as ASC or BLF, or a "
                       "ROS 2 bag",
        description="Export a trial log: --format csv writes one CSV per channel (references, "
                    "joint states, EMCY, motion capture, the parallel model, events) for MATLAB "
                    "and pandas; asc and blf write its raw CAN frames in python-can's Vector "
                    "log formats for CAN tools; rosbag2 writes the trial as a ROS 2 bag (folder "
                    "TRIAL-rosbag2: metadata.yaml and MCAP, standard messages) for ros2 bag, "
                    "RViz and PlotJuggler.")
    e.add_argument("trial", type=Path, metavar="TRIAL.mcap")
    e.add_argument("--format", choices=("csv", "asc", "blf", "rosbag2"), default="csv")
    e.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                   help=f"folder for the files (default: here; {OUT_FOLDER_HELP})")
    e.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from aiko.experiments.analysis.export import CAN_TOPICS, export_can, export_csv
    from aiko.experiments.files.triallog import read_trial, stream_frames

    # a CAN log streams the frames (a second pass): nothing else is held in memory
    data = read_trial(args.trial, topics=CAN_TOPICS if args.format in ("asc", "blf") else None)
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
    if args.format == "rosbag2":
        return _rosbag2(data, args.out / f"{stem}-rosbag2")
    path = args.out / f"{stem}.{args.format}"
    n = export_can(stream_frames(args.trial), data.wall_start(), path)
    print(f"{path}: {n} CAN frames")
    return 0


def _rosbag2(data, folder: Path) -> int:
    from aiko.experiments.analysis.rosbag2_export import BagExportError, export_rosbag2

    try:
        summary = export_rosbag2(data, folder)
    except BagExportError as exc:
        raise ArgError(f"aiko export: {exc}") from exc
    total = sum(summary.counts.values())
    print(f"{summary.folder}: rosbag2, {total} messages on {len(summary.counts)} topics")
    return 0
