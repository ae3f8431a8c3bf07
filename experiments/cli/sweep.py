"""`aiko sweep`: the model over a grid of gait and model parameters."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from aiko.experiments.cli.args import (
    OUT_FOLDER_HELP,
    add_executor_options,
    executor_args,
    out_folder,
    positive,
)
from aiko.experiments.cli.flags import add_named_flags

__all__ = ["add_parser", "cmd_sweep"]


def add_parser(sub) -> None:
    s = sub.add_parser(
        "sweep", help="run the model over a grid of gait and model parameters",
        description="Simulate a gait at every point of a grid of its parameters (degrees, as "
                    "in gait files) and the floor's friction, on a local process pool (one "
                    "worker per core) or a Dask cluster; write the table (CSV) and a heat map "
                    "(two varied parameters) or a line plot (one) into DIR.")
    s.add_argument("gait", metavar="GAIT", help="a preset name or a gait .toml file")
    s.add_argument("--grid", required=True, metavar="SPEC",
                   help="e.g. 'mu=0.1:0.5:9,A_h=20:40:5' (NAME=LO:HI:N or NAME=V)")
    s.add_argument("--duration", type=positive("duration"), default=15.0, metavar="S",
                   help="simulated time per point, s (default 15)")
    s.add_argument("--metric", choices=("distance", "speed", "heading", "path"),
                   default="distance", help="what the figure shows (default distance)")
    add_executor_options(s)
    add_named_flags(s, "sweep", "scene")
    s.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                   help=f"folder for the table and the figure (default: here; {OUT_FOLDER_HELP})")
    s.set_defaults(func=cmd_sweep)


def write_table(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def cmd_sweep(args: argparse.Namespace) -> int:
    import time

    from tqdm import tqdm

    from aiko.experiments.analysis.executor import open_executor
    from aiko.experiments.analysis.sweep import grid_points, parse_grid, run_sweep, sweep_figure
    from aiko.experiments.files.gait_file import get_gait
    from aiko.experiments.files.scene_file import load_scene
    gait = get_gait(args.gait)
    grid = parse_grid(args.grid)
    scene = load_scene(args.scene)
    out_folder("sweep", args.out)
    n_points = len(grid_points(grid))
    w0 = time.perf_counter()
    with open_executor(*executor_args(args)) as ex:
        with tqdm(total=n_points, unit="point", disable=not sys.stderr.isatty()) as bar:
            rows = run_sweep(gait, grid, args.duration, executor=ex,
                             progress=lambda: bar.update(), scene=scene)
    wall = time.perf_counter() - w0
    stem = f"sweep-{gait.name}"
    table = write_table(args.out / f"{stem}.csv", rows)
    fig = sweep_figure(rows, grid, args.metric,
                       f"{gait.name}, {args.duration:g} s: {args.metric} over "
                       + " x ".join(k for k, v in grid.items() if len(v) > 1))
    png = args.out / f"{stem}.png"
    fig.savefig(png, dpi=110)
    failed = [r for r in rows if r["error"]]
    print(f"{n_points} points in {wall:.1f} s ({'Dask ' + args.scheduler if args.scheduler else 'local pool'}); "
          f"{len(failed)} failed")
    for r in failed[:5]:
        point = ", ".join(f"{k}={r[k]:g}" for k in grid)
        print(f"  failed: {point}: {r['error']}")
    print(f"table: {table}")
    print(f"figure: {png}")
    return 0
