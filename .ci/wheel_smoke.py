"""Run by .ci/wheel-smoke with the fresh environment's Python: every module of
the installed ``aiko`` packages imports, every subcommand answers --help, and
``aiko doctor`` checks three emulated joint modules over slcan/TCP (both
started from the installed ``aiko`` command)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

TOP_LEVEL = ("model", "control", "drivers", "firmware_interface", "experiments")


def import_everything() -> int:
    count = 0
    for top in TOP_LEVEL:
        pkg = importlib.import_module(f"aiko.{top}")
        where = Path(pkg.__file__).parent
        if "site-packages" not in where.parts:
            sys.exit(f"aiko.{top} imported from {where}, not from the installed wheel")
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"aiko.{top}."):
            if info.name.endswith(".__main__"):   # runs the command when imported
                continue
            importlib.import_module(info.name)
            count += 1
    return count


def subcommands(aiko: str) -> list[str]:
    from aiko.experiments.cli import build_parser

    parser = build_parser()
    names = parser._subparsers._group_actions[0].choices  # the one place argparse keeps them
    for name in names:
        out = subprocess.run([aiko, name, "--help"], capture_output=True, text=True, timeout=60)
        if out.returncode != 0 or "usage: aiko" not in out.stdout:
            sys.exit(f"aiko {name} --help failed ({out.returncode}): {out.stderr.strip()}")
    return list(names)


def doctor(aiko: str) -> str:
    emulator = subprocess.Popen([aiko, "emulate", "--nodes", "3", "--port", "0",
                                 "--keep-awake", "off", "--json-lines"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert emulator.stdout is not None
        ready = json.loads(emulator.stdout.readline())["ready"]
        out = subprocess.run([aiko, "doctor", "--can-interface", "slcan",
                              "--can-channel", ready["channel"], "--nodes", "3",
                              "--mocap", "none", "--no-kernels"],
                             capture_output=True, text=True, timeout=120)
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)
    if out.returncode != 0 or "ready (" not in out.stdout:
        sys.exit(f"aiko doctor from the wheel failed ({out.returncode}):\n{out.stdout}"
                 f"{out.stderr}")
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    aiko = sys.argv[1]
    modules = import_everything()
    names = subcommands(aiko)
    last = doctor(aiko)
    print(f"wheel: {modules} modules imported, {len(names)} subcommands answer --help, "
          f"aiko doctor: {last}")


if __name__ == "__main__":
    main()
