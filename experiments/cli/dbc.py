"""`aiko dbc`: where the joint protocol's DBC is, or its C code."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiko.experiments.cli.args import ArgError

__all__ = ["add_parser", "cmd_dbc"]


def add_parser(sub) -> None:
    d = sub.add_parser("dbc", help="the joint protocol's DBC file and C code",
                       description="Print where the DBC is, or write the C pack/unpack code "
                                   "that cantools generates from it.")
    d.add_argument("--c-source", type=Path, metavar="DIR",
                   help="write aiko_joint.h and aiko_joint.c into DIR")
    d.set_defaults(func=cmd_dbc)


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
        raise ArgError(f"aiko dbc: cannot write into {args.c_source}: {exc.strerror}") from exc
    print(f"wrote {args.c_source / 'aiko_joint.h'} and {args.c_source / 'aiko_joint.c'}")
    return 0
