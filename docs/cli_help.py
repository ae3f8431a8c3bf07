"""Write each `aiko` subcommand's --help into docs/.cli/NAME.txt, which its
command page includes: the site shows the help texts the command prints.

    python docs/cli_help.py          # regenerate after changing a command's flags

tests/docs/test_docs_agree.py fails while a file differs from the command's
help. The width is fixed (88 columns) so the text does not depend on the
terminal it was made in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / ".cli"


def help_texts() -> dict[str, str]:
    """{subcommand: its --help text}, as `aiko NAME --help` prints it in 88 columns."""
    from aiko.experiments.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "88"      # argparse wraps to the terminal's width
    try:
        return {name: p.format_help() for name, p in sub.choices.items()}
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for name, text in help_texts().items():
        (OUT / f"{name}.txt").write_text(text)
    print(f"wrote {len(help_texts())} help texts to {OUT.name}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
