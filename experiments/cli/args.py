"""Shared pieces of the `aiko` command's subcommands: one-line argument errors,
number parsers, and the progress and status lines (stderr, terminals only)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NoReturn

__all__ = ["ArgError", "Parser", "trial_files", "out_folder", "OUT_FOLDER_HELP", "number", "positive", "nonneg", "slope",
           "port", "argparse_type", "Progress", "StatusLine"]


class ArgError(Exception):
    """A usage error: printed as one line, exit status 2."""


OUT_FOLDER_HELP = "created with its parents if it does not exist"
"""What every --out DIR help says of a folder that is not there yet."""


def out_folder(command: str, path: Path) -> Path:
    """``--out DIR`` of a command that writes a folder: made, with its parents,
    if it does not exist; a file in its place or a folder that cannot be made
    is a one-line error (``ArgError``)."""
    from aiko.experiments.files.folders import FolderError, make_folder

    try:
        return make_folder(path)
    except FolderError as exc:
        raise ArgError(f"aiko {command}: --out {path}: {exc.reason}") from None


def trial_files(command: str, paths: list[Path]) -> list[Path]:
    """Trial logs as given, a campaign's folder standing for its completed
    trials (``aiko campaign``); a campaign with none is a one-line error."""
    from aiko.experiments.analysis.campaign_summary import completed_logs

    out: list[Path] = []
    for p in paths:
        if p.is_dir() and (p / "campaign.csv").is_file():
            logs = completed_logs(p)
            if not logs:
                raise ArgError(f"aiko {command}: {p}: the campaign has no completed trial yet")
            out += logs
        else:
            out.append(p)
    return out


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        raise ArgError(f"{self.prog}: {message}")


def argparse_type(check, name: str | None = None):
    """A parser of text that raises ValueError with a one-line message, as an
    argparse type (its message is the usage error)."""
    def parse(text: str):
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if name is not None:
        parse.__name__ = name
    return parse


def number(kind: str, cast=float, ok=lambda v: True, expect: str = "", finite: bool = True):
    """An argparse type: parse with ``cast``, check with ``ok``, one-line errors;
    ``finite=False`` lets a float be inf (``ok`` still sees it); the check is
    the settings table's (:func:`aiko.experiments.trial.options.checked_number`)."""
    from aiko.experiments.trial.options import checked_number

    return argparse_type(checked_number(kind, cast, ok, expect, finite))


def positive(kind: str):
    return number(kind, float, lambda v: v > 0, "be a positive number")


def nonneg(kind: str):
    return number(kind, float, lambda v: v >= 0, "be a number >= 0")


slope = number("slope", float, lambda v: abs(v) < 90, "lie in (-90, 90) degrees")
port = number("port", int, lambda v: 0 <= v <= 65535, "lie in 0..65535")


class Progress:
    """A one-line progress bar on stderr, only on a terminal."""

    def __init__(self, total: float, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled and total > 0
        self.last = 0.0

    def __call__(self, t: float) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and t < self.total):
            return
        self.last = now
        frac = min(1.0, t / self.total)
        bar = "#" * int(30 * frac)
        sys.stderr.write(f"\r[{bar:<30}] {t:6.2f}/{self.total:.2f} s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


class StatusLine:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, snap: dict) -> None:
        if not self.enabled:
            return
        p = snap["link6"]
        pos = "link 6 (no data)" if p is None else f"link 6 ({p[0]:+.3f}, {p[1]:+.3f}, {p[2]:+.3f}) m"
        sys.stderr.write(f"\r t {snap['t']:7.1f} s  {snap.get('phase') or '':9s} periods {snap['periods']}  late "
                         f"{snap['late']}  nodes ok {snap['nodes_ok']}/{snap['nodes']}  {pos}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")




def add_executor_options(p) -> None:
    """Where many simulations run (``aiko fit``, ``aiko sweep``)."""
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a Dask scheduler (tcp://host:8786); default: a local process pool")
    p.add_argument("--workers", type=positive("workers"), default=None, metavar="N",
                   help="local processes (default: one per core)")


def executor_args(args) -> tuple[str | None, int | None]:
    return args.scheduler, None if args.workers is None else int(args.workers)


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f} deg/s"


def comparison_lines(m: dict) -> list[str]:
    """The comparison's metrics (:func:`aiko.experiments.analysis.compare.compare_paths`)
    as the summary prints them, each named for what it is; the windows' mean
    and spread when the trial holds two or more."""
    rows = [("net displacement", f"{m['distance_experiment_m']:.3f} m",
             f"{m['distance_model_m']:.3f} m", f"ratio {m['distance_ratio']:.2f}"),
            ("path length", f"{m['path_experiment_m']:.3f} m", f"{m['path_model_m']:.3f} m",
             f"ratio {m['path_ratio']:.2f}"),
            ("heading of travel", f"{m['heading_experiment_deg']:+.1f} deg",
             f"{m['heading_model_deg']:+.1f} deg", f"diff {m['heading_difference_deg']:+.1f} deg"),
            ("turning rate", _rate(m["turning_rate_experiment_deg_s"]),
             _rate(m["turning_rate_model_deg_s"]), ""),
            ("speed along path", f"{100 * m['path_speed_experiment_m_s']:.2f} cm/s",
             f"{100 * m['path_speed_model_m_s']:.2f} cm/s", ""),
            ("net speed", f"{100 * m['speed_experiment_m_s']:.2f} cm/s",
             f"{100 * m['speed_model_m_s']:.2f} cm/s", "")]
    out = [f"link 6, experiment vs model over {m['duration_s']:.1f} s:",
           f"  {'':20s} {'experiment':>12s} {'model':>12s}"]
    out += [f"  {name:20s} {e:>12s} {mo:>12s}  {extra}".rstrip() for name, e, mo, extra in rows]
    out.append(f"  position error: final {100 * m['final_error_m']:.1f} cm, "
               f"RMS {100 * m['rms_error_m']:.1f} cm")
    ws = m.get("window_summary")
    if ws is not None and ws["windows"] >= 2:
        def pm(key: str, scale: float = 1.0, unit: str = "", fmt: str = ".2f") -> str:
            v = ws[key]
            return "-" if v is None else (f"{scale * v['mean']:{fmt}} +- "
                                          f"{scale * v['sd']:{fmt.lstrip('+')}}{unit}")
        out.append(f"  over {ws['windows']} windows of {ws['window_s']:g} s (each aligned at "
                   f"its start): RMS error {pm('rms_error_m', 100, ' cm', '.1f')}, path "
                   f"ratio {pm('path_ratio')}, net displacement ratio {pm('distance_ratio')}, "
                   f"heading diff {pm('heading_difference_deg', unit=' deg', fmt='+.1f')}")
    return out
