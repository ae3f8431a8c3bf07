"""`aiko doctor`: is the rig ready? One table, one row a part."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiko.experiments.cli.args import node_count, positive

__all__ = ["add_parser", "cmd_doctor", "doctor_config"]


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
    d.add_argument("--rig-file", type=Path, default=None, metavar="FILE.toml",
                   help="the lab's rig (default: aiko.toml in the working folder if there is "
                        "one); the flags below override its values")
    d.add_argument("--can-interface", default=None, metavar="NAME",
                   help="python-can interface: socketcan (default), slcan, pcan, kvaser, ...")
    d.add_argument("--can-channel", default=None, metavar="CH",
                   help="channel, e.g. can0 (default), /dev/ttyACM0, socket://127.0.0.1:PORT")
    d.add_argument("--bitrate", type=int, default=None, metavar="B", help="bit rate in bit/s")
    d.add_argument("--nodes", type=node_count, default=None, metavar="N",
                   help="joint modules 1..N (default 10)")
    d.add_argument("--mocap", default=None, metavar="SRC",
                   help="vicon-udp[:PORT], vicon-datastream:HOST or none (default none)")
    d.add_argument("--mocap-subject", default=None, metavar="NAME",
                   help="the tracked object (default link6)")
    d.add_argument("--mocap-segment", default=None, metavar="NAME",
                   help="DataStream segment of the subject (default link6)")
    d.add_argument("--mocap-rate", type=positive("mocap rate"), default=None, metavar="HZ",
                   help="the rate trials log motion capture at; the stream must reach it "
                        "(default 20)")
    d.add_argument("--mqtt", default=None, metavar="URL",
                   help="telemetry broker, mqtt://[user:pass@]host[:port][/prefix] or mqtts://")
    d.add_argument("--mqtt-ca", default=None, metavar="FILE", help="CA file for mqtts://")
    d.add_argument("--trials-folder", default=None, metavar="DIR",
                   help="where trial logs go (default: the working folder)")
    d.add_argument("--duration", type=positive("duration"), default=600.0, metavar="S",
                   help="the longest trial planned, for the disk check (default 600)")
    d.add_argument("--no-kernels", dest="kernels", action="store_false",
                   help="leave out the model kernels' row (it compiles them when numba's "
                        "cache does not hold them, about a minute)")
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.set_defaults(func=cmd_doctor)


def doctor_config(args: argparse.Namespace):
    """The rig to check from the rig file and the flags (``args`` updated with
    the merged values), and the rig file read (None without one)."""
    from aiko.drivers.can_bus import check_interface
    from aiko.experiments.cli.rig_settings import mqtt_config, resolve
    from aiko.experiments.files.rig_file import RigFileError
    from aiko.experiments.trial.doctor import DoctorConfig

    _, rig = resolve(args, "doctor")
    check_interface(args.can_interface, args.can_channel)
    source = args.mocap_source or "none"
    mqtt, problem = None, None
    try:   # a password variable not set is the broker's row failing, not bad input
        mqtt = mqtt_config(args)
    except RigFileError as exc:
        problem = str(exc)
    return rig, DoctorConfig(
        can_interface=args.can_interface, can_channel=args.can_channel, bitrate=args.bitrate,
        nodes=args.nodes, mocap_source=source,
        # as in aiko run: a UDP stream is listened to on every address
        mocap_host=args.mocap_host if source == "vicon-datastream" else None,
        mocap_port=args.mocap_port, mocap_subject=args.mocap_subject,
        mocap_segment=args.mocap_segment, mocap_rate=args.mocap_rate, mqtt=mqtt,
        mqtt_problem=problem, trials_folder=Path(args.trials_folder or "."),
        trial_duration=args.duration, kernels=args.kernels)


def cmd_doctor(args: argparse.Namespace) -> int:
    import asyncio

    from aiko.experiments.trial.doctor import check_rig

    rig, cfg = doctor_config(args)
    if not args.json:
        print(f"checking the rig (rig file: {rig.path if rig is not None else 'none'}) ...",
              flush=True)
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
