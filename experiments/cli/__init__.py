"""The `aiko` command line. The only place that prints.

One module per subcommand (``simulate``, ``emulate``, ``run``, ``doctor``, ``campaign``, ``replay``, ``fit``,
``sweep``, ``optimize``, ``preview``, ``export``, ``info``, ``dbc``): each adds its
parser and turns its arguments into a call of a library function that the tests call
too. :mod:`.args` holds what they share (one-line argument errors, number parsers,
progress and status lines).

May import every other package of the stack; nothing imports it (an import-linter
contract). ``python -m aiko.experiments.cli`` is the ``aiko`` command.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys

from aiko.model.errors import AikoError

from . import (
    campaign,
    dbc,
    doctor,
    emulate,
    export,
    fit,
    info,
    optimize,
    preview,
    replay,
    run,
    simulate,
    sweep,
)
from .args import ArgError, Parser

__all__ = ["main", "console_main", "build_parser", "version", "LOG_FORMAT"]

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
"""How the command shows a warning of the stack's loggers on stderr."""


def version() -> str:
    """The installed package's name and version, and Python's (what every
    trial log's metadata keeps too, with the git revision)."""
    from importlib import metadata

    try:
        mine = metadata.version("aiko-hil")
    except metadata.PackageNotFoundError:
        mine = "unknown (not installed)"
    return f"aiko-hil {mine} (Python {sys.version.split()[0]})"


def build_parser() -> Parser:
    p = Parser(prog="aiko", description="Aiko snake robot: model, rig and trials.")
    p.add_argument("--version", action="version", version=version(),
                   help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for mod in (simulate, emulate, run, doctor, campaign, replay, fit, sweep, optimize, preview,
                export, info, dbc):
        mod.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    parser = build_parser()
    args = None
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except ArgError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except AikoError as exc:
        print(f"aiko {getattr(args, 'command', '')}: {exc}".replace("  ", " "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("aiko: interrupted", file=sys.stderr)
        return 130


def console_main() -> int:
    """The ``aiko`` command (and ``python -m aiko.experiments.cli``): :func:`main`,
    then the heap frozen, as the process ends next: the interpreter's exit
    then does not collect what the command held (the model, numba's
    dispatchers, matplotlib), which took 0.4 s of every ``aiko run``. Not for
    calling :func:`main` in a process that goes on (a test's). Output piped
    into a reader that stops early (``aiko run GAIT --check | head``) ends
    the command quietly, with 141 as a shell gives a command ended by
    SIGPIPE."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 128 + signal.SIGPIPE
    gc.freeze()
    return code
