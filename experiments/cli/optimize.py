"""`aiko optimize`: search a gait's parameters for speed, cost of transport, or both."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aiko.experiments.cli.args import (
    ArgError,
    add_executor_options,
    executor_args,
    number,
    positive,
)
from aiko.experiments.cli.flags import add_named_flags

__all__ = ["add_parser", "cmd_optimize"]


def add_parser(sub) -> None:
    s = sub.add_parser(
        "optimize", help="search a gait's parameters for speed, cost of transport, or both",
        description="CMA-ES (one objective) or NSGA-II (both: the speed/CoT Pareto front) over "
                    "some of a gait's parameters (degrees, as in gait files), on the model, "
                    "within the joint limits and what the modules' motors can follow. "
                    "Candidates run on a local process pool or a Dask cluster. DIR keeps the "
                    "history: the same command again goes on where a run stopped.")
    s.add_argument("gait", metavar="GAIT", help="a preset name or a gait .toml file (the start)")
    s.add_argument("--vary", required=True, metavar="NAMES",
                   help="e.g. A_h,omega_h,delta_h,A_v,delta_0")
    s.add_argument("--bounds", default=None, metavar="SPEC",
                   help="e.g. 'A_h=10:40,omega_h=30:150' (deg, deg/s; defaults per name)")
    s.add_argument("--objective", choices=("speed", "cot", "both"), default="speed")
    s.add_argument("--duration", type=positive("duration"), default=12.0, metavar="S",
                   help="simulated time per candidate, s (default 12; speed and CoT are "
                        "measured over its last two thirds)")
    s.add_argument("--mu", default=None, metavar="MU[,MU...]",
                   help="floor frictions to evaluate each candidate on (default: the gait's)")
    s.add_argument("--robust", choices=("worst", "mean"), default="worst",
                   help="over several --mu: score the worst (default) or the mean")
    s.add_argument("--budget", type=number("budget", int, lambda v: v >= 1, "be >= 1"),
                   default=200, metavar="N",
                   help="candidates (default 200), in whole generations: the last may "
                        "go beyond it")
    s.add_argument("--popsize", type=number("popsize", int, lambda v: v >= 2, "be >= 2"),
                   default=None, metavar="N", help="candidates per generation")
    s.add_argument("--seed", type=number("seed", int, lambda v: v >= 0, "be >= 0"), default=1)
    s.add_argument("--sigma0", type=number("sigma0", float, lambda v: 0 < v <= 1, "lie in (0, 1]"),
                   default=0.2, metavar="F",
                   help="CMA-ES's initial step, as a fraction of each bound's width (default 0.2)")
    s.add_argument("--max-duty", type=number("max-duty", float, lambda v: 0 < v <= 1,
                                             "lie in (0, 1]"),
                   default=0.8, metavar="F",
                   help="the largest fraction of the motors' full-duty speed a gait may need "
                        "(default 0.8)")
    s.add_argument("--max-lift", type=positive("max-lift"), default=0.12, metavar="M",
                   help="a candidate that lifts a link's centre more than this above its "
                        "resting height is infeasible (default 0.12 m)")
    add_named_flags(s, "optimize", "backlash_deg", "servo", "dt", "scene")
    add_executor_options(s)
    s.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="the run's folder (created with its parents if it does not exist; an "
                        "existing run there is continued)")
    s.set_defaults(func=cmd_optimize)


def cmd_optimize(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from aiko.experiments.analysis.executor import open_executor
    from aiko.experiments.analysis.optimize import (
        OptimizeConfig,
        parse_bounds,
        parse_mu,
        parse_vary,
    )
    from aiko.experiments.analysis.optimize_run import RunFolder, write_outputs
    from aiko.experiments.files.gait_file import get_gait
    from aiko.experiments.files.scene_file import load_scene, scene_json
    gait = get_gait(args.gait)
    vary = parse_vary(args.vary)
    scene = load_scene(args.scene)
    config = OptimizeConfig(vary=vary, bounds=parse_bounds(args.bounds, vary),
                            objective=args.objective, duration=args.duration,
                            mu=parse_mu(args.mu), robust=args.robust, budget=args.budget,
                            popsize=args.popsize, seed=args.seed, max_duty=args.max_duty,
                            max_lift=args.max_lift, dt=args.dt, sigma0=args.sigma0,
                            backlash_deg=args.backlash_deg, servo=args.servo,
                            scene=None if scene.empty else json.loads(scene_json(scene)))
    try:
        folder = RunFolder.open(args.out, gait, config)
    except OSError as exc:
        raise ArgError(f"aiko optimize: --out {args.out}: {exc.strerror}") from exc
    done = len(folder.previous)
    where = f"Dask {args.scheduler}" if args.scheduler else "local pool"
    if done:
        print(f"continuing {args.out}: {done} evaluations in its history")
    bar = tqdm(total=config.budget, initial=min(done, config.budget), unit="candidate",
               disable=not sys.stderr.isatty())
    try:
        with open_executor(*executor_args(args)) as ex:
            result = folder.run(ex, on_row=lambda row: bar.update())
    except KeyboardInterrupt:
        bar.close()
        print(f"stopped: {len(folder.read_history())} evaluations kept in {args.out}; the same "
              "command goes on from there", file=sys.stderr)
        return 130
    bar.close()
    files = write_outputs(args.out, gait, result, folder.start_row)
    s0 = folder.start_row
    print(f"{result.evaluations} evaluations ({result.evaluated} simulated now, on the {where}) "
          f"in {result.wall_s:.1f} s; {sum(r['feasible'] for r in result.history)} feasible; "
          f"stopped: {result.stopped}")
    print(f"start  {gait.name}: " + _describe(s0))
    if result.best is None:
        print("no feasible candidate found")
    else:
        b = result.best
        params = ", ".join(f"{k} {b[k]:.1f}" for k in config.vary)
        print(f"best   {params}: " + _describe(b)
              + (f" ({b['speed_m_s'] / s0['speed_m_s']:.2f}x the start's speed)"
                 if s0.get("feasible") and s0["speed_m_s"] > 0 else ""))
        if result.front:
            print(f"Pareto front: {len(result.front)} gaits")
    for f in files:
        print(f"wrote {f}")
    return 0


def _describe(row: dict) -> str:
    if not row.get("feasible"):
        return f"infeasible ({row.get('reason', '')})"
    return (f"speed {100 * row['speed_m_s']:.2f} cm/s, CoT {row['cot']:.3g}, "
            f"drive work {row['work_J']:.2f} J")
