"""`aiko replay`: re-simulate logged trials from the references they sent and
compare with their motion capture."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from aiko.experiments.cli.args import (
    OUT_FOLDER_HELP,
    ArgError,
    comparison_lines,
    out_folder,
    trial_files,
)
from aiko.experiments.cli.flags import add_named_flags

__all__ = ["add_parser", "cmd_replay", "add_model_options",
           "replay_options"]


def add_model_options(p) -> None:
    """The model parameters a replay or a fit may change."""
    g = p.add_argument_group("model parameters (default: the trial's)")
    add_named_flags(g, "replay", "mu", "mu_x", "mu_y", "backlash_deg", "servo", "dt", "scene",
                    "u_tol", "max_iter")


def parse_delay(value: str) -> float | str:
    if value == "auto":
        return "auto"
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--delay: expected seconds or 'auto', got {value!r}") from None
    if not math.isfinite(v) or abs(v) > 5:
        raise argparse.ArgumentTypeError(f"--delay: {value} s is not a plausible delay")
    return v


def add_parser(sub) -> None:
    r = sub.add_parser(
        "replay", help="re-simulate logged trials and compare them with their motion capture",
        description="Re-simulate each trial from the references it sent (values and send "
                    "times, gait periods only), from the posture it started in, with the "
                    "trial's model or other parameters, and write the comparison against its "
                    "motion capture (figure and JSON) into DIR; several trials also give a "
                    "summary table (printed, and replay-summary.csv).")
    r.add_argument("trials", nargs="+", metavar="TRIAL.mcap", type=Path,
                   help="trial logs (or their rosbag2 exports), or a campaign's folder for all "
                        "its completed trials")
    add_model_options(r)
    r.add_argument("--delay", type=parse_delay, default=0.0, metavar="S|auto",
                   help="motion capture's delay behind the commands, s; auto: estimate it "
                        "from the data (default 0)")
    r.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                   help=f"where the figures, JSON and summary go (default: here; {OUT_FOLDER_HELP})")
    r.add_argument("--tag", default=None, metavar="TEXT",
                   help="name the outputs TRIAL-replay-TEXT.png/.json (to keep replays with "
                        "other parameters apart)")
    r.set_defaults(func=cmd_replay)


def replay_options(args: argparse.Namespace, command: str) -> dict:
    """Keyword arguments of :func:`aiko.experiments.analysis.replay_files.replay_trial`."""
    if args.mu is not None and (args.mu_x is not None or args.mu_y is not None):
        raise ArgError(f"aiko {command}: give either --mu or --mu-x/--mu-y, not both")
    mu_x = args.mu if args.mu is not None else args.mu_x
    mu_y = args.mu if args.mu is not None else args.mu_y
    return {"mu_x": mu_x, "mu_y": mu_y,
            "backlash": None if args.backlash_deg is None else math.radians(args.backlash_deg),
            "servo": args.servo, "dt": args.dt, "u_tol": args.u_tol,
            "max_iter": None if args.max_iter is None else int(args.max_iter),
            "scene": _checked_scene(args.scene, command)}


def _checked_scene(spec: str | None, command: str) -> str | None:
    """The --scene value, once it is known to load (a bad file fails here,
    before any trial is read)."""
    if spec is not None:
        from aiko.experiments.files.scene_file import load_scene
        from aiko.model.scene import SceneError
        try:
            load_scene(spec)
        except SceneError as exc:
            raise ArgError(f"aiko {command}: --scene {exc}") from exc
    return spec


def cmd_replay(args: argparse.Namespace) -> int:
    from aiko.experiments.analysis.replay_files import replay_trials, summary_rows, write_summary

    opts = replay_options(args, "replay")
    out = args.out
    if args.tag is not None and not args.tag.replace("-", "").replace("_", "").isalnum():
        raise ArgError(f"aiko replay: --tag {args.tag!r}: letters, digits, - and _ only")
    out_folder("replay", out)
    results = replay_trials(trial_files("replay", args.trials), out=out, delay=args.delay, tag=args.tag, **opts)
    for r in results:
        if r.error is not None:
            print(f"aiko replay: {r.error}", file=sys.stderr)
            continue
        if r.truncated:
            print(f"{r.path}: the file ends early (a killed run); replayed the "
                  f"{r.duration:.1f} s it holds")
        m = r.metrics
        delay = (f"; delay {1e3 * r.delay:.0f} ms"
                 + (f" +- {1e3 * r.delay_estimate.uncertainty:.0f} ms (estimated)"
                    if r.delay_estimate is not None else ""))
        print(f"{r.path.name}: {r.gait}, {r.duration:.1f} s, {r.kind} replay ({r.start}){delay}")
        for line in comparison_lines(m):
            print(f"  {line}")
        if r.against_logged is not None:
            print(f"  against the trial's own parallel model: RMS "
                  f"{1e3 * r.against_logged['rms_error_m']:.2f} mm")
        print(f"  figure: {r.figure}")
    ok = [r for r in results if r.error is None]
    if len(results) > 1 and ok:
        rows = summary_rows(ok)
        csv = write_summary(out / ("replay-summary.csv" if args.tag is None
                                   else f"replay-summary-{args.tag}.csv"), rows)
        keys = ("trial", "final_error_cm", "rms_error_cm", "distance_ratio",
                "heading_difference_deg", "delay_ms")
        print("  ".join(f"{k:>22s}" if i else f"{k:<28s}" for i, k in enumerate(keys)))
        for row in rows:
            print("  ".join(f"{row[k]:>22.3f}" if i else f"{row[k]:<28s}"
                            for i, k in enumerate(keys)))
        print(f"summary: {csv}")
    return 0 if len(ok) == len(results) else 2
