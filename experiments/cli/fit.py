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

METHODS = ("least-squares", "nelder-mead", "de")
NOISE_MM = 0.5
PROFILE_POINTS = 4
WINDOW = 1.5

__all__ = ["add_parser", "cmd_fit"]


def add_parser(sub) -> None:
    f = sub.add_parser(
        "fit", help="fit model parameters (friction, free play, delay) to logged trials, "
                    "with their ranges",
        description="Find the model parameters that bring the replays of the trials closest "
                    "to their motion capture (link 6, sample by sample, weighed by the motion "
                    "capture's noise), bounded, with scipy.optimize; then a 95 %% range for "
                    "each from its profile, correlations, and which parameters these trials "
                    "cannot pin. Writes fit.json, the profiles' figure and one figure per "
                    "trial with the fitted model into DIR.")
    f.add_argument("trials", nargs="+", metavar="TRIAL.mcap", type=Path,
                   help="trial logs, or a campaign's folder for all its completed trials")
    f.add_argument("--params", required=True, metavar="LIST",
                   help="comma-separated: mu (isotropic), mu_x,mu_y, or mu,ratio (their "
                        "mean and mu_y/mu_x); backlash (deg); delay (s)")
    f.add_argument("--bounds", default=None, metavar="SPEC",
                   help="e.g. mu=0.05:0.6,backlash=0:8 (defaults: friction 0.02:1, "
                        "ratio 0.2:5, backlash 0:10 deg, delay -0.3:0.3 s)")
    add_named_flags(f, "fit", "servo")
    add_named_flags(f, "fit", "u_tol", "max_iter")
    f.add_argument("--method", choices=METHODS, default="least-squares",
                   help="least-squares (default: the residuals, their Jacobian's replays in "
                        "parallel), nelder-mead, or de (differential evolution) on the mean "
                        "RMS error")
    f.add_argument("--budget", type=positive("budget"), default=60, metavar="N",
                   help="the search's evaluations at most (default 60; least squares "
                        "counts a Jacobian as one a parameter)")
    f.add_argument("--noise-mm", type=positive("noise-mm"), default=NOISE_MM, metavar="MM",
                   help=f"the motion capture's noise, each coordinate (default {NOISE_MM})")
    f.add_argument("--window", type=float, default=WINDOW, metavar="S",
                   help=f"align the replay on the experiment by a rigid motion in windows of S "
                        f"seconds before comparing (default {WINDOW}; 0: sample by sample, and "
                        f"on a floor with obstacles)")
    f.add_argument("--profile-points", type=int, default=PROFILE_POINTS, metavar="N",
                   help=f"points of each parameter's profile (default {PROFILE_POINTS}; 0: "
                        "ranges from the curvature at the optimum alone)")
    f.add_argument("--profile-refit", type=int, default=0, metavar="N",
                   help="re-fit the other parameters at each profile point by N least-squares "
                        "evaluations (default 0: one Gauss-Newton step from the optimum; more "
                        "follows a curved valley, at a Jacobian's replays per evaluation)")
    add_executor_options(f)
    f.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                   help=f"folder for fit.json and the figures (default: here; {OUT_FOLDER_HELP})")
    f.set_defaults(func=cmd_fit)


def cmd_fit(args: argparse.Namespace) -> int:
    from aiko.experiments.analysis.executor import open_executor
    from aiko.experiments.analysis.fit import check_options, fit_trials, parse_bounds
    from aiko.experiments.analysis.fit_report import report_lines
    from aiko.experiments.analysis.replay import load_replay
    from aiko.experiments.cli.args import Progress

    names = [n.strip() for n in args.params.split(",") if n.strip()]
    bounds = parse_bounds(args.bounds, names)
    check_options(args.method, args.noise_mm, args.profile_points, args.profile_refit,
                  args.window)
    inputs = [load_replay(p) for p in trial_files("fit", args.trials)]
    out_folder("fit", args.out)
    progress = Progress(args.budget, sys.stderr.isatty())
    with open_executor(*executor_args(args)) as ex:
        res = fit_trials(inputs, names, bounds=bounds, servo=args.servo, u_tol=args.u_tol,
                         max_iter=None if args.max_iter is None else int(args.max_iter),
                         method=args.method, budget=int(args.budget), noise_mm=args.noise_mm,
                         profile_points=args.profile_points,
                         profile_refit=args.profile_refit, window=args.window, executor=ex,
                         progress=lambda n, best: progress(n))
    progress.close()
    for line in report_lines(res):
        print(line)
    aligned = (f"; aligned in {res.window:g} s windows {100 * res.aligned[0]:.2f} cm -> "
               f"{100 * res.aligned[1]:.2f} cm" if res.window > 0 else "")
    print(f"mean RMS error of link 6: {100 * res.error_before:.2f} cm -> "
          f"{100 * res.error_after:.2f} cm{aligned} (the motion capture's noise alone: "
          f"{100 * res.floor_rms_m():.2f} cm); {res.evaluations} evaluations, "
          f"{res.simulations} simulations, {res.search_wall_s:.1f} s search, "
          f"{res.wall_s:.1f} s with the ranges ({res.method}: {res.message})")
    (args.out / "fit.json").write_text(json.dumps(res.to_dict(), indent=2) + "\n")
    _figures(args, res, inputs)
    print(f"fit: {args.out / 'fit.json'}")
    return 0


def _figures(args: argparse.Namespace, res, inputs) -> None:
    from aiko.experiments.analysis.compare import comparison_figure
    from aiko.experiments.analysis.fit_report import profiles_figure
    from aiko.experiments.analysis.replay import shifted

    if res.profiles:
        png = args.out / "fit-profiles.png"
        profiles_figure(res).savefig(png, dpi=110)
        print(f"profiles: {png}")
    for inp, m, paths in zip(inputs, res.per_trial, res.paths, strict=True):
        if "rms_error_m" not in m:
            print(f"{inp.path}: no comparison with the fitted values ({m.get('error')})")
            continue
        paths = shifted(inp, paths, res.fitted.get("delay", 0.0))
        fitted = ", ".join(f"{n} {res.fitted[n]:.3g}" for n in res.names)
        fig = comparison_figure(paths, f"{inp.gait}: experiment and fitted model ({fitted}), "
                                       f"link 6 ({inp.path.stem})", m)
        png = args.out / f"{inp.path.stem}-fit.png"
        fig.savefig(png, dpi=110)
        print(f"{inp.path.name}: RMS {100 * m['rms_error_m']:.2f} cm; figure: {png}")
