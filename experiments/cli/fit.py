"""`aiko fit`: identify model parameters from logged trials."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiko.experiments.cli.args import (
    OUT_FOLDER_HELP,
    add_executor_options,
    executor_args,
    out_folder,
    positive,
    trial_files,
)
from aiko.experiments.cli.flags import add_named_flags

__all__ = ["add_parser", "cmd_fit"]


def add_parser(sub) -> None:
    f = sub.add_parser(
        "fit", help="fit model parameters (friction, free play, delay) to logged trials",
        description="Find the model parameters that bring the replays of the trials closest "
                    "to their motion capture (mean RMS error of link 6), bounded and "
                    "derivative-free with scipy.optimize; writes fit.json and one figure per "
                    "trial with the fitted model into DIR.")
    f.add_argument("trials", nargs="+", metavar="TRIAL.mcap", type=Path,
                   help="trial logs, or a campaign's folder for all its completed trials")
    f.add_argument("--params", required=True, metavar="LIST",
                   help="comma-separated: mu (isotropic) or mu_x,mu_y; backlash (deg); "
                        "delay (s)")
    f.add_argument("--bounds", default=None, metavar="SPEC",
                   help="e.g. mu=0.05:0.6,backlash=0:8 (defaults: friction 0.02:1, "
                        "backlash 0:10 deg, delay -0.3:0.3 s)")
    add_named_flags(f, "fit", "servo")
    add_named_flags(f, "fit", "u_tol", "max_iter")
    f.add_argument("--method", choices=("nelder-mead", "de"), default="nelder-mead",
                   help="Nelder-Mead (default) or differential evolution (evaluations in "
                        "parallel)")
    f.add_argument("--budget", type=positive("budget"), default=60, metavar="N",
                   help="evaluations at most (default 60)")
    add_executor_options(f)
    f.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                   help=f"folder for fit.json and the figures (default: here; {OUT_FOLDER_HELP})")
    f.set_defaults(func=cmd_fit)


def cmd_fit(args: argparse.Namespace) -> int:
    from aiko.experiments.analysis.compare import comparison_figure
    from aiko.experiments.analysis.executor import open_executor
    from aiko.experiments.analysis.fit import fit_trials, parse_bounds
    from aiko.experiments.analysis.replay import load_replay
    from aiko.experiments.analysis.replay_files import shifted, simulate_replay
    from aiko.experiments.cli.args import Progress

    names = [n.strip() for n in args.params.split(",") if n.strip()]
    bounds = parse_bounds(args.bounds, names)
    inputs = [load_replay(p) for p in trial_files("fit", args.trials)]
    out_folder("fit", args.out)
    progress = Progress(args.budget, sys.stderr.isatty())
    with open_executor(*executor_args(args)) as ex:
        res = fit_trials(inputs, names, bounds=bounds, servo=args.servo, u_tol=args.u_tol,
                         max_iter=None if args.max_iter is None else int(args.max_iter),
                         method=args.method,
                         budget=int(args.budget), executor=ex,
                         progress=lambda n, best: progress(n))
    progress.close()
    units = {"mu": "", "mu_x": "", "mu_y": "", "backlash": " deg", "delay": " s"}
    for n in names:
        print(f"{n:9s} {res.start[n]:9.4f} -> {res.fitted[n]:9.4f}{units[n]}  "
              f"(bounds {res.bounds[n][0]:g}..{res.bounds[n][1]:g})")
    print(f"mean RMS error of link 6: {100 * res.error_before:.2f} cm -> "
          f"{100 * res.error_after:.2f} cm; {res.evaluations} evaluations, {res.simulations} "
          f"simulations, {res.wall_s:.1f} s ({res.method}: {res.message})")
    doc = res.to_dict()
    (args.out / "fit.json").write_text(json.dumps(doc, indent=2) + "\n")
    physics = res.physics()
    for inp, m in zip(inputs, res.per_trial, strict=True):
        if "rms_error_m" not in m:
            print(f"{inp.path}: no comparison with the fitted values ({m.get('error')})")
            continue
        paths, _, kind = simulate_replay(inp, **physics)
        paths = shifted(inp, paths, res.fitted.get("delay", 0.0))
        fitted = ", ".join(f"{n} {res.fitted[n]:.3g}" for n in names)
        fig = comparison_figure(paths, f"{inp.gait}: experiment and fitted model ({fitted}), "
                                       f"link 6 ({inp.path.stem})", m)
        png = args.out / f"{inp.path.stem}-fit.png"
        fig.savefig(png, dpi=110)
        print(f"{inp.path.name}: RMS {100 * m['rms_error_m']:.2f} cm; figure: {png}")
    print(f"fit: {args.out / 'fit.json'}")
    return 0
