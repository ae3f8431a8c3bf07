"""`aiko preview`: a head path dragged through the snake's body by the tractrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiko.experiments.cli.args import positive
from aiko.experiments.cli.flags import add_named_flags

__all__ = ["add_parser", "cmd_preview"]


def add_parser(sub) -> None:
    p = sub.add_parser(
        "preview", help="a kinematic first look at a head path (tractrix)",
        description="Drag the snake's body along a head path: the snake starts straight with "
                    "its head at the first waypoint, the head follows the waypoints and every "
                    "link follows its leader on a tractrix (Sreenivasan et al.). Purely "
                    "kinematic: a body that only follows its head does not propel itself on "
                    "a flat floor, so this shows where the links would pass, not whether a "
                    "gait can get there (use `aiko simulate` or `aiko run` for that).")
    p.add_argument("path", type=Path, metavar="PATH.toml",
                   help="[path] waypoints = [[x, y], ...] m (the format of aiko run --path)")
    p.add_argument("--out", type=Path, default=None, metavar="FILE.png",
                   help="the figure (default: PATH-preview.png beside the path file); its "
                        "folder must exist")
    p.add_argument("--step", type=positive("step"), default=0.01, metavar="M",
                   help="the head's straight moves, m (default 0.01)")
    p.add_argument("--every", type=positive("every"), default=0.25, metavar="M",
                   help="draw a posture every this many m of the head's travel (default 0.25)")
    add_named_flags(p, "preview", "links")
    p.set_defaults(func=cmd_preview)


def cmd_preview(args: argparse.Namespace) -> int:
    import matplotlib.pyplot as plt

    from aiko.experiments.analysis.preview import preview_figure, preview_path
    from aiko.experiments.files.path_file import load_path_toml
    from aiko.model import SnakeParams

    spec = load_path_toml(args.path)
    result = preview_path(spec.waypoints, SnakeParams(n=args.links), args.step)
    out = args.out or args.path.with_name(args.path.stem + "-preview.png")
    fig = preview_figure(result, f"{args.path.name}: {args.links} links", args.every)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    tail = result.postures[:, -1, :2]
    import numpy as np
    tail_path = float(np.sum(np.hypot(*np.diff(tail, axis=0).T)))
    print(f"head moved {result.s[-1]:.3f} m in {len(result.s) - 1} steps, tail {tail_path:.3f} m; "
          f"{1e3 * result.compute_s:.1f} ms; lengths kept to {result.length_error():.1e} m")
    print(f"figure: {out}")
    return 0
