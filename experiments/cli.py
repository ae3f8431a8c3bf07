"""The `aiko` command line. The only place that prints.

One module per subcommand (``cli_simulate``, ``cli_emulate``, ``cli_run``,
``cli_replay``, ``cli_fit``, ``cli_sweep``, ``cli_optimize``, ``cli_preview``, ``cli_export``,
``cli_info``, ``cli_dbc``): each adds its parser and turns its arguments into a call of a
library function that the tests call too.
"""

from __future__ import annotations

import logging
import sys

from aiko.model.errors import AikoError

from . import (cli_dbc, cli_emulate, cli_export, cli_fit, cli_info, cli_optimize, cli_preview,
               cli_replay, cli_run, cli_simulate, cli_sweep)
from .cli_args import ArgError, Parser

__all__ = ["main", "build_parser"]


def build_parser() -> Parser:
    p = Parser(prog="aiko", description="Aiko snake robot: model, rig and trials.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for mod in (cli_simulate, cli_emulate, cli_run, cli_replay, cli_fit, cli_sweep, cli_optimize,
                cli_preview, cli_export, cli_info, cli_dbc):
        mod.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
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


if __name__ == "__main__":
    sys.exit(main())
